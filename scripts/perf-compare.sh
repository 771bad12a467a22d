#!/usr/bin/env bash
# Every performance ratio of Isobar vs NATS JetStream R3 that issue 26 sets
# a target for, on this machine, in one run; plus the broker's and bookies'
# own latency histograms at the fixed latency rate (where the median goes).
# See "Broker produce throughput vs NATS JetStream" and "Issue 26: every
# ratio from one run" in docs/BENCHMARKS.md.
#
#   scripts/install-bench-tools.sh   # once: nats-server and nats CLI into .bin/
#   scripts/perf-compare.sh > summary.md
#
# What it does, in order (progress on stderr, markdown summary on stdout,
# everything else under $OUT_DIR):
#  1. records the machine: CPUs, memory, kernel, the disk (`isobar perf disk`),
#     Go version, the repo's commit, the load average before the run;
#  2. builds isobar and internal/benchtools/jslat once and starts
#     `isobar standalone` on a temp data dir (default settings: 3 bookies,
#     journal fdatasync on, ledgers E=3 Qw=2 Qa=2), on 6650/8080 or free
#     ports if those are taken;
#  3. goal 1, throughput: for one topic and for a 4-partition topic, 1 KiB
#     varied JSON payloads, batching on (isobar perf defaults: 1000 msgs /
#     1 ms):
#       a. `isobar perf produce` flat out for $DURATION s (producer only:
#          the throughput that the ratios use);
#       b. the same with `isobar perf consume` alongside (end-to-end latency
#          at saturation);
#       c. at half of (a)'s rate with the consumer alongside;
#  4. goal 2, latency: one producer at $LAT_RATE msg/s for $LAT_DURATION s,
#     at most $LAT_WINDOW messages in flight, after 1000 messages on the
#     same topic; the server's /metrics are read before and after, and the
#     difference of its histograms (broker publish time, bookie add time,
#     journal write+fdatasync, entries per group commit) is the breakdown;
#  5. goal 3, CPU: $CPU_MSGS messages at $CPU_RATE msg/s with a consumer
#     alongside; utime+stime of the server process tree from /proc before
#     and after, and the load generators' own CPU (bash `times`);
#  6. consume (the issue's "keep it"): $BACKLOG_MSGS messages produced flat out, then
#     consumed from the earliest position with an ack per message;
#  7. stops Isobar; starts a 3-node JetStream cluster (file storage in temp
#     dirs, loopback, cluster routes) with the default sync (sync_interval
#     2 min: no fsync per write) and runs: `nats bench js pub async` with
#     1 KiB messages into an R3 file stream (goal 1), then the same shapes
#     as 4–6 with internal/benchtools/jslat (async publish at a fixed rate
#     with a bounded window; a durable pull consumer with explicit acks);
#     then a fresh cluster with `sync_interval: always` (fsync per write):
#     the bench, the latency run and the CPU run;
#  8. with WITH_GO_BENCH=1, the figures that Go benchmarks measure, each
#     in its own process after the servers above are stopped:
#       goal 4, BenchmarkIOIsolation (region/): the tailing load's p99
#         rise with a catch-up reader flat out, and the share of its
#         alone throughput the reader keeps;
#       goal 5, BenchmarkReplicationLag (region/): what replication adds
#         to the p99 at each of $GO_BENCH_RATES msg/s; and
#         BenchmarkPayloadSet (replicator/frame): WAN bytes per payload
#         byte of the generated JSON payload set at ~100 messages per
#         frame (a stream at 10k msg/s), plain zstd against the
#         per-namespace dictionaries at each level;
#       goal 6, BenchmarkManyTopics (broker/) at $IDLE_TOPICS topics:
#         live heap per idle topic and the broker's idle CPU;
#  9. prints the tables, the ratios and met/missed per target.
#
# Environment (defaults in brackets):
#   DURATION [30]          seconds per Isobar throughput run
#   PRODUCERS [2]          isobar perf --producers (throughput runs)
#   MAX_PENDING [2000]     isobar perf --max-pending (per producer and partition)
#   WARMUP [10]            seconds of flat-out produce on a throw-away topic
#                          before the measured Isobar runs (the JetStream
#                          runs are preceded by a bench of 1/5 their size)
#   FLAT_OUT_RATE [1000000000]  --rate given for "flat out" (isobar perf and
#                          jslat also take 0 for that)
#   NATS_MSGS [600000]     messages per JetStream bench, default sync
#   NATS_MSGS_SYNC [200000] messages per JetStream bench, sync_interval always
#   NATS_CLIENTS [2]       nats bench --clients (matched to PRODUCERS)
#   NATS_BATCH [500]       nats bench --batch (async publishes in flight)
#   SKIP_THROUGHPUT [0]    1: no throughput runs (goal 1; for quick latency work)
#   SKIP_LATENCY [0]       1: no fixed-rate latency runs (goal 2)
#   LAT_RATE [10000]       msg/s of the latency runs, one producer
#   LAT_DURATION [20]      seconds per latency run
#   LAT_WINDOW [1000]      messages in flight at most (isobar --max-pending,
#                          jslat --window)
#   SKIP_CPU [0]           1: no CPU-per-message runs (goal 3)
#   CPU_RATE [10000]       msg/s of the CPU runs
#   CPU_MSGS [200000]      messages produced (and consumed) per CPU run
#   SKIP_BACKLOG [0]       1: no backlog consume runs
#   BACKLOG_MSGS [100000]  messages in the backlog
#   WITH_GO_BENCH [0]      1: also run the Go benchmarks of goals 4, 5 and 6
#                          (about 15 minutes more at the defaults; the
#                          million-topic figure takes IDLE_TOPICS=1000000
#                          and about 40 minutes more)
#   GO_BENCH_RATES ["1000 2000 10000"]  BenchmarkReplicationLag's ISOBAR_LAG_RATES
#   GO_BENCH_SECONDS [10]  its ISOBAR_LAG_SECONDS
#   IOISO_BACKLOG_MB [1024]  BenchmarkIOIsolation's ISOBAR_IOISO_BACKLOG_MB
#   IDLE_TOPICS [100000]   BenchmarkManyTopics' topic count (-benchtime Nx)
#   OUT_DIR [.bench-results/<time>]  results.json, summary.md, raw logs
#   PROFILE [0]            1: run the server as internal/benchtools/pprofstandalone
#                          (same region, plus net/http/pprof); save a CPU
#                          profile of the single-topic flat-out run, and during
#                          the latency run a CPU profile, a 5 s execution
#                          trace and the allocation counts (heap?debug=1)
#   PPROF_FLAGS []         with PROFILE=1: extra pprofstandalone flags, e.g.
#                          "--bookie-group-commit-delay=-1ns" (experiments)
#   STRACE [0]             1: after the latency run, one more run of
#                          $LAT_RATE × 5 s with `strace -c -f` attached to the
#                          server (syscalls per entry; strace slows the server,
#                          so its latency is not used)
#   BENCH_BIN [.bin]       where install-bench-tools.sh put nats-server and nats
#   SKIP_NATS [0]          1: Isobar only
#   SERVER_PGO [auto]      go build -pgo for isobar (and pprofstandalone): auto
#                          uses cmd/isobar/default.pgo if there is one, off
#                          builds without, or a profile's path (for A/B runs)
# Every process started here is stopped on exit (trap), and each also runs
# under `timeout` so that nothing outlives a killed script for long.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
DURATION=${DURATION:-30}
PRODUCERS=${PRODUCERS:-2}
MAX_PENDING=${MAX_PENDING:-2000}
WARMUP=${WARMUP:-10}
FLAT_OUT_RATE=${FLAT_OUT_RATE:-1000000000}
NATS_MSGS=${NATS_MSGS:-600000}
NATS_MSGS_SYNC=${NATS_MSGS_SYNC:-200000}
NATS_CLIENTS=${NATS_CLIENTS:-2}
NATS_BATCH=${NATS_BATCH:-500}
SKIP_THROUGHPUT=${SKIP_THROUGHPUT:-0}
SKIP_LATENCY=${SKIP_LATENCY:-0}
LAT_RATE=${LAT_RATE:-10000}
LAT_DURATION=${LAT_DURATION:-20}
LAT_WINDOW=${LAT_WINDOW:-1000}
SKIP_CPU=${SKIP_CPU:-0}
CPU_RATE=${CPU_RATE:-10000}
CPU_MSGS=${CPU_MSGS:-200000}
SKIP_BACKLOG=${SKIP_BACKLOG:-0}
BACKLOG_MSGS=${BACKLOG_MSGS:-100000}
WITH_GO_BENCH=${WITH_GO_BENCH:-0}
GO_BENCH_RATES=${GO_BENCH_RATES:-1000 2000 10000}
GO_BENCH_SECONDS=${GO_BENCH_SECONDS:-10}
IOISO_BACKLOG_MB=${IOISO_BACKLOG_MB:-1024}
IDLE_TOPICS=${IDLE_TOPICS:-100000}
PROFILE=${PROFILE:-0}
STRACE=${STRACE:-0}
SKIP_NATS=${SKIP_NATS:-0}
BENCH_BIN=${BENCH_BIN:-$repo/.bin}
OUT_DIR=${OUT_DIR:-$repo/.bench-results/$(date -u +%Y%m%dT%H%M%SZ)}
SIZE=1024
layouts="t1 p4" # goal 1's topic layouts: one topic, 4 partitions
SERVER_PGO=${SERVER_PGO:-auto}
[ "$SKIP_THROUGHPUT" = 1 ] && layouts=

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
if [ "$STRACE" = 1 ] && ! command -v strace >/dev/null; then
	die "STRACE=1 needs strace (apt-get install -y strace)"
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
jratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "null" }'; } # for JSON
ge() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a >= b) }'; }
le() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a <= b) }'; }
# or0 V: V, or 0 when empty (a run that was skipped or failed)
or0() { echo "${1:-0}"; }

# descendants PID...: the PIDs and every process below them.
descendants() {
	ps -e -o pid= -o ppid= | awk -v roots="$*" '
		BEGIN { n = split(roots, r, " "); for (i = 1; i <= n; i++) want[r[i]] = 1 }
		{ parent[$1] = $2 }
		END {
			do {
				more = 0
				for (p in parent) if (!(p in want) && (parent[p] in want)) { want[p] = 1; more = 1 }
			} while (more)
			for (p in want) print p
		}'
}
# cpu_secs PID...: utime+stime, in seconds, of the PIDs and their descendants
# (from /proc/<pid>/stat; fields 14 and 15, counted after the ")" that ends
# the command name, which may hold spaces).
cpu_secs() {
	local p stat rest f total=0 hz
	hz=$(getconf CLK_TCK)
	for p in $(descendants "$@"); do
		stat=$(cat "/proc/$p/stat" 2>/dev/null) || continue
		rest=${stat##*) }
		read -r -a f <<<"$rest"
		total=$((total + f[11] + f[12]))
	done
	awk -v t="$total" -v hz="$hz" 'BEGIN { printf "%.2f", t / hz }'
}
# timed FILE CMD...: runs CMD and writes the user+system CPU seconds of it
# and everything it waited for to FILE (bash's `times`, children line).
timed() {
	local f=$1
	shift
	(
		rc=0
		"$@" || rc=$?
		times >"$f.times" # not in a pipe: a forked builtin would see no children
		awk 'NR == 2 { t = 0; for (i = 1; i <= 2; i++) { split($i, a, "m"); sub("s", "", a[2]); t += a[1] * 60 + a[2] } printf "%.2f\n", t }' "$f.times" >"$f"
		exit $rc
	)
}
# prom_stat BEFORE AFTER METRIC Q SCALE: from two Prometheus text scrapes,
# the difference of histogram METRIC (every label set summed): its
# Q-quantile (linear within the bucket, as Prometheus' histogram_quantile),
# its mean, both times SCALE, and its count, as "quantile mean count".
prom_stat() {
	awk -v m="$3" -v q="$4" -v scale="$5" '
		FNR == 1 { file++ }
		{ sign = (file == 1) ? -1 : 1 }
		index($0, m "_bucket{") == 1 {
			match($0, /le="[^"]*"/)
			le = substr($0, RSTART + 4, RLENGTH - 5)
			b[le] += sign * $NF
			next
		}
		index($0, m "_sum{") == 1 || index($0, m "_sum ") == 1 { s += sign * $NF; next }
		index($0, m "_count{") == 1 || index($0, m "_count ") == 1 { c += sign * $NF; next }
		END {
			n = 0
			for (le in b) if (le != "+Inf") key[++n] = le
			for (i = 2; i <= n; i++) { # insertion sort by value
				k = key[i]
				for (j = i - 1; j >= 1 && key[j] + 0 > k + 0; j--) key[j + 1] = key[j]
				key[j + 1] = k
			}
			total = b["+Inf"]
			if (total <= 0) { print "0 0 0"; exit }
			want = q * total; lo = 0; below = 0; v = key[n] + 0
			for (i = 1; i <= n; i++) {
				hi = key[i] + 0
				if (b[key[i]] >= want) {
					inb = b[key[i]] - below
					v = (inb > 0) ? lo + (hi - lo) * (want - below) / inb : hi
					break
				}
				lo = hi; below = b[key[i]]
			}
			printf "%.3f %.3f %d\n", v * scale, (c > 0 ? s / c * scale : 0), c
		}' "$1" "$2"
}

# trace_unblocks TRACE: goroutine unblocks (Waiting->Runnable) in an
# execution trace, as "count waker" lines, most first; the waker is the
# first frame of the unblocking stack outside the runtime and the standard
# synchronisation packages ("scheduler" when no goroutine did it: netpoll,
# timers).
trace_unblocks() {
	go tool trace -d=parsed "$1" 2>/dev/null | awk '
		function done1() {
			if (!pending) return
			if (key == "") key = gneg ? "scheduler (netpoll, timers)" : "runtime"
			n[key]++; pending = 0
		}
		/StateTransition/ && /Waiting->Runnable/ { done1(); pending = 1; key = ""; instack = 0; gneg = ($0 ~ / G=-1 /); next }
		pending && $0 == "Stack=" { instack = 1; next }
		pending && instack && /^\t/ {
			if (key == "" && $0 !~ /^\t\t/) {
				fn = $1
				if (fn !~ /^(runtime\.|internal\/|sync\.|time\.|context\.|@)/) key = fn
			}
			next
		}
		{ done1() }
		END { done1(); for (k in n) print n[k], k }' | sort -rn
}

# ---------------------------------------------------------------- machine
log "results in $OUT_DIR, scratch in $work"
uptime_before=$(uptime)
loadavg_before=$(cut -d' ' -f1-3 /proc/loadavg)
log "load before the run: $uptime_before"
log "building isobar and jslat"
(cd "$repo" && go build -pgo="$SERVER_PGO" -o "$work/isobar" ./cmd/isobar)
isobar=$work/isobar
if [ "$SKIP_NATS" != 1 ]; then
	(cd "$repo" && go build -o "$work/jslat" ./internal/benchtools/jslat)
fi
jslat=$work/jslat
server_cmd=("$isobar" standalone)
if [ "$PROFILE" = 1 ]; then
	(cd "$repo" && go build -pgo="$SERVER_PGO" -o "$work/pprofstandalone" ./internal/benchtools/pprofstandalone)
fi

commit=unknown
gitdir=$repo/.git
if [ -f "$gitdir" ]; then # a worktree: .git is a file naming the real one
	gitdir=$(sed -n 's/^gitdir: //p' "$gitdir")
fi
if [ -f "$gitdir/HEAD" ]; then # read, not `git`: the script may run where git is absent
	head=$(cat "$gitdir/HEAD")
	common=$gitdir
	[ -f "$gitdir/commondir" ] && common=$(cd "$gitdir/$(cat "$gitdir/commondir")" && pwd)
	case $head in
	ref:*)
		ref=${head#ref: }
		if [ -f "$gitdir/$ref" ]; then
			commit=$(cat "$gitdir/$ref")
		elif [ -f "$common/$ref" ]; then
			commit=$(cat "$common/$ref")
		elif [ -f "$common/packed-refs" ]; then
			commit=$(awk -v r="$ref" '$2 == r { print $1 }' "$common/packed-refs")
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
	# shellcheck disable=SC2206 # word splitting wanted
	if [ -n "${PPROF_FLAGS:-}" ]; then server_cmd+=($PPROF_FLAGS); fi
fi
timeout -k 10 2400 "${server_cmd[@]}" --data-dir "$work/isobar-data" \
	--broker-port "$bport" --http-port "$hport" >"$OUT_DIR/standalone.log" 2>&1 &
server_pid=$!
pids+=("$server_pid")
for i in $(seq 1 120); do
	grep -q '^ready\.' "$OUT_DIR/standalone.log" && break
	kill -0 "$server_pid" 2>/dev/null || die "standalone exited: $(tail -5 "$OUT_DIR/standalone.log")"
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

# touch_topic TOPIC N: N messages flat out, so that the topic is loaded and
# has its ledger before a measured run.
touch_topic() {
	timeout -k 5 120 "$isobar" perf produce "$1" --service-url "$svc" --size "$SIZE" --producers 1 \
		--rate "$FLAT_OUT_RATE" --num-messages "$2" --duration 60s --json >/dev/null 2>>"$OUT_DIR/touch.log" ||
		die "producing $2 messages to $1 failed: $(tail -3 "$OUT_DIR/touch.log")"
}

run_id=$(date +%s)
log "warm-up: ${WARMUP}s flat out on a throw-away topic"
timeout -k 5 $((WARMUP + 60)) "$isobar" perf produce "persistent://public/default/warmup-$run_id" \
	--service-url "$svc" --size "$SIZE" --producers 1 --rate "$FLAT_OUT_RATE" --max-pending "$MAX_PENDING" \
	--duration "${WARMUP}s" --json >"$OUT_DIR/warmup.produce.json" 2>"$OUT_DIR/warmup.produce.log" || die "warm-up failed"
t1=persistent://public/default/perf-$run_id
p4=persistent://public/default/perf4-$run_id
for layout in $layouts; do
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
				--partitions 4 --producers 1 --rate "$FLAT_OUT_RATE" --num-messages 1 --json >/dev/null 2>>"$OUT_DIR/create.log"
		fi
	done
	isobar_run "$layout-max" "$base-max" "$FLAT_OUT_RATE" 0 "${extra[@]}"
	isobar_run "$layout-maxc" "$base-maxc" "$FLAT_OUT_RATE" 1 "${extra[@]}"
	max=$(json_num "$OUT_DIR/$layout-max.produce.json" msg_per_sec)
	half=$(awk -v m="$max" 'BEGIN { printf "%.0f", m / 2 }')
	isobar_run "$layout-half" "$base-half" "$half" 1 "${extra[@]}"
done

# Goal 2: latency at a fixed rate, one producer; the server's histograms
# before and after give the breakdown.
scrape() { curl -sf "$adm/metrics" >"$1" || log "reading $adm/metrics failed"; }
heap_counts() { # FILE: "# Mallocs = N" and "# TotalAlloc = N" of the pprof heap page
	curl -sf "http://127.0.0.1:$pport/debug/pprof/heap?debug=1" | grep -E '^# (Mallocs|TotalAlloc|Frees) = ' >"$1" || true
}
if [ "$SKIP_LATENCY" != 1 ]; then
	lt=persistent://public/default/lat-$run_id
	touch_topic "$lt" 1000
	scrape "$OUT_DIR/metrics.lat.before.txt"
	bg=()
	if [ "$PROFILE" = 1 ]; then
		heap_counts "$OUT_DIR/heap.lat.before.txt"
		curl -sf -o "$OUT_DIR/allocs.lat.before.pprof" "http://127.0.0.1:$pport/debug/pprof/allocs" || true
		curl -sf -o "$OUT_DIR/cpu-lat.pprof" \
			"http://127.0.0.1:$pport/debug/pprof/profile?seconds=$((LAT_DURATION - 4))" &
		bg+=($!)
		(sleep 2 && curl -sf -o "$OUT_DIR/trace-lat.out" "http://127.0.0.1:$pport/debug/pprof/trace?seconds=5") &
		bg+=($!)
	fi
	log "latency: isobar perf produce, 1 producer, --rate $LAT_RATE for ${LAT_DURATION}s, window $LAT_WINDOW"
	timeout -k 5 $((LAT_DURATION + 60)) "$isobar" perf produce "$lt" --service-url "$svc" --size "$SIZE" \
		--producers 1 --rate "$LAT_RATE" --max-pending "$LAT_WINDOW" --duration "${LAT_DURATION}s" --json \
		>"$OUT_DIR/lat.produce.json" 2>"$OUT_DIR/lat.produce.log" ||
		die "latency run failed: $(tail -3 "$OUT_DIR/lat.produce.log")"
	scrape "$OUT_DIR/metrics.lat.after.txt"
	for p in "${bg[@]}"; do wait "$p" || log "a profile fetch failed"; done
	if [ "$PROFILE" = 1 ]; then
		heap_counts "$OUT_DIR/heap.lat.after.txt"
		curl -sf -o "$OUT_DIR/allocs.lat.after.pprof" "http://127.0.0.1:$pport/debug/pprof/allocs" || true
	fi
	log "latency: isobar p50 $(json_num "$OUT_DIR/lat.produce.json" p50) p99 $(json_num "$OUT_DIR/lat.produce.json" p99) p99.9 $(json_num "$OUT_DIR/lat.produce.json" p99_9) ms"
	if [ "$STRACE" = 1 ]; then
		st=persistent://public/default/strace-$run_id
		touch_topic "$st" 1000
		scrape "$OUT_DIR/metrics.strace.before.txt"
		spid=$(descendants "$server_pid" | grep -vx "$server_pid" | head -1 || true) # the server, below timeout
		[ -n "$spid" ] || die "no server process below $server_pid"
		timeout -k 5 60 strace -c -f -p "$spid" -o "$OUT_DIR/strace.lat.txt" &
		strace_pid=$!
		sleep 1 # attached
		log "strace: $((LAT_RATE * 5)) messages at $LAT_RATE msg/s with strace -c -f on pid $spid"
		timeout -k 5 120 "$isobar" perf produce "$st" --service-url "$svc" --size "$SIZE" --producers 1 \
			--rate "$LAT_RATE" --max-pending "$LAT_WINDOW" --num-messages $((LAT_RATE * 5)) --duration 60s --json \
			>"$OUT_DIR/strace.produce.json" 2>"$OUT_DIR/strace.produce.log" || log "strace run failed"
		kill -INT "$strace_pid" 2>/dev/null || true
		wait "$strace_pid" || true
		scrape "$OUT_DIR/metrics.strace.after.txt"
	fi
fi

# Goal 3: server CPU per message, producer and consumer at a fixed rate.
if [ "$SKIP_CPU" != 1 ]; then
	ct=persistent://public/default/cpu-$run_id
	secs=$((CPU_MSGS / CPU_RATE))
	timed "$OUT_DIR/cpu.consume.cpu" timeout -k 5 $((secs + 120)) "$isobar" perf consume "$ct" --service-url "$svc" \
		--subscription-position Earliest --num-messages "$CPU_MSGS" --duration $((secs + 100))s --json \
		>"$OUT_DIR/cpu.consume.json" 2>"$OUT_DIR/cpu.consume.log" &
	cpid=$!
	pids+=("$cpid")
	sleep 3 # subscribed (from the earliest message: nothing is missed either way)
	log "cpu: $CPU_MSGS messages at $CPU_RATE msg/s, consumer alongside"
	c0=$(cpu_secs "$server_pid")
	timed "$OUT_DIR/cpu.produce.cpu" timeout -k 5 $((secs + 90)) "$isobar" perf produce "$ct" --service-url "$svc" \
		--size "$SIZE" --producers 1 --rate "$CPU_RATE" --max-pending "$LAT_WINDOW" --num-messages "$CPU_MSGS" \
		--duration $((secs + 60))s --json >"$OUT_DIR/cpu.produce.json" 2>"$OUT_DIR/cpu.produce.log" ||
		die "cpu run: produce failed: $(tail -3 "$OUT_DIR/cpu.produce.log")"
	wait "$cpid" || log "cpu run: consumer exited with $?"
	forget_pid "$cpid"
	c1=$(cpu_secs "$server_pid")
	awk -v a="$c0" -v b="$c1" 'BEGIN { printf "%.2f\n", b - a }' >"$OUT_DIR/cpu.server.cpu"
	log "cpu: isobar server $(cat "$OUT_DIR/cpu.server.cpu") s, load generators $(cat "$OUT_DIR/cpu.produce.cpu") + $(cat "$OUT_DIR/cpu.consume.cpu") s"
fi

# Consume (with an ack per message) a backlog (not a numbered goal: kept).
if [ "$SKIP_BACKLOG" != 1 ]; then
	bt=persistent://public/default/backlog-$run_id
	log "backlog: $BACKLOG_MSGS messages flat out, then consumed from the earliest"
	timeout -k 5 360 "$isobar" perf produce "$bt" --service-url "$svc" --size "$SIZE" --producers 1 \
		--rate "$FLAT_OUT_RATE" --max-pending "$MAX_PENDING" --num-messages "$BACKLOG_MSGS" --duration 300s --json \
		>"$OUT_DIR/backlog.produce.json" 2>"$OUT_DIR/backlog.produce.log" ||
		die "backlog fill failed: $(tail -3 "$OUT_DIR/backlog.produce.log")"
	timeout -k 5 360 "$isobar" perf consume "$bt" --service-url "$svc" --subscription-position Earliest \
		--num-messages "$BACKLOG_MSGS" --duration 300s --json \
		>"$OUT_DIR/backlog.consume.json" 2>"$OUT_DIR/backlog.consume.log" ||
		die "backlog consume failed: $(tail -3 "$OUT_DIR/backlog.consume.log")"
	log "backlog: isobar consumed $(fmt_int "$(json_num "$OUT_DIR/backlog.consume.json" msg_per_sec)") msg/s"
fi

log "stopping isobar"
stop_all
for prof in t1-max lat; do
	if [ "$PROFILE" = 1 ] && [ -s "$OUT_DIR/cpu-$prof.pprof" ]; then
		go tool pprof -top -nodecount=40 "$work/pprofstandalone" "$OUT_DIR/cpu-$prof.pprof" \
			>"$OUT_DIR/cpu-$prof.top.txt" 2>/dev/null || true
		go tool pprof -top -cum -nodecount=60 "$work/pprofstandalone" "$OUT_DIR/cpu-$prof.pprof" \
			>"$OUT_DIR/cpu-$prof.topcum.txt" 2>/dev/null || true
		log "CPU profile: $OUT_DIR/cpu-$prof.pprof (top: cpu-$prof.top.txt)"
	fi
done
if [ "$PROFILE" = 1 ]; then
	cp "$work/pprofstandalone" "$OUT_DIR/" # pprof needs the binary for symbols
	if [ -s "$OUT_DIR/allocs.lat.after.pprof" ] && [ -s "$OUT_DIR/allocs.lat.before.pprof" ]; then
		for idx in alloc_objects alloc_space; do # what the latency run allocated, by function
			go tool pprof -top -nodecount=40 -sample_index=$idx -diff_base "$OUT_DIR/allocs.lat.before.pprof" \
				"$work/pprofstandalone" "$OUT_DIR/allocs.lat.after.pprof" >"$OUT_DIR/allocs-lat.$idx.top.txt" 2>/dev/null || true
		done
	fi
fi

# ---------------------------------------------------------------- nats
nats_pids=()
nats_url=
# nats_start NAME SYNC: a fresh 3-node cluster; sets nats_url and nats_pids.
nats_start() {
	local name=$1 sync=$2 i dir syncline=
	dir=$work/$name
	mkdir -p "$dir"
	[ "$sync" = always ] && syncline='sync_interval: always'
	local cports=() rports=() routes=
	for i in 1 2 3; do
		cports+=("$(pick_port $((14221 + i)) $((24220 + 10 * i)))")
		rports+=("$(pick_port $((16221 + i)) $((26220 + 10 * i)))")
	done
	for i in 0 1 2; do routes+="nats-route://127.0.0.1:${rports[$i]}, "; done
	nats_pids=()
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
		timeout -k 10 1200 "$BENCH_BIN/nats-server" -c "$dir/n$i.conf" >"$OUT_DIR/$name.n$i.log" 2>&1 &
		pids+=($!)
		nats_pids+=($!)
	done
	cp "$dir/n0.conf" "$OUT_DIR/$name.n0.conf"
	nats_url="nats://127.0.0.1:${cports[0]},nats://127.0.0.1:${cports[1]},nats://127.0.0.1:${cports[2]}"
	for i in $(seq 1 60); do
		grep -qh 'JetStream cluster new metadata leader' "$OUT_DIR/$name".n*.log 2>/dev/null && break
		sleep 0.5
	done
}

# nats_bench NAME MSGS: `nats bench js pub async` (after one of a fifth of
# the size) into NAME.json; the bench stream is removed afterwards.
nats_bench() {
	local name=$1 msgs=$2
	log "$name: warm-up bench, $((msgs / 5)) messages"
	timeout -k 5 600 "$BENCH_BIN/nats" -s "$nats_url" bench js pub async perf.bench --create --purge \
		--storage file --replicas 3 --size "$SIZE" --msgs "$((msgs / 5))" --clients "$NATS_CLIENTS" \
		--batch "$NATS_BATCH" --no-progress >"$OUT_DIR/$name.warmup.txt" 2>&1 ||
		die "$name: nats bench failed: $(tail -5 "$OUT_DIR/$name.warmup.txt")"
	log "$name: nats bench js pub async, R3 file stream, $msgs x 1 KiB"
	timeout -k 5 600 "$BENCH_BIN/nats" -s "$nats_url" bench js pub async perf.bench --create --purge \
		--storage file --replicas 3 --size "$SIZE" --msgs "$msgs" --clients "$NATS_CLIENTS" \
		--batch "$NATS_BATCH" --no-progress >"$OUT_DIR/$name.bench.txt" 2>&1 ||
		die "$name: nats bench failed: $(tail -5 "$OUT_DIR/$name.bench.txt")"
	timeout -k 5 60 "$BENCH_BIN/nats" -s "$nats_url" stream rm benchstream -f >/dev/null 2>&1 ||
		log "$name: removing the bench stream failed (the runs after it share the disk with it)"
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

# js_lat NAME: 1000 messages, then jslat pub at LAT_RATE into NAME.lat.json.
js_lat() {
	local name=$1
	timeout -k 5 120 "$jslat" pub --server "$nats_url" --stream "lat" --size "$SIZE" --window "$LAT_WINDOW" \
		--rate 0 --count 1000 >/dev/null 2>>"$OUT_DIR/$name.lat.log" || die "$name: jslat warm-up failed"
	log "$name: latency, jslat pub --rate $LAT_RATE for ${LAT_DURATION}s, window $LAT_WINDOW"
	timeout -k 5 $((LAT_DURATION + 60)) "$jslat" pub --server "$nats_url" --stream "lat" --size "$SIZE" \
		--window "$LAT_WINDOW" --rate "$LAT_RATE" --duration "${LAT_DURATION}s" \
		>"$OUT_DIR/$name.lat.json" 2>>"$OUT_DIR/$name.lat.log" || die "$name: jslat pub failed: $(tail -3 "$OUT_DIR/$name.lat.log")"
	log "$name: latency p50 $(json_num "$OUT_DIR/$name.lat.json" p50) p99 $(json_num "$OUT_DIR/$name.lat.json" p99) p99.9 $(json_num "$OUT_DIR/$name.lat.json" p99_9) ms"
}

# js_cpu NAME: CPU_MSGS at CPU_RATE with a consumer alongside; the three
# servers' CPU into NAME.cpu.server.cpu.
js_cpu() {
	local name=$1 secs=$((CPU_MSGS / CPU_RATE)) cpid c0 c1
	timed "$OUT_DIR/$name.cpu.consume.cpu" timeout -k 5 $((secs + 120)) "$jslat" consume --server "$nats_url" \
		--stream cpu --count "$CPU_MSGS" --duration $((secs + 100))s \
		>"$OUT_DIR/$name.cpu.consume.json" 2>"$OUT_DIR/$name.cpu.consume.log" &
	cpid=$!
	pids+=("$cpid")
	sleep 3 # the stream and the consumer exist
	log "$name: cpu, $CPU_MSGS messages at $CPU_RATE msg/s, consumer alongside"
	c0=$(cpu_secs "${nats_pids[@]}")
	timed "$OUT_DIR/$name.cpu.produce.cpu" timeout -k 5 $((secs + 90)) "$jslat" pub --server "$nats_url" \
		--stream cpu --size "$SIZE" --window "$LAT_WINDOW" --rate "$CPU_RATE" --count "$CPU_MSGS" \
		>"$OUT_DIR/$name.cpu.produce.json" 2>"$OUT_DIR/$name.cpu.produce.log" ||
		die "$name: cpu run: jslat pub failed: $(tail -3 "$OUT_DIR/$name.cpu.produce.log")"
	wait "$cpid" || log "$name: cpu run: consumer exited with $?"
	forget_pid "$cpid"
	c1=$(cpu_secs "${nats_pids[@]}")
	awk -v a="$c0" -v b="$c1" 'BEGIN { printf "%.2f\n", b - a }' >"$OUT_DIR/$name.cpu.server.cpu"
	log "$name: cpu, servers $(cat "$OUT_DIR/$name.cpu.server.cpu") s, load generators $(cat "$OUT_DIR/$name.cpu.produce.cpu") + $(cat "$OUT_DIR/$name.cpu.consume.cpu") s"
}

# js_backlog NAME: BACKLOG_MSGS flat out, then consumed with explicit acks.
js_backlog() {
	local name=$1
	log "$name: backlog, $BACKLOG_MSGS messages flat out, then a pull consumer with explicit acks"
	timeout -k 5 360 "$jslat" pub --server "$nats_url" --stream backlog --size "$SIZE" --window "$MAX_PENDING" \
		--rate 0 --count "$BACKLOG_MSGS" >"$OUT_DIR/$name.backlog.produce.json" 2>"$OUT_DIR/$name.backlog.produce.log" ||
		die "$name: backlog fill failed: $(tail -3 "$OUT_DIR/$name.backlog.produce.log")"
	timeout -k 5 360 "$jslat" consume --server "$nats_url" --stream backlog --count "$BACKLOG_MSGS" --duration 300s \
		>"$OUT_DIR/$name.backlog.consume.json" 2>"$OUT_DIR/$name.backlog.consume.log" ||
		die "$name: backlog consume failed: $(tail -3 "$OUT_DIR/$name.backlog.consume.log")"
	log "$name: backlog consumed $(fmt_int "$(json_num "$OUT_DIR/$name.backlog.consume.json" msg_per_sec)") msg/s"
}

if [ "$SKIP_NATS" != 1 ]; then
	nats_start js-default default
	[ "$SKIP_THROUGHPUT" != 1 ] && nats_bench js-default "$NATS_MSGS"
	[ "$SKIP_LATENCY" != 1 ] && js_lat js-default
	[ "$SKIP_CPU" != 1 ] && js_cpu js-default
	[ "$SKIP_BACKLOG" != 1 ] && js_backlog js-default
	stop_all
	nats_start js-always always
	[ "$SKIP_THROUGHPUT" != 1 ] && nats_bench js-always "$NATS_MSGS_SYNC"
	[ "$SKIP_LATENCY" != 1 ] && js_lat js-always
	[ "$SKIP_CPU" != 1 ] && js_cpu js-always
	stop_all
	js_def=$(or0 "$(json_num "$OUT_DIR/js-default.json" msg_per_sec 2>/dev/null)")
	js_alw=$(or0 "$(json_num "$OUT_DIR/js-always.json" msg_per_sec 2>/dev/null)")
else
	js_def=0 js_alw=0
fi

# ---------------------------------------------------------------- go bench
# gobench NAME OUT ARGS...: one Go benchmark run in the repo, its output in
# $OUT_DIR/OUT (a failure is logged and shows in the summary as missing
# figures).
gobench() {
	local name=$1 out=$2
	shift 2
	log "$name"
	(cd "$repo" && go test -run '^$' "$@") >"$OUT_DIR/$out" 2>&1 || log "$name failed: see $OUT_DIR/$out"
}
if [ "$WITH_GO_BENCH" = 1 ]; then
	ISOBAR_IOISO_BACKLOG_MB=$IOISO_BACKLOG_MB gobench "BenchmarkIOIsolation, a $IOISO_BACKLOG_MB MiB backlog (goal 4)" go-bench-ioiso.txt \
		-bench '^BenchmarkIOIsolation$' -benchtime 1x -timeout 30m ./region/
	ISOBAR_LAG_RATES="$GO_BENCH_RATES" ISOBAR_LAG_SECONDS="$GO_BENCH_SECONDS" gobench \
		"BenchmarkReplicationLag at $GO_BENCH_RATES msg/s, ${GO_BENCH_SECONDS}s each (goal 5)" go-bench-lag.txt \
		-bench '^BenchmarkReplicationLag$' -benchtime 1x -timeout 15m ./region/
	gobench "BenchmarkPayloadSet at 100 messages per frame (goal 5)" go-bench-dict.txt \
		-bench '^BenchmarkPayloadSet$/^per=100$/^mix$/' -benchtime 200x -timeout 15m ./replicator/frame/
	gobench "BenchmarkManyTopics at $IDLE_TOPICS topics (goal 6)" go-bench-idle.txt \
		-bench '^BenchmarkManyTopics$' -benchtime "${IDLE_TOPICS}x" -timeout 120m ./broker/
fi
uptime_after=$(uptime)
log "load after the run: $uptime_after"

# ---------------------------------------------------------------- summary
pf() { if "$@"; then echo met; else echo MISSED; fi; }
lat3() { echo "$(json_num "$1" p50) / $(json_num "$1" p99) / $(json_num "$1" p99_9)"; }
per_m() { awk -v c="$1" -v n="$2" 'BEGIN { if (n > 0) printf "%.2f", c / (n / 1e6); else print "n/a" }'; }
{
	echo "### Run $(date -u +%Y-%m-%dT%H:%MZ), commit ${commit:0:12}"
	echo
	echo "Machine: $cpus vCPUs ($cpu_model), $mem_gib GiB, $fs; disk: $(fmt_int "$disk_fsync") fdatasync/s (p50 $disk_fsync_p50_ms ms), $(fmt_int "$disk_seq") MB/s synced sequential; $gover, kernel $kernel."
	echo "Load average before the run: $loadavg_before (1/5/15 min; \`uptime\`: $uptime_before); after: $(cut -d' ' -f1-3 /proc/loadavg)."
	[ "$PROFILE" = 1 ] && echo "Server: internal/benchtools/pprofstandalone ${PPROF_FLAGS:-} (the region of \`isobar standalone\` plus net/http/pprof)."
	[ "$SKIP_THROUGHPUT" != 1 ] && echo "Isobar: \`isobar standalone\` (3 bookies, journal fdatasync, E=3 Qw=2 Qa=2), \`isobar perf produce --size $SIZE --producers $PRODUCERS --max-pending $MAX_PENDING --duration ${DURATION}s\` (batching 1000 msgs / 1 ms), after ${WARMUP} s of flat-out warm-up on another topic."
	[ "$SKIP_NATS" != 1 ] &&
		echo "JetStream: nats-server $("$BENCH_BIN/nats-server" --version 2>/dev/null | awk '{print $2}' || echo '?') ×3, R3 file streams; throughput: \`nats bench js pub async --size $SIZE --clients $NATS_CLIENTS --batch $NATS_BATCH\`; latency, CPU and consume: internal/benchtools/jslat (nats.go)."
	echo
	if [ "$SKIP_THROUGHPUT" != 1 ]; then
		echo "#### Goal 1: produce throughput"
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
					e2e=$(lat3 "$c")
					# a consumer that fell behind measures its backlog, not the broker
					pct=$(awk -v c="$(json_num "$c" messages)" -v p="$(json_num "$f" messages)" 'BEGIN { printf "%.0f", (p > 0) ? 100 * c / p : 0 }')
					[ "$pct" -lt 99 ] && e2e="$e2e (consumer behind: got ${pct}% of the messages)"
				fi
				echo "| Isobar, $lname | $what | **$(fmt_int "$(json_num "$f" msg_per_sec)")** | $(json_num "$f" mb_per_sec) | $(lat3 "$f") | $e2e |"
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
			echo "| throughput ≥ 2.5× JetStream R3 default sync | ${r1}× $(pf ge "$r1" 2.5) | ${r4}× $(pf ge "$r4" 2.5) |"
			r1=$(ratio "$t1max" "$js_alw") r4=$(ratio "$p4max" "$js_alw")
			echo "| throughput ≥ 5× JetStream R3 sync always | ${r1}× $(pf ge "$r1" 5) | ${r4}× $(pf ge "$r4" 5) |"
		fi
		h1=$(json_num "$OUT_DIR/t1-half.produce.json" p99)
		h4=$(json_num "$OUT_DIR/p4-half.produce.json" p99)
		echo "| publish p99 ≤ 10 ms at ½ max rate (issue 3, for reference) | ${h1} ms $(pf le "$h1" 10) | ${h4} ms $(pf le "$h4" 10) |"
	fi

	if [ "$SKIP_LATENCY" != 1 ]; then
		echo
		echo "#### Goal 2: publish latency at $(fmt_int "$LAT_RATE") msg/s, one producer, ≤ $LAT_WINDOW in flight, ${LAT_DURATION} s"
		echo
		echo "Both from just before the publish call (SendAsync / PublishAsync, which wait when the window is full) to the receipt / PubAck."
		echo
		echo "| system | msg/s | p50 ms | p99 ms | p99.9 ms | max ms |"
		echo "|---|---:|---:|---:|---:|---:|"
		lf=$OUT_DIR/lat.produce.json
		echo "| Isobar (\`isobar perf produce --rate $LAT_RATE --producers 1\`, batching 1 ms) | $(fmt_int "$(json_num "$lf" msg_per_sec)") | $(json_num "$lf" p50) | $(json_num "$lf" p99) | $(json_num "$lf" p99_9) | $(json_num "$lf" max) |"
		if [ "$SKIP_NATS" != 1 ]; then
			for n in js-always js-default; do
				j=$OUT_DIR/$n.lat.json
				what="sync_interval: always"
				[ "$n" = js-default ] && what="default sync (reference)"
				echo "| JetStream R3, $what (\`jslat pub --rate $LAT_RATE\`) | $(fmt_int "$(json_num "$j" msg_per_sec)") | $(json_num "$j" p50) | $(json_num "$j" p99) | $(json_num "$j" p99_9) | $(json_num "$j" max) |"
			done
			ja=$OUT_DIR/js-always.lat.json
			echo
			echo "| target (against JetStream R3 sync always) | Isobar | JetStream | ratio | |"
			echo "|---|---:|---:|---:|---|"
			a=$(json_num "$lf" p50) b=$(json_num "$ja" p50)
			echo "| p50 ≤ JetStream's | $a | $b | $(ratio "$a" "$b")× | $(pf le "$a" "$b") |"
			a=$(json_num "$lf" p99) b=$(json_num "$ja" p99)
			echo "| p99 ≤ 0.25× JetStream's | $a | $b | $(ratio "$a" "$b")× | $(pf le "$(ratio "$a" "$b")" 0.25) |"
			a=$(json_num "$lf" p99_9) b=$(json_num "$ja" p99_9)
			echo "| p99.9 ≤ 0.25× JetStream's | $a | $b | $(ratio "$a" "$b")× | $(pf le "$(ratio "$a" "$b")" 0.25) |"
		fi
		if [ -s "$OUT_DIR/metrics.lat.before.txt" ] && [ -s "$OUT_DIR/metrics.lat.after.txt" ]; then
			mb=$OUT_DIR/metrics.lat.before.txt ma=$OUT_DIR/metrics.lat.after.txt
			read -r pub50 pubmean pubn <<<"$(prom_stat "$mb" "$ma" pulsar_broker_topic_publish_duration_seconds 0.5 1000)"
			read -r add50 addmean addn <<<"$(prom_stat "$mb" "$ma" isobar_bookie_add_duration_seconds 0.5 1000)"
			read -r sync50 syncmean syncn <<<"$(prom_stat "$mb" "$ma" isobar_bookie_journal_sync_duration_seconds 0.5 1000)"
			read -r bat50 batmean _ <<<"$(prom_stat "$mb" "$ma" isobar_bookie_journal_batch_size 0.5 1)"
			cli50=$(json_num "$lf" p50) climean=$(json_num "$lf" mean)
			msgs=$(json_num "$lf" messages)
			echo
			echo "Where the median goes (the server's own histograms over the run, all label sets summed; p50 interpolated within buckets, so coarse; the means subtract exactly). One broker entry is one client batch: $(fmt_int "$msgs") messages in $(fmt_int "$pubn") entries ($(awk -v m="$msgs" -v e="$pubn" 'BEGIN { if (e > 0) printf "%.1f", m / e }') messages per entry); each is added to Qw=2 bookies."
			echo
			echo "| stage | p50 ms | mean ms | what it is |"
			echo "|---|---:|---:|---|"
			echo "| client: SendAsync → receipt | $cli50 | $climean | \`isobar perf\`'s publish latency (batching wait included) |"
			echo "| broker: SEND arrival → receipt | $pub50 | $pubmean | \`pulsar.broker.topic.publish.duration\` |"
			echo "| bookie: add arrival → response | $add50 | $addmean | \`isobar.bookie.add.duration\` (group-commit wait + write + fdatasync) |"
			echo "| journal: one group commit's write + fdatasync | $sync50 | $syncmean | \`isobar.bookie.journal.sync.duration\` |"
			echo "| client side: batching, client queues, network, broker read (client − broker) | $(awk -v a="$cli50" -v b="$pub50" 'BEGIN { printf "%.3f", a - b }') | $(awk -v a="$climean" -v b="$pubmean" 'BEGIN { printf "%.3f", a - b }') | difference |"
			echo "| broker's own work and the bookie round trip (broker − bookie) | $(awk -v a="$pub50" -v b="$add50" 'BEGIN { printf "%.3f", a - b }') | $(awk -v a="$pubmean" -v b="$addmean" 'BEGIN { printf "%.3f", a - b }') | difference (the slower of 2 bookies counts) |"
			echo "| group-commit wait in the bookie (add − sync) | $(awk -v a="$add50" -v b="$sync50" 'BEGIN { printf "%.3f", a - b }') | $(awk -v a="$addmean" -v b="$syncmean" 'BEGIN { printf "%.3f", a - b }') | difference |"
			echo
			echo "Journal group commits: $(fmt_int "$syncn") over the three bookies, $(awk -v v="$batmean" 'BEGIN { printf "%.2f", v }') entries each on average (p50 $bat50); bookie adds $(fmt_int "$addn")."
			if [ -s "$OUT_DIR/heap.lat.after.txt" ] && [ -s "$OUT_DIR/heap.lat.before.txt" ]; then
				mal=$(($(awk '/Mallocs/ { print $4 }' "$OUT_DIR/heap.lat.after.txt") - $(awk '/Mallocs/ { print $4 }' "$OUT_DIR/heap.lat.before.txt")))
				tal=$(($(awk '/TotalAlloc/ { print $4 }' "$OUT_DIR/heap.lat.after.txt") - $(awk '/TotalAlloc/ { print $4 }' "$OUT_DIR/heap.lat.before.txt")))
				echo "Server allocations during the latency run (pprofstandalone, whole process, background work included): $(fmt_int "$mal") objects, $(fmt_int "$tal") bytes: $(awk -v a="$mal" -v m="$msgs" 'BEGIN { printf "%.1f", a / m }') objects and $(fmt_int "$(awk -v a="$tal" -v m="$msgs" 'BEGIN { print a / m }')") bytes per message, $(awk -v a="$mal" -v e="$pubn" 'BEGIN { printf "%.0f", a / e }') objects per entry."
			fi
			if [ -s "$OUT_DIR/trace-lat.out" ]; then
				trace_unblocks "$OUT_DIR/trace-lat.out" >"$OUT_DIR/trace-lat.unblocks.txt" || true
				eps=$(awk -v e="$pubn" -v d="$LAT_DURATION" 'BEGIN { print e / d }')
				echo "Goroutine unblocks in a 5 s execution trace of the server during the run ($(fmt_int "$(awk -v e="$eps" 'BEGIN { print 5 * e }')") entries): $(awk -v e="$eps" '{ t += $1 } END { printf "%.1f", t / (5 * e) }' "$OUT_DIR/trace-lat.unblocks.txt") per entry; by waker, per entry: $(awk -v e="$eps" 'NR <= 9 { k = $0; sub(/^[0-9]+ /, "", k); sub("github.com/isobar-mq/isobar/", "", k); printf "%s %.2f; ", k, $1 / (5 * e) }' "$OUT_DIR/trace-lat.unblocks.txt")(all: trace-lat.unblocks.txt)."
			fi
			if [ -s "$OUT_DIR/strace.lat.txt" ] && [ -s "$OUT_DIR/metrics.strace.after.txt" ]; then
				read -r _ _ sn <<<"$(prom_stat "$OUT_DIR/metrics.strace.before.txt" "$OUT_DIR/metrics.strace.after.txt" pulsar_broker_topic_publish_duration_seconds 0.5 1000)"
				calls=$(awk '$NF == "total" { print $(NF - 2) }' "$OUT_DIR/strace.lat.txt")
				echo "Syscalls (\`strace -c -f\` on the server, $(fmt_int "$(json_num "$OUT_DIR/strace.produce.json" messages)") messages in $(fmt_int "$sn") entries): $(fmt_int "$calls") in all, $(awk -v c="$calls" -v e="$sn" 'BEGIN { if (e > 0) printf "%.1f", c / e }') per entry; the top ones: $(awk 'NR > 2 && $1 ~ /^[0-9.]+$/ && $NF != "total" { printf "%s %s, ", $NF, $4 } ' "$OUT_DIR/strace.lat.txt" | cut -d, -f1-6)."
			fi
		fi
	fi

	if [ "$SKIP_CPU" != 1 ]; then
		echo
		echo "#### Goal 3: server CPU per million messages ($(fmt_int "$CPU_MSGS") produced at $(fmt_int "$CPU_RATE") msg/s and consumed alongside)"
		echo
		echo "| system | produced | consumed | server CPU s | server CPU s per M msgs | load generators CPU s (produce + consume) |"
		echo "|---|---:|---:|---:|---:|---:|"
		ip=$(or0 "$(json_num "$OUT_DIR/cpu.produce.json" messages)")
		iso_cpu=$(cat "$OUT_DIR/cpu.server.cpu")
		iso_pm=$(per_m "$iso_cpu" "$ip")
		echo "| Isobar (1 process) | $(fmt_int "$ip") | $(fmt_int "$(or0 "$(json_num "$OUT_DIR/cpu.consume.json" messages)")")  | $iso_cpu | **$iso_pm** | $(cat "$OUT_DIR/cpu.produce.cpu") + $(cat "$OUT_DIR/cpu.consume.cpu") |"
		if [ "$SKIP_NATS" != 1 ]; then
			for n in js-default js-always; do
				jp=$(or0 "$(json_num "$OUT_DIR/$n.cpu.produce.json" messages)")
				what="default sync"
				[ "$n" = js-always ] && what="sync_interval: always"
				echo "| JetStream R3, $what (3 processes) | $(fmt_int "$jp") | $(fmt_int "$(or0 "$(json_num "$OUT_DIR/$n.cpu.consume.json" messages)")") | $(cat "$OUT_DIR/$n.cpu.server.cpu") | **$(per_m "$(cat "$OUT_DIR/$n.cpu.server.cpu")" "$jp")** | $(cat "$OUT_DIR/$n.cpu.produce.cpu") + $(cat "$OUT_DIR/$n.cpu.consume.cpu") |"
			done
			echo
			echo "| target | against default sync | against sync always |"
			echo "|---|---|---|"
			rd=$(ratio "$iso_pm" "$(per_m "$(cat "$OUT_DIR/js-default.cpu.server.cpu")" "$(or0 "$(json_num "$OUT_DIR/js-default.cpu.produce.json" messages)")")")
			ra=$(ratio "$iso_pm" "$(per_m "$(cat "$OUT_DIR/js-always.cpu.server.cpu")" "$(or0 "$(json_num "$OUT_DIR/js-always.cpu.produce.json" messages)")")")
			echo "| server CPU per message ≤ 0.5× JetStream's | ${rd}× $(pf le "$rd" 0.5) | ${ra}× $(pf le "$ra" 0.5) |"
		fi
	fi

	if [ "$SKIP_BACKLOG" != 1 ]; then
		echo
		echo "#### Consume a backlog (kept from the issue: ≥ 4× JetStream) of $(fmt_int "$BACKLOG_MSGS") messages, an ack per message"
		echo
		echo "| system | consumer | messages | msg/s |"
		echo "|---|---|---:|---:|"
		ib=$(json_num "$OUT_DIR/backlog.consume.json" msg_per_sec)
		echo "| Isobar | \`isobar perf consume --subscription-position Earliest\` (Exclusive, receiver queue 1000) | $(fmt_int "$(json_num "$OUT_DIR/backlog.consume.json" messages)") | **$(fmt_int "$ib")** |"
		if [ "$SKIP_NATS" != 1 ]; then
			jb=$(json_num "$OUT_DIR/js-default.backlog.consume.json" msg_per_sec)
			echo "| JetStream R3, default sync | \`jslat consume\` (durable pull, explicit ack, 500 per pull, MaxAckPending 10000) | $(fmt_int "$(json_num "$OUT_DIR/js-default.backlog.consume.json" messages)") | **$(fmt_int "$jb")** |"
			rb=$(ratio "$ib" "$jb")
			echo
			echo "| target | ratio | |"
			echo "|---|---:|---|"
			echo "| consume with acks ≥ 4× JetStream's | ${rb}× | $(pf ge "$rb" 4) |"
		fi
	fi

	if [ "$WITH_GO_BENCH" = 1 ]; then
		# metric FILE LINE-PREFIX UNIT: the value reported before UNIT on the
		# benchmark line starting with LINE-PREFIX, or on a line after it
		# (a benchmark that prints progress on stdout splits its result line).
		metric() {
			awk -v p="$2" -v u="$3" 'index($1, p) == 1 { seen = 1 } seen { for (i = 1; i <= NF; i++) if ($i == u && i > 1) { print $(i - 1); exit } }' "$1"
		}
		okf() { if [ -n "$1" ] && awk -v a="$1" -v b="$3" -v op="$2" 'BEGIN { exit !((op == "le") ? a + 0 <= b + 0 : a + 0 >= b + 0) }'; then echo met; else echo MISSED; fi; }
		f=$OUT_DIR/go-bench-ioiso.txt
		echo
		echo "#### Goal 4: I/O isolation (BenchmarkIOIsolation, a $IOISO_BACKLOG_MB MiB backlog read cold, pacing on)"
		echo
		pr=$(metric "$f" BenchmarkIOIsolation pub-p99-rise-%)
		er=$(metric "$f" BenchmarkIOIsolation e2e-p99-rise-%)
		kept=$(metric "$f" BenchmarkIOIsolation reader-kept)
		echo "| figure | alone | with the reader | rise | target |"
		echo "|---|---:|---:|---:|---|"
		echo "| tailing publish p99 ms | $(metric "$f" BenchmarkIOIsolation pub-p99-alone-ms) | $(metric "$f" BenchmarkIOIsolation pub-p99-reader-ms) | ${pr:-?}% | ≤ 20%: $(okf "$pr" le 20) |"
		echo "| tailing end-to-end p99 ms | $(metric "$f" BenchmarkIOIsolation e2e-p99-alone-ms) | $(metric "$f" BenchmarkIOIsolation e2e-p99-reader-ms) | ${er:-?}% | ≤ 20%: $(okf "$er" le 20) |"
		echo "| reader MB/s | $(metric "$f" BenchmarkIOIsolation reader-alone-MB/s) | $(metric "$f" BenchmarkIOIsolation reader-MB/s) | kept ${kept:-?} | ≥ 0.5: $(okf "$kept" ge 0.5) |"

		echo
		echo "#### Goal 5: replication lag (BenchmarkReplicationLag, ${GO_BENCH_SECONDS} s per rate)"
		echo
		echo "| rate msg/s | r0 p99 ms | r1 p99 ms | added p99 ms | target ≤ 10 ms |"
		echo "|---:|---:|---:|---:|---|"
		awk '/^BenchmarkReplicationLag\/rate-/ {
			split($1, n, "-"); r = n[2]; a = ""; p0 = ""; p1 = ""
			for (i = 2; i <= NF; i++) {
				if ($i == "added-p99-ms") a = $(i - 1)
				if ($i == "r0-p99-ms") p0 = $(i - 1)
				if ($i == "r1-p99-ms") p1 = $(i - 1)
			}
			printf "| %s | %s | %s | %s | %s |\n", r, p0, p1, a, (a != "" && a + 0 <= 10) ? "met" : "MISSED"
		}' "$OUT_DIR/go-bench-lag.txt"
		grep -q '^BenchmarkReplicationLag/rate-' "$OUT_DIR/go-bench-lag.txt" || echo "| (failed: see go-bench-lag.txt) | | | | |"

		f=$OUT_DIR/go-bench-dict.txt
		echo
		echo "#### Goal 5: WAN bytes per payload byte (BenchmarkPayloadSet, the four JSON shapes interleaved, 100 messages per frame)"
		echo
		echo "| frames | wire/payload | encode µs per frame | target ≤ 0.20 |"
		echo "|---|---:|---:|---|"
		for v in plain/fastest dict/fastest dict/default dict/better; do
			w=$(metric "$f" "BenchmarkPayloadSet/per=100/mix/$v" wire/payload)
			ns=$(metric "$f" "BenchmarkPayloadSet/per=100/mix/$v" ns/op)
			what=$v
			[ "$v" = dict/fastest ] && what="dict/fastest (the default)"
			echo "| $what | ${w:-?} | $(awk -v n="$ns" 'BEGIN { if (n != "") printf "%.0f", n / 1000; else print "?" }') | $(okf "$w" le 0.20) |"
		done

		f=$OUT_DIR/go-bench-idle.txt
		hb=$(metric "$f" BenchmarkManyTopics heap-B/topic)
		ic=$(metric "$f" BenchmarkManyTopics idle-cpu-%)
		echo
		echo "#### Goal 6: idle topics (BenchmarkManyTopics, $(fmt_int "$IDLE_TOPICS") topics with a subscription each)"
		echo
		echo "| figure | value | target |"
		echo "|---|---:|---|"
		echo "| broker live heap per idle topic | ${hb:-?} B | ≤ 1024 B: $(okf "$hb" le 1024) |"
		echo "| broker CPU while idle (30 s) | ${ic:-?}% of a core | ≤ 5%: $(okf "$ic" le 5) |"
		echo "| one \`/metrics\` scrape, first / again | $(metric "$f" BenchmarkManyTopics metrics-scrape-ms) / $(metric "$f" BenchmarkManyTopics metrics-scrape-again-ms) ms | |"
		echo "| one maintenance pass, again | $(metric "$f" BenchmarkManyTopics maintain-again-ms) ms | |"
	fi
} >"$OUT_DIR/summary.md"

# results.json: the raw JSON of every run, keyed by run.
raw() { if [ -s "$1" ]; then cat "$1"; else echo null; fi; }
{
	printf '{"time":"%s","commit":"%s","loadavg_before":"%s","loadavg_after":"%s",' \
		"$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$commit" "$loadavg_before" "$(cut -d' ' -f1-3 /proc/loadavg)"
	printf '"machine":{"cpus":%s,"cpu_model":"%s","mem_gib":%s,"kernel":"%s","fs":"%s","go":"%s","disk":%s},' \
		"$cpus" "$cpu_model" "$mem_gib" "$kernel" "$fs" "$gover" "$(cat "$OUT_DIR/disk.json")"
	printf '"settings":{"duration_s":%s,"size":%s,"producers":%s,"max_pending":%s,"nats_clients":%s,"nats_batch":%s,' \
		"$DURATION" "$SIZE" "$PRODUCERS" "$MAX_PENDING" "$NATS_CLIENTS" "$NATS_BATCH"
	printf '"lat_rate":%s,"lat_duration_s":%s,"lat_window":%s,"cpu_rate":%s,"cpu_msgs":%s,"backlog_msgs":%s},' \
		"$LAT_RATE" "$LAT_DURATION" "$LAT_WINDOW" "$CPU_RATE" "$CPU_MSGS" "$BACKLOG_MSGS"
	printf '"isobar":{'
	sep=
	for layout in $layouts; do
		for run in max maxc half; do
			f=$OUT_DIR/$layout-$run.produce.json
			c=$OUT_DIR/$layout-$run.consume.json
			printf '%s"%s-%s":{"produce":%s' "$sep" "$layout" "$run" "$(raw "$f")"
			[ -s "$c" ] && printf ',"consume":%s' "$(cat "$c")"
			printf '}'
			sep=,
		done
	done
	printf '%s"latency":%s' "$sep" "$(raw "$OUT_DIR/lat.produce.json")"
	printf ',"cpu":{"produce":%s,"consume":%s,"server_cpu_s":%s,"produce_cpu_s":%s,"consume_cpu_s":%s}' \
		"$(raw "$OUT_DIR/cpu.produce.json")" "$(raw "$OUT_DIR/cpu.consume.json")" "$(raw "$OUT_DIR/cpu.server.cpu")" \
		"$(raw "$OUT_DIR/cpu.produce.cpu")" "$(raw "$OUT_DIR/cpu.consume.cpu")"
	printf ',"backlog":{"produce":%s,"consume":%s}' "$(raw "$OUT_DIR/backlog.produce.json")" "$(raw "$OUT_DIR/backlog.consume.json")"
	printf '}'
	if [ "$SKIP_NATS" != 1 ]; then
		printf ',"jetstream":{'
		sep=
		for n in js-default js-always; do
			printf '%s"%s":{"bench":%s,"latency":%s' "$sep" "$n" "$(raw "$OUT_DIR/$n.json")" "$(raw "$OUT_DIR/$n.lat.json")"
			printf ',"cpu":{"produce":%s,"consume":%s,"server_cpu_s":%s,"produce_cpu_s":%s,"consume_cpu_s":%s}' \
				"$(raw "$OUT_DIR/$n.cpu.produce.json")" "$(raw "$OUT_DIR/$n.cpu.consume.json")" "$(raw "$OUT_DIR/$n.cpu.server.cpu")" \
				"$(raw "$OUT_DIR/$n.cpu.produce.cpu")" "$(raw "$OUT_DIR/$n.cpu.consume.cpu")"
			printf ',"backlog":{"produce":%s,"consume":%s}}' "$(raw "$OUT_DIR/$n.backlog.produce.json")" "$(raw "$OUT_DIR/$n.backlog.consume.json")"
			sep=,
		done
		printf '}'
		[ "$SKIP_THROUGHPUT" != 1 ] && printf ',"ratios":{"t1_vs_default":%s,"p4_vs_default":%s,"t1_vs_always":%s,"p4_vs_always":%s}' \
			"$(jratio "$t1max" "$js_def")" "$(jratio "$p4max" "$js_def")" "$(jratio "$t1max" "$js_alw")" "$(jratio "$p4max" "$js_alw")"
	fi
	printf '}\n'
} >"$OUT_DIR/results.json"

cat "$OUT_DIR/summary.md"
log "done: $OUT_DIR/summary.md, $OUT_DIR/results.json"
