#!/usr/bin/env bash
# Failover drill benchmark (docs/BENCHMARKS.md, "Failover drills"): starts
# `isobar dev` with two regions behind a 40 ms one-way emulated WAN, runs
# `isobar drill failover --promote` with a kill and with a partition of the
# primary at each rate, writes each JSON report to the output directory and
# prints one summary line per drill, then stops dev.
#
# Usage: scripts/drill-bench.sh [OUTDIR] (default: a new temp dir)
# Environment: RATES (default "1000 10000"), FAULTS (default "kill
# partition"), DURATION (default 10s), BASE_PORT (default 25000).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$(mktemp -d)}
mkdir -p "$out"
rates=${RATES:-1000 10000}
faults=${FAULTS:-kill partition}
duration=${DURATION:-10s}
base=${BASE_PORT:-25000}
bin="$out/isobar"
(cd "$repo" && go build -o "$bin" ./cmd/isobar)
data=$(mktemp -d)
"$bin" dev --data-dir "$data" --regions r0,r1 --base-port "$base" --wan-latency 40ms --log-level error >"$out/dev.log" 2>&1 &
dev=$!
trap 'kill -INT $dev 2>/dev/null; wait $dev 2>/dev/null; rm -rf "$data"' EXIT
for _ in $(seq 1 180); do
	[ -f "$data/endpoints.json" ] && break
	kill -0 $dev 2>/dev/null || { echo "dev exited:" >&2; cat "$out/dev.log" >&2; exit 1; }
	sleep 1
done
[ -f "$data/endpoints.json" ] || { echo "dev did not write endpoints.json" >&2; exit 1; }
summary() {
	python3 - "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
t = r["timeline"]
def off(k):
    p = t.get(k)
    return "-" if p is None else "%+d" % p["offset_ms"]
print("rate %s %-9s acked %6d  rto publish %5d ms (p99 %5d)  consume %5d ms  rpo %s msgs / %s ms  lost %d  late %d  redelivered %d (in flight %s, bound %s)  stored twice %d  order %d  passed %s  [detected %s fenced %s promoted %s first publish %s]" % (
    r.get("rate"), r["fault"], r.get("acknowledged", 0), r["rto_publish_ms"]["max"], r["rto_publish_ms"]["p99"], r["rto_consume_ms"]["max"],
    r.get("rpo_messages"), r.get("rpo_ms"), r["lost"], r["late"], r["duplicated_redelivery"], r.get("in_flight_at_cut"), r.get("redelivery_bound"), r["duplicated_copy"], r["order_violations"], r["passed"],
    off("detected"), off("fenced"), off("promoted"), off("first_publish_ok")))
PY
}
for rate in $rates; do
	for fault in $faults; do
		json="$out/drill-$rate-$fault.json"
		"$bin" drill failover --endpoints "$data/endpoints.json" --namespace "geo/b$rate$fault" --from r0 --to r1 \
			--fault "$fault" --promote --duration "$duration" --rate "$rate" --json "$json" --log-level error >"$out/drill-$rate-$fault.txt" 2>&1 || true
		if [ -f "$json" ]; then
			summary "$json"
		else
			echo "rate $rate $fault: no report"; cat "$out/drill-$rate-$fault.txt"
		fi
	done
done
echo "reports in $out"
