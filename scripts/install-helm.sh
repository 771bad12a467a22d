#!/usr/bin/env bash
# Builds Helm from its Go module (helm.sh/helm/v4, through the Go module
# proxy like any other module, with scripts/build-go-module.sh) into
# .bin/helm, for the chart's tests (deploy/helm: helm lint --strict and
# helm template of deploy/helm/isobar). One `go build`. Idempotent: when
# .bin/helm is there it only prints its version. HELM_VERSION overrides
# the version built. Prints the binary's path (last line of stdout).
set -euo pipefail
cd "$(dirname "$0")/.."
version=${HELM_VERSION:-v4.3.2}
bin="$PWD/.bin/helm"

if [ ! -x "$bin" ]; then
	echo "building Helm $version into .bin/helm" >&2
	bash scripts/build-go-module.sh helm.sh/helm/v4 "$version" ./cmd/helm "$bin" \
		"-s -w -X helm.sh/helm/v4/internal/version.version=$version"
fi

"$bin" version --short >&2 || true
echo "$bin"
