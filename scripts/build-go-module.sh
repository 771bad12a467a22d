#!/usr/bin/env bash
# Builds a command of a Go module, fetched through the Go module proxy
# like any module, into a file:
#
#   scripts/build-go-module.sh MODULE VERSION PACKAGE OUTPUT [LDFLAGS]
#
# It builds inside the module as downloaded: `go install module@version`
# refuses a module whose go.mod has replace or exclude directives, and
# OpenTofu's and Docker Compose's both do. A static binary without debug
# information (CGO_ENABLED=0, -trimpath, LDFLAGS default "-s -w"),
# written aside and renamed into place. OUTPUT must be an absolute path.
# Used by scripts/install-tofu.sh and scripts/install-compose.sh.
set -euo pipefail
if [ $# -lt 4 ]; then
	echo "usage: $0 MODULE VERSION PACKAGE OUTPUT [LDFLAGS]" >&2
	exit 2
fi
mod=$1 version=$2 pkg=$3 out=$4 ldflags=${5:-"-s -w"}
case $out in
/*) ;;
*) echo "build-go-module: OUTPUT must be an absolute path: $out" >&2; exit 2 ;;
esac
dir=$(go mod download -json "$mod@$version" |
	sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
if [ -z "$dir" ] || [ ! -d "$dir" ]; then
	echo "build-go-module: go mod download $mod@$version gave no directory" >&2
	exit 1
fi
mkdir -p "$(dirname "$out")"
tmp="$out.tmp.$$"
trap 'rm -f "$tmp"' EXIT
(cd "$dir" && GOWORK=off GOFLAGS=-buildvcs=false CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$tmp" "$pkg")
mv "$tmp" "$out"
