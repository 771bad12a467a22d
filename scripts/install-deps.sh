#!/usr/bin/env bash
# Installs what Isobar's build and tests need beyond Go. Today that is only
# the Go modules (fetched by the go command itself); later issues add tools
# here (Prometheus, NATS CLI for comparisons) so a fresh machine needs only
# this script.
set -euo pipefail
cd "$(dirname "$0")/.."
go mod download
