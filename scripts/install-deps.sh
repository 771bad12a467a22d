#!/usr/bin/env bash
# Installs what Isobar's build and tests need beyond Go: the Go modules
# (fetched by the go command itself) and the Prometheus server that
# region's TestDashboardQueriesWithPrometheus runs (Debian's package, via
# scripts/install-prometheus.sh; needs root or sudo and apt). .ci/run runs
# this first, so CI runs that test instead of skipping it.
set -euo pipefail
cd "$(dirname "$0")/.."
go mod download
bash scripts/install-prometheus.sh >/dev/null
