#!/usr/bin/env bash
# Installs Debian's chromium package, the browser that the console's
# tests (region's TestConsole*, docs/console.md) drive through chromedp.
# Idempotent: when a chromium is already on PATH nothing is installed.
# Prints the browser's path (last line of stdout). Needs root (or sudo).
set -euo pipefail

sudo=""
if [ "$(id -u)" -ne 0 ]; then
	sudo=sudo
fi

bin=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$bin" ]; then
	echo "installing Debian's chromium package" >&2
	$sudo apt-get update -qq >&2
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >&2
	bin=$(command -v chromium)
fi
"$bin" --version 2>&1 | head -n 1 >&2
echo "$bin"
