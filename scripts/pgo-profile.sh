#!/usr/bin/env bash
# Makes a CPU profile for profile-guided optimisation (go build -pgo) of
# the isobar binary: the server of `isobar standalone` under the load of
# scripts/perf-compare.sh (Isobar only: 1 KiB messages flat out on one
# topic and on four partitions, then one producer at 10,000 msg/s), the
# CPU profiles of the flat-out single-topic run and of the 10k msg/s run
# merged into one. About 4 minutes. Prints the profile's path.
#
#   scripts/pgo-profile.sh                          # -> .bench-results/pgo-<time>/merged.pgo
#   SERVER_PGO=off SKIP_NATS=1 scripts/perf-compare.sh            # then A/B: without
#   SERVER_PGO=<that path> SKIP_NATS=1 scripts/perf-compare.sh    # and with it
#
# No profile is checked in (nor cmd/isobar/default.pgo): on this 2-vCPU
# machine the gain was not measurable; docs/BENCHMARKS.md, "Profile-guided
# optimisation", has the runs.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
out_dir=${OUT_DIR:-$repo/.bench-results/pgo-$(date -u +%Y%m%dT%H%M%SZ)}
# Profiled without a profile, so that each profile describes the same code.
SERVER_PGO=off PROFILE=1 SKIP_NATS=1 SKIP_CPU=1 SKIP_BACKLOG=1 OUT_DIR="$out_dir" \
	bash "$repo/scripts/perf-compare.sh" >/dev/null
for p in cpu-t1-max cpu-lat; do
	[ -s "$out_dir/$p.pprof" ] || { echo "pgo-profile: $out_dir/$p.pprof missing" >&2; exit 1; }
done
go tool pprof -proto "$out_dir/cpu-t1-max.pprof" "$out_dir/cpu-lat.pprof" >"$out_dir/merged.pgo"
echo "$out_dir/merged.pgo"
