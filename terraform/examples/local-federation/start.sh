#!/usr/bin/env bash
# start.sh CONFIG_PATH PID_FILE LOG_FILE READY_URL -- COMMAND...
# Writes $CONFIG (the rendered configuration) to CONFIG_PATH, starts
# COMMAND in the background in a session of its own (so that it outlives
# tofu), and waits up to 90 s for READY_URL to answer 2xx (with the isobar
# binary's own probe, COMMAND's first word). Exits 1, with the end of the
# process's log, if it dies or does not become ready.
set -euo pipefail
config_path=$1 pid_file=$2 log_file=$3 ready_url=$4
shift 5
mkdir -p "$(dirname "$config_path")" "$(dirname "$pid_file")" "$(dirname "$log_file")"
printf '%s' "$CONFIG" > "$config_path"
if [ -f "$pid_file" ] && kill -0 "$(cat "$pid_file")" 2>/dev/null; then
	echo "already running: $(cat "$pid_file")"
	exit 0
fi
setsid "$@" >>"$log_file" 2>&1 </dev/null &
pid=$!
echo "$pid" > "$pid_file"
for _ in $(seq 1 450); do
	if "$1" probe "$ready_url" >/dev/null 2>&1; then
		echo "started $* (pid $pid), ready at $ready_url"
		exit 0
	fi
	if ! kill -0 "$pid" 2>/dev/null; then
		echo "exited before it was ready: $*" >&2
		tail -n 30 "$log_file" >&2
		exit 1
	fi
	sleep 0.2
done
echo "not ready after 90 s: $*" >&2
tail -n 30 "$log_file" >&2
exit 1
