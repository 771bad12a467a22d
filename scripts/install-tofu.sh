#!/usr/bin/env bash
# Builds OpenTofu from its Go module (through the Go module proxy, like any
# other module, with scripts/build-go-module.sh) into .bin/tofu, for the
# Terraform provider's acceptance tests (terraform/provider). One `go
# build`: about 5 minutes from a cold cache on two cores. Idempotent: when .bin/tofu is there it only prints
# its version. TOFU_VERSION overrides the version built.
# Prints the binary's path (last line of stdout).
set -euo pipefail
cd "$(dirname "$0")/.."
version=${TOFU_VERSION:-v1.12.6}
bin="$PWD/.bin/tofu"

if [ ! -x "$bin" ]; then
	echo "building OpenTofu $version into .bin/tofu" >&2
	bash scripts/build-go-module.sh github.com/opentofu/opentofu "$version" ./cmd/tofu "$bin" \
		"-s -w -X github.com/opentofu/opentofu/version.dev=no"
fi

# (TF_CLI_CONFIG_FILE may name a file that is not there: tofu would
# warn about it first.)
TF_CLI_CONFIG_FILE=/dev/null "$bin" version 2>&1 | grep -m1 '^OpenTofu' >&2 || true
echo "$bin"
