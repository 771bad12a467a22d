#!/usr/bin/env bash
# Checks wire against the real Pulsar Go client (v0.19.0): builds the
# client's module in a temp copy with our interop test dropped into its
# internal package (its frame helpers are internal, so the test cannot live
# in this module). See wire/testdata/client_interop_test.go.txt.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
ver=v0.19.0
go mod download "github.com/apache/pulsar-client-go@$ver"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$(go env GOMODCACHE)/github.com/apache/pulsar-client-go@$ver" "$work/client"
chmod -R u+w "$work/client"
cd "$work/client"
cp "$repo/wire/testdata/client_interop_test.go.txt" pulsar/internal/isobar_interop_test.go
printf '\nrequire github.com/isobar-mq/isobar v0.0.0\nreplace github.com/isobar-mq/isobar => %s\n' "$repo" >> go.mod
GOFLAGS=-mod=mod go test -vet=off -count=1 -run Isobar -v ./pulsar/internal/
