#!/usr/bin/env bash
# Installs what Isobar's build and tests need beyond Go: the Go modules
# (fetched by the go command itself), the Prometheus server that
# region's TestDashboardQueriesWithPrometheus runs (Debian's package, via
# scripts/install-prometheus.sh; needs root or sudo and apt) and OpenTofu,
# which the Terraform provider's acceptance tests drive (built from its Go
# module into .bin/tofu by scripts/install-tofu.sh), Debian's chromium,
# which the console's browser tests drive (scripts/install-chromium.sh),
# and Docker Compose
# v2 where only docker-compose 1.29 is installed (the plugin, built from
# its Go module by scripts/install-compose.sh), so that deploy/compose's
# tests run with both, and Helm (built from its Go module into .bin/helm
# by scripts/install-helm.sh), which deploy/helm's tests drive. .ci/run
# runs this first, so CI runs those tests instead of skipping them.
set -euo pipefail
cd "$(dirname "$0")/.."
# The Debian packages (downloads and unpacking: mostly waiting on the
# network and the disk) install in the background while the Go tools
# build (the CPU); apt allows one install at a time, so those two run in
# turn.
debs_log=$(mktemp)
(bash scripts/install-prometheus.sh >/dev/null && bash scripts/install-chromium.sh >/dev/null) >"$debs_log" 2>&1 &
debs=$!
go mod download
bash scripts/install-tofu.sh >/dev/null
bash scripts/install-helm.sh >/dev/null
bash scripts/install-compose.sh
if ! wait "$debs"; then
	cat "$debs_log" >&2
	rm -f "$debs_log"
	echo "install-deps: installing Debian's prometheus or chromium failed (above)" >&2
	exit 1
fi
cat "$debs_log" >&2
rm -f "$debs_log"
