#!/usr/bin/env bash
# Broker produce throughput and latency of Isobar vs NATS JetStream R3, on
# this machine, in one run (issue 3, acceptance point 5). See the section
# "Broker produce throughput vs NATS JetStream" in docs/BENCHMARKS.md.
#
#   scripts/install-bench-tools.sh   # once: nats-server and nats CLI into .bin/
#   scripts/perf-compare.sh > summary.md
#
# What it does, in order (progress on stderr, markdown summary on stdout,
# everything else under $OUT_DIR):
#  1. records the machine: CPUs, memory, kernel, the disk (`isobar perf disk`),
#     Go version, the repo's commit;
#  2. builds isobar once and starts `isobar standalone` on a temp data dir
#     (default settings: 3 bookies, journal fdatasync on, ledgers E=3 Qw=2
#     Qa=2), on 6650/8080 or free ports if those are taken;
#  3. for one topic and for a 4-partition topic, 1 KiB varied JSON payloads,
#     batching on (isobar perf defaults: 1000 msgs / 1 ms):
#       a. `isobar perf produce` flat out for $DURATION s (producer only:
#          the throughput that the ratios use);
#       b. the same with `isobar perf consume` alongside (end-to-end latency
#          at saturation);
#       c. at half of (a)'s rate with the consumer alongside (the p99
#          publish latency target);
#  4. stops Isobar, starts a 3-node JetStream cluster (file storage in temp
#     dirs, loopback, cluster routes), and runs `nats bench js pub async`
#     with 1 KiB messages into an R3 file stream: once with the default
#     sync (sync_interval 2 min: no fsync per write), once with
#     `sync_interval: always` (fsync per write);
#  5. prints the table, the ratios and the pass/fail of each target.
#
# Environment (defaults in brackets):
#   DURATION [30]          seconds per Isobar run
#   PRODUCERS [2]          isobar perf --producers
#   MAX_PENDING [2000]     isobar perf --max-pending (per producer and partition)
#   WARMUP [10]            seconds of flat-out produce on a throw-away topic
#                          before the measured Isobar runs (the JetStream
#                          runs are preceded by a bench of 1/5 their size)
#   NATS_MSGS [600000]     messages per JetStream run, default sync
#   NATS_MSGS_SYNC [200000] messages per JetStream run, sync_interval always
#   NATS_CLIENTS [2]       nats bench --clients (matched to PRODUCERS)
#   NATS_BATCH [500]       nats bench --batch (async publishes in flight)
#   OUT_DIR [.bench-results/<time>]  results.json, summary.md, raw logs
#   PROFILE [0]            1: run the server as internal/benchtools/pprofstandalone
#                          (same region, plus net/http/pprof) and save a CPU
#                          profile of the single-topic flat-out run
#   BENCH_BIN [.bin]       where install-bench-tools.sh put nats-server and nats
#   SKIP_NATS [0]          1: Isobar only
# Every process started here is stopped on exit (trap), and each also runs
# under `timeout` so that nothing outlives a killed script for long.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
DURATION=${DURATION:-30}
PRODUCERS=${PRODUCERS:-2}
MAX_PENDING=${MAX_PENDING:-2000}
WARMUP=${WARMUP:-10}
NATS_MSGS=${NATS_MSGS:-600000}
NATS_MSGS_SYNC=${NATS_MSGS_SYNC:-200000}
NATS_CLIENTS=${NATS_CLIENTS:-2}
NATS_BATCH=${NATS_BATCH:-500}
PROFILE=${PROFILE:-0}
SKIP_NATS=${SKIP_NATS:-0}
BENCH_BIN=${BENCH_BIN:-$repo/.bin}
OUT_DIR=${OUT_DIR:-$repo/.bench-results/$(date -u +%Y%m%dT%H%M%SZ)}
SIZE=1024

log() { printf '[perf-compare %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

if [ "$SKIP_NATS" != 1 ]; then
	for t in nats-server nats; do
		if [ ! -x "$BENCH_BIN/$t" ]; then
			log "$BENCH_BIN/$t missing: running scripts/install-bench-tools.sh"
			bash "$(dirname "$0")/install-bench-tools.sh" || die "installing the NATS tools failed"
			[ -x "$BENCH_BIN/$t" ] || die "$BENCH_BIN/$t still missing after install-bench-tools.sh"
		fi
	done
fi

mkdir -p "$OUT_DIR"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/isobar-perf-compare.XXXXXX")
pids=()

# stop_pid PID: TERM, up to 15 s, then KILL.
stop_pid() {
	local p=$1 i
	kill -TERM "$p" 2>/dev/null || return 0
	for i in $(seq 1 150); do
		kill -0 "$p" 2>/dev/null || { wait "$p" 2>/dev/null || true; return 0; }
		sleep 0.1
	done
	kill -KILL "$p" 2>/dev/null || true
	wait "$p" 2>/dev/null || true
}
forget_pid() { # drop one exact pid from pids
	local p keep=()
	for p in "${pids[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
	pids=("${keep[@]}")
}
stop_all() {
	local p
	for p in "${pids[@]}"; do stop_pid "$p"; done
	pids=()
}
cleanup() {
	stop_all
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
pick_port() { # preferred fallback
	local p=$1
	port_free "$p" && { echo "$p"; return; }
	p=$2
	while ! port_free "$p"; do p=$((p + 1)); done
	echo "$p"
}

# json_num FILE KEY: a number field from a one-line JSON object ("p99" and
# "p99_9" are different keys).
json_num() { grep -o "\"$2\":[-0-9.e+]*" "$1" | head -1 | cut -d: -f2; }
# fmt_int N: 12345.6 -> 12,346
fmt_int() { printf "%.0f" "$1" | sed ':a;s/\B[0-9]\{3\}\>/,&/;ta'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
ge() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a >= b) }'; }
le() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a <= b) }'; }

# ---------------------------------------------------------------- machine
log "results in $OUT_DIR, scratch in $work"
log "building isobar"
(cd "$repo" && go build -o "$work/isobar" ./cmd/isobar)
isobar=$work/isobar
server_cmd=("$isobar" standalone)
if [ "$PROFILE" = 1 ]; then
	(cd "$repo" && go build -o "$work/pprofstandalone" ./internal/benchtools/pprofstandalone)
fi

commit=unknown
if [ -f "$repo/.git/HEAD" ]; then # read, not `git`: the script may run where git is absent
	head=$(cat "$repo/.git/HEAD")
	case $head in
	ref:*)
		ref=${head#ref: }
		if [ -f "$repo/.git/$ref" ]; then
			commit=$(cat "$repo/.git/$ref")
		elif [ -f "$repo/.git/packed-refs" ]; then
			commit=$(awk -v r="$ref" '$2 == r { print $1 }' "$repo/.git/packed-refs")
		fi
		;;
	*) commit=$head ;;
	esac
fi
cpus=$(nproc)
cpu_model=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
mem_gib=$(awk '/^MemTotal/ { printf "%.1f", $2 / 1048576 }' /proc/meminfo)
kernel=$(uname -r)
gover=$(go version | awk '{ print $3 }')
fs=$(df -PT "$work" | awk 'NR == 2 { print $2 " on " $1 }')
log "measuring the disk under $work"
"$isobar" perf disk --dir "$work" --duration 2s --json >"$OUT_DIR/disk.json"
disk_fsync=$(json_num "$OUT_DIR/disk.json" FsyncPerSec)
disk_fsync_p50_ms=$(awk -v n="$(json_num "$OUT_DIR/disk.json" FsyncP50)" 'BEGIN { printf "%.2f", n / 1e6 }')
disk_seq=$(json_num "$OUT_DIR/disk.json" SeqSyncedMBps)
log "machine: $cpus CPUs ($cpu_model), $mem_gib GiB, $fs, fdatasync $(fmt_int "$disk_fsync")/s, synced seq $(fmt_int "$disk_seq") MB/s, $gover, commit $commit"

# ---------------------------------------------------------------- isobar
bport=$(pick_port 6650 16650)
hport=$(pick_port 8080 18080)
pport=$(pick_port 6060 16060)
svc=pulsar://127.0.0.1:$bport
adm=http://127.0.0.1:$hport
log "starting isobar standalone on $bport/$hport"
if [ "$PROFILE" = 1 ]; then
	server_cmd=("$work/pprofstandalone" --pprof "127.0.0.1:$pport")
fi
timeout -k 10 1500 "${server_cmd[@]}" --data-dir "$work/isobar-data" \
	--broker-port "$bport" --http-port "$hport" >"$OUT_DIR/standalone.log" 2>&1 &
pids+=($!)
for i in $(seq 1 120); do
	grep -q '^ready\.' "$OUT_DIR/standalone.log" && break
	kill -0 "${pids[-1]}" 2>/dev/null || die "standalone exited: $(tail -5 "$OUT_DIR/standalone.log")"
	sleep 0.5
done
grep -q '^ready\.' "$OUT_DIR/standalone.log" || die "standalone not ready after 60 s"

produce_common=(--service-url "$svc" --admin-url "$adm" --size "$SIZE" --producers "$PRODUCERS"
	--max-pending "$MAX_PENDING" --duration "${DURATION}s" --json)

# isobar_run NAME TOPIC RATE CONSUME [extra produce flags...]: writes
# $OUT_DIR/NAME.produce.json and, with CONSUME=1, NAME.consume.json.
isobar_run() {
	local name=$1 topic=$2 rate=$3 consume=$4
	shift 4
	local cpid=
	if [ "$consume" = 1 ]; then
		timeout -k 5 $((DURATION + 90)) "$isobar" perf consume "$topic" --service-url "$svc" --json \
			>"$OUT_DIR/$name.consume.json" 2>"$OUT_DIR/$name.consume.log" &
		cpid=$!
		pids+=("$cpid")
		sleep 3 # subscribed before the first message
	fi
	log "$name: produce $topic rate=${rate} consume=$consume for ${DURATION}s"
	local prof=
	if [ "$PROFILE" = 1 ] && [ "$name" = t1-max ]; then
		curl -sf -o "$OUT_DIR/cpu-$name.pprof" \
			"http://127.0.0.1:$pport/debug/pprof/profile?seconds=$((DURATION - 5))" &
		prof=$!
	fi
	timeout -k 5 $((DURATION + 60)) "$isobar" perf produce "$topic" "${produce_common[@]}" --rate "$rate" "$@" \
		>"$OUT_DIR/$name.produce.json" 2>"$OUT_DIR/$name.produce.log" ||
		die "$name: produce failed: $(tail -3 "$OUT_DIR/$name.produce.log")"
	if [ -n "$prof" ]; then wait "$prof" || log "profile fetch failed"; fi
	if [ -n "$cpid" ]; then
		sleep 3 # let the consumer drain
		kill -INT "$cpid" 2>/dev/null || true
		wait "$cpid" || log "$name: consumer exited with $?"
		forget_pid "$cpid"
	fi
	log "$name: $(fmt_int "$(json_num "$OUT_DIR/$name.produce.json" msg_per_sec)") msg/s, publish p99 $(json_num "$OUT_DIR/$name.produce.json" p99) ms"
}

run_id=$(date +%s)
log "warm-up: ${WARMUP}s flat out on a throw-away topic"
timeout -k 5 $((WARMUP + 60)) "$isobar" perf produce "persistent://public/default/warmup-$run_id" \
	--service-url "$svc" --rate 0 --size "$SIZE" --max-pending "$MAX_PENDING" --duration "${WARMUP}s" --json \
	>"$OUT_DIR/warmup.produce.json" 2>"$OUT_DIR/warmup.produce.log" || die "warm-up failed"
t1=persistent://public/default/perf-$run_id
p4=persistent://public/default/perf4-$run_id
for layout in t1 p4; do
	if [ "$layout" = t1 ]; then
		base=$t1 extra=()
	else
		base=$p4 extra=(--partitions 4)
	fi
	# each run on its own topic (partitioned topics created first so that
	# the consumer does not auto-create a non-partitioned one)
	for run in max maxc half; do
		if [ "$layout" = p4 ]; then
			"$isobar" perf produce "$base-$run" --service-url "$svc" --admin-url "$adm" \
				--partitions 4 -m 1 --json >/dev/null 2>>"$OUT_DIR/create.log"
		fi
	done
	isobar_run "$layout-max" "$base-max" 0 0 "${extra[@]}"
	isobar_run "$layout-maxc" "$base-maxc" 0 1 "${extra[@]}"
	max=$(json_num "$OUT_DIR/$layout-max.produce.json" msg_per_sec)
	half=$(awk -v m="$max" 'BEGIN { printf "%.0f", m / 2 }')
	isobar_run "$layout-half" "$base-half" "$half" 1 "${extra[@]}"
done
log "stopping isobar"
stop_all
if [ "$PROFILE" = 1 ] && [ -s "$OUT_DIR/cpu-t1-max.pprof" ]; then
	go tool pprof -top -nodecount=40 "$work/pprofstandalone" "$OUT_DIR/cpu-t1-max.pprof" \
		>"$OUT_DIR/cpu-t1-max.top.txt" 2>/dev/null || true
	go tool pprof -top -cum -nodecount=60 "$work/pprofstandalone" "$OUT_DIR/cpu-t1-max.pprof" \
		>"$OUT_DIR/cpu-t1-max.topcum.txt" 2>/dev/null || true
	cp "$work/pprofstandalone" "$OUT_DIR/" # pprof needs the binary for symbols
	log "CPU profile: $OUT_DIR/cpu-t1-max.pprof (top: cpu-t1-max.top.txt)"
fi

# ---------------------------------------------------------------- nats
# nats_run NAME SYNC MSGS: a fresh 3-node cluster, one bench, stopped.
nats_run() {
	local name=$1 sync=$2 msgs=$3 i dir syncline=
	dir=$work/$name
	mkdir -p "$dir"
	[ "$sync" = always ] && syncline='sync_interval: always'
	local cports=() rports=() routes=
	for i in 1 2 3; do
		cports+=("$(pick_port $((14221 + i)) $((24220 + 10 * i)))")
		rports+=("$(pick_port $((16221 + i)) $((26220 + 10 * i)))")
	done
	for i in 0 1 2; do routes+="nats-route://127.0.0.1:${rports[$i]}, "; done
	for i in 0 1 2; do
		cat >"$dir/n$i.conf" <<EOF
server_name: n$i
listen: 127.0.0.1:${cports[$i]}
jetstream {
  store_dir: "$dir/n$i"
  $syncline
}
cluster {
  name: bench
  listen: 127.0.0.1:${rports[$i]}
  routes: [${routes%, }]
}
EOF
		timeout -k 10 900 "$BENCH_BIN/nats-server" -c "$dir/n$i.conf" >"$OUT_DIR/$name.n$i.log" 2>&1 &
		pids+=($!)
	done
	cp "$dir/n0.conf" "$OUT_DIR/$name.n0.conf"
	local url="nats://127.0.0.1:${cports[0]},nats://127.0.0.1:${cports[1]},nats://127.0.0.1:${cports[2]}"
	for i in $(seq 1 60); do
		grep -qh 'JetStream cluster new metadata leader' "$OUT_DIR/$name".n*.log 2>/dev/null && break
		sleep 0.5
	done
	log "$name: warm-up bench, $((msgs / 5)) messages"
	timeout -k 5 600 "$BENCH_BIN/nats" -s "$url" bench js pub async perf.bench --create --purge \
		--storage file --replicas 3 --size "$SIZE" --msgs "$((msgs / 5))" --clients "$NATS_CLIENTS" \
		--batch "$NATS_BATCH" --no-progress >"$OUT_DIR/$name.warmup.txt" 2>&1 ||
		die "$name: nats bench failed: $(tail -5 "$OUT_DIR/$name.warmup.txt")"
	log "$name: nats bench js pub async, R3 file stream, $msgs x 1 KiB, sync ${sync}"
	timeout -k 5 600 "$BENCH_BIN/nats" -s "$url" bench js pub async perf.bench --create --purge \
		--storage file --replicas 3 --size "$SIZE" --msgs "$msgs" --clients "$NATS_CLIENTS" \
		--batch "$NATS_BATCH" --no-progress >"$OUT_DIR/$name.bench.txt" 2>&1 ||
		die "$name: nats bench failed: $(tail -5 "$OUT_DIR/$name.bench.txt")"
	stop_all
	local line
	line=$(grep -E 'publisher (aggregated )?stats:' "$OUT_DIR/$name.bench.txt" | tail -1)
	[ -n "$line" ] || die "$name: no stats line in $OUT_DIR/$name.bench.txt"
	# "...stats: 25,533 msgs/sec ~ 25 MiB/sec ~ ... P50: 16,774.11us ~ ... P99: 70,236.23us ..."
	local rate p50 p99
	rate=$(sed -E 's/.*stats: ([0-9,]+) msgs\/sec.*/\1/' <<<"$line" | tr -d ,)
	# with --clients > 1 the percentiles are on the next line, "P50 52,122.18us | ..."
	line="$line $(grep -E 'latencies per operation' "$OUT_DIR/$name.bench.txt" | tail -1 || true)"
	p50=$(sed -nE 's/.*P50:? ([0-9,.]+)us.*/\1/p' <<<"$line" | tr -d ,)
	p99=$(sed -nE 's/.*P99:? ([0-9,.]+)us.*/\1/p' <<<"$line" | tr -d ,)
	printf '{"msg_per_sec":%s,"p50_ms":%s,"p99_ms":%s}\n' "$rate" \
		"$(awk -v u="${p50:-0}" 'BEGIN { printf "%.3f", u / 1000 }')" \
		"$(awk -v u="${p99:-0}" 'BEGIN { printf "%.3f", u / 1000 }')" >"$OUT_DIR/$name.json"
	log "$name: $(fmt_int "$rate") msg/s"
}
if [ "$SKIP_NATS" != 1 ]; then
	nats_run js-default default "$NATS_MSGS"
	nats_run js-always always "$NATS_MSGS_SYNC"
	js_def=$(json_num "$OUT_DIR/js-default.json" msg_per_sec)
	js_alw=$(json_num "$OUT_DIR/js-always.json" msg_per_sec)
else
	js_def=0 js_alw=0
fi

# ---------------------------------------------------------------- summary
pf() { if "$@"; then echo met; else echo MISSED; fi; }
{
	echo "### Run $(date -u +%Y-%m-%dT%H:%MZ), commit ${commit:0:12}"
	echo
	echo "Machine: $cpus vCPUs ($cpu_model), $mem_gib GiB, $fs; disk: $(fmt_int "$disk_fsync") fdatasync/s (p50 $disk_fsync_p50_ms ms), $(fmt_int "$disk_seq") MB/s synced sequential; $gover, kernel $kernel."
	echo "Isobar: \`isobar standalone\` (3 bookies, journal fdatasync, E=3 Qw=2 Qa=2), \`isobar perf produce --size $SIZE --producers $PRODUCERS --max-pending $MAX_PENDING --duration ${DURATION}s\` (batching 1000 msgs / 1 ms), after ${WARMUP} s of flat-out warm-up on another topic."
	echo "JetStream: nats-server $("$BENCH_BIN/nats-server" --version 2>/dev/null | awk '{print $2}' || echo '?') ×3, R3 file stream, \`nats bench js pub async --size $SIZE --clients $NATS_CLIENTS --batch $NATS_BATCH\`."
	echo
	echo "| system | run | msg/s | MB/s | publish p50 / p99 / p99.9 ms | end-to-end p50 / p99 / p99.9 ms |"
	echo "|---|---|---:|---:|---|---|"
	for layout in t1 p4; do
		lname="1 topic"
		[ "$layout" = p4 ] && lname="4 partitions"
		for run in max maxc half; do
			f=$OUT_DIR/$layout-$run.produce.json
			c=$OUT_DIR/$layout-$run.consume.json
			case $run in
			max) what="flat out, producer only" ;;
			maxc) what="flat out, consumer alongside" ;;
			half) what="rate $(fmt_int "$(awk -v m="$(json_num "$OUT_DIR/$layout-max.produce.json" msg_per_sec)" 'BEGIN { print m / 2 }')") (½ max), consumer alongside" ;;
			esac
			e2e="–"
			if [ -s "$c" ]; then
				e2e="$(json_num "$c" p50) / $(json_num "$c" p99) / $(json_num "$c" p99_9)"
				# a consumer that fell behind measures its backlog, not the broker
				pct=$(awk -v c="$(json_num "$c" messages)" -v p="$(json_num "$f" messages)" 'BEGIN { printf "%.0f", (p > 0) ? 100 * c / p : 0 }')
				[ "$pct" -lt 99 ] && e2e="$e2e (consumer behind: got ${pct}% of the messages)"
			fi
			echo "| Isobar, $lname | $what | **$(fmt_int "$(json_num "$f" msg_per_sec)")** | $(json_num "$f" mb_per_sec) | $(json_num "$f" p50) / $(json_num "$f" p99) / $(json_num "$f" p99_9) | $e2e |"
		done
	done
	if [ "$SKIP_NATS" != 1 ]; then
		for n in js-default js-always; do
			j=$OUT_DIR/$n.json
			what="default sync (no fsync per write)"
			[ "$n" = js-always ] && what="sync_interval: always"
			echo "| JetStream R3 | $what | **$(fmt_int "$(json_num "$j" msg_per_sec)")** | $(awk -v r="$(json_num "$j" msg_per_sec)" 'BEGIN { printf "%.3f", r * 1024 / 1e6 }') | $(json_num "$j" p50_ms) / $(json_num "$j" p99_ms) / – (nats bench) | – |"
		done
	fi
	echo
	echo "| target | 1 topic | 4 partitions |"
	echo "|---|---|---|"
	t1max=$(json_num "$OUT_DIR/t1-max.produce.json" msg_per_sec)
	p4max=$(json_num "$OUT_DIR/p4-max.produce.json" msg_per_sec)
	if [ "$SKIP_NATS" != 1 ]; then
		r1=$(ratio "$t1max" "$js_def") r4=$(ratio "$p4max" "$js_def")
		echo "| throughput ≥ 2× JetStream R3 default sync | ${r1}× $(pf ge "$r1" 2) | ${r4}× $(pf ge "$r4" 2) |"
		r1=$(ratio "$t1max" "$js_alw") r4=$(ratio "$p4max" "$js_alw")
		echo "| throughput ≥ 5× JetStream R3 sync always | ${r1}× $(pf ge "$r1" 5) | ${r4}× $(pf ge "$r4" 5) |"
	fi
	h1=$(json_num "$OUT_DIR/t1-half.produce.json" p99)
	h4=$(json_num "$OUT_DIR/p4-half.produce.json" p99)
	echo "| publish p99 ≤ 10 ms at ½ max rate | ${h1} ms $(pf le "$h1" 10) | ${h4} ms $(pf le "$h4" 10) |"
} >"$OUT_DIR/summary.md"

{
	printf '{"time":"%s","commit":"%s",' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$commit"
	printf '"machine":{"cpus":%s,"cpu_model":"%s","mem_gib":%s,"kernel":"%s","fs":"%s","go":"%s","disk":%s},' \
		"$cpus" "$cpu_model" "$mem_gib" "$kernel" "$fs" "$gover" "$(cat "$OUT_DIR/disk.json")"
	printf '"settings":{"duration_s":%s,"size":%s,"producers":%s,"max_pending":%s,"nats_clients":%s,"nats_batch":%s},' \
		"$DURATION" "$SIZE" "$PRODUCERS" "$MAX_PENDING" "$NATS_CLIENTS" "$NATS_BATCH"
	printf '"isobar":{'
	sep=
	for layout in t1 p4; do
		for run in max maxc half; do
			f=$OUT_DIR/$layout-$run.produce.json
			c=$OUT_DIR/$layout-$run.consume.json
			printf '%s"%s-%s":{"produce":%s' "$sep" "$layout" "$run" "$(cat "$f")"
			[ -s "$c" ] && printf ',"consume":%s' "$(cat "$c")"
			printf '}'
			sep=,
		done
	done
	printf '}'
	if [ "$SKIP_NATS" != 1 ]; then
		printf ',"jetstream":{"default":%s,"sync_always":%s}' "$(cat "$OUT_DIR/js-default.json")" "$(cat "$OUT_DIR/js-always.json")"
		printf ',"ratios":{"t1_vs_default":%s,"p4_vs_default":%s,"t1_vs_always":%s,"p4_vs_always":%s}' \
			"$(ratio "$t1max" "$js_def")" "$(ratio "$p4max" "$js_def")" "$(ratio "$t1max" "$js_alw")" "$(ratio "$p4max" "$js_alw")"
	fi
	printf '}\n'
} >"$OUT_DIR/results.json"

cat "$OUT_DIR/summary.md"
log "done: $OUT_DIR/summary.md, $OUT_DIR/results.json"
