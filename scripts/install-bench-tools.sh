#!/usr/bin/env bash
# Installs the third-party tools that scripts/perf-compare.sh needs, with
# `go install` from the Go module proxy, into a repo-local bin directory
# (default: <repo>/.bin; override with BENCH_BIN). Idempotent: a tool that
# is already there at the pinned version is skipped.
#
#   nats-server  github.com/nats-io/nats-server/v2   (NATS_SERVER_VERSION)
#   nats (CLI)   github.com/nats-io/natscli/nats     (NATSCLI_VERSION; v0.5.1 is not in the proxy here)
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
bin=${BENCH_BIN:-$repo/.bin}
NATS_SERVER_VERSION=${NATS_SERVER_VERSION:-v2.15.2}
NATSCLI_VERSION=${NATSCLI_VERSION:-v0.5.0}
mkdir -p "$bin"

# installed_version BIN MODULE prints the module version recorded in a Go binary.
installed_version() {
	[ -x "$1" ] || return 0
	go version -m "$1" 2>/dev/null | awk -v m="$2" '$1=="mod" && $2==m {print $3}'
}

install_one() { # name module pkg version
	local name=$1 module=$2 pkg=$3 version=$4
	local have
	have=$(installed_version "$bin/$name" "$module")
	if [ "$have" = "$version" ]; then
		echo "$name $version already in $bin"
		return
	fi
	echo "installing $name $version into $bin (was: ${have:-none})"
	GOBIN="$bin" GOFLAGS=-buildvcs=false go install "$pkg@$version"
}

install_one nats-server github.com/nats-io/nats-server/v2 github.com/nats-io/nats-server/v2 "$NATS_SERVER_VERSION"
install_one nats github.com/nats-io/natscli github.com/nats-io/natscli/nats "$NATSCLI_VERSION"
"$bin/nats-server" --version
"$bin/nats" --version
