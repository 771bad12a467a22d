#!/usr/bin/env bash
# stop.sh PID_FILE: SIGTERM (the process drains), then waits up to 45 s for
# it to exit, then SIGKILL. Nothing to do if it is not running.
set -euo pipefail
pid_file=$1
[ -f "$pid_file" ] || exit 0
pid=$(cat "$pid_file")
if kill -TERM "$pid" 2>/dev/null; then
	for _ in $(seq 1 225); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.2
	done
	if kill -0 "$pid" 2>/dev/null; then
		echo "still running after 45 s, killing $pid" >&2
		kill -KILL "$pid" 2>/dev/null || true
	fi
fi
rm -f "$pid_file"
