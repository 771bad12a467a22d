#!/usr/bin/env bash
# Installs the Prometheus server binary from Debian's `prometheus` package,
# for region's TestDashboardQueriesWithPrometheus (docs/observability.md).
# Only the binary is wanted: recommends are skipped, and the service the
# package starts (and enables) on install is stopped and disabled again.
# Idempotent: when the binary is already there nothing is installed.
# Prints the binary's path (last line of stdout). Needs root (or sudo).
set -euo pipefail

sudo=""
if [ "$(id -u)" -ne 0 ]; then
	sudo=sudo
fi

bin=$(command -v prometheus || true)
if [ -z "$bin" ] && [ -x /usr/bin/prometheus ]; then
	bin=/usr/bin/prometheus
fi

if [ -z "$bin" ]; then
	echo "installing Debian's prometheus package" >&2
	$sudo apt-get update -qq >&2
	# policy-rc.d exit 101 keeps invoke-rc.d from starting the service
	# where systemd is not running; it is removed again afterwards.
	policy=/usr/sbin/policy-rc.d
	made_policy=""
	if [ ! -e "$policy" ]; then
		printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
		$sudo chmod +x "$policy"
		made_policy=1
	fi
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends prometheus >&2 || {
		[ -n "$made_policy" ] && $sudo rm -f "$policy"
		exit 1
	}
	[ -n "$made_policy" ] && $sudo rm -f "$policy"
	bin=/usr/bin/prometheus
fi

# Leave no service running, whoever started it.
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
	$sudo systemctl disable --now prometheus >/dev/null 2>&1 || true
elif [ -x /etc/init.d/prometheus ]; then
	$sudo /etc/init.d/prometheus stop >/dev/null 2>&1 || true
fi

"$bin" --version 2>&1 | head -n 1 >&2
echo "$bin"
