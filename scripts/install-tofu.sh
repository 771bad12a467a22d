#!/usr/bin/env bash
# Builds OpenTofu from its Go module (through the Go module proxy, like any
# other module) into .bin/tofu, for the Terraform provider's acceptance
# tests (terraform/provider). One `go build`: about 5 minutes from a cold
# cache on two cores. Idempotent: when .bin/tofu is there it only prints
# its version. TOFU_VERSION overrides the version built.
# Prints the binary's path (last line of stdout).
set -euo pipefail
cd "$(dirname "$0")/.."
version=${TOFU_VERSION:-v1.12.6}
bin="$PWD/.bin/tofu"

if [ ! -x "$bin" ]; then
	echo "building OpenTofu $version into .bin/tofu" >&2
	# The module has a replace directive, so `go install module@version`
	# refuses it: build inside the downloaded module instead.
	dir=$(go mod download -json "github.com/opentofu/opentofu@$version" |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	if [ -z "$dir" ] || [ ! -d "$dir" ]; then
		echo "install-tofu: go mod download github.com/opentofu/opentofu@$version gave no directory" >&2
		exit 1
	fi
	mkdir -p .bin
	tmp="$bin.tmp.$$"
	trap 'rm -f "$tmp"' EXIT
	# No cgo and no debug information: a static binary, and less to
	# compile and link.
	(cd "$dir" && GOWORK=off GOFLAGS=-buildvcs=false CGO_ENABLED=0 go build -trimpath \
		-ldflags "-s -w -X github.com/opentofu/opentofu/version.dev=no" \
		-o "$tmp" ./cmd/tofu)
	mv "$tmp" "$bin"
fi

# (TF_CLI_CONFIG_FILE may name a file that is not there: tofu would
# warn about it first.)
TF_CLI_CONFIG_FILE=/dev/null "$bin" version 2>&1 | grep -m1 '^OpenTofu' >&2 || true
echo "$bin"
