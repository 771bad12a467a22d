#!/usr/bin/env bash
# Builds isobar-prometheus:dev (IMAGE overrides the tag), the Prometheus
# server of deploy/compose, from deploy/compose/prometheus/Dockerfile: the
# prometheus binary of Debian's package (scripts/install-prometheus.sh
# installs it when missing), the shared libraries ldd lists for it, and
# the package's web assets. Nothing is pulled (FROM scratch).
# Prints the image tag and id on stdout; exits 3 when Docker is missing or
# its daemon does not answer, 1 on any other failure.
set -euo pipefail
cd "$(dirname "$0")/.."
image="${IMAGE:-isobar-prometheus:dev}"

fail() { echo "build-prometheus-image.sh: $1" >&2; exit "${2:-1}"; }

command -v docker >/dev/null 2>&1 || fail "docker is not on PATH (install Docker Engine to build the image)" 3
docker info >/dev/null 2>&1 || fail "the Docker daemon does not answer (docker info failed; is dockerd running and may this user use it?)" 3
bin=$(bash scripts/install-prometheus.sh | tail -n 1)
[ -x "$bin" ] || fail "no prometheus binary ($bin)"

ctx="$(mktemp -d)"
trap 'rm -rf "$ctx"' EXIT
cp "$bin" "$ctx/prometheus"
mkdir -p "$ctx/lib" "$ctx/lib64" "$ctx/web" "$ctx/data"
# Every library at its own path (ld.so finds them there), including the
# dynamic loader itself.
for lib in $(ldd "$bin" | grep -oE '/[^ ]+'); do
	mkdir -p "$ctx/$(dirname "$lib")"
	cp -L "$lib" "$ctx/$lib"
done
if [ -d /usr/share/prometheus/web ]; then
	cp -r /usr/share/prometheus/web/. "$ctx/web/"
fi
printf 'root:x:0:0:root:/:/sbin/nologin\nnobody:x:65534:65534:nobody:/prometheus:/sbin/nologin\n' >"$ctx/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$ctx/group"
chmod 0755 "$ctx/data"

old="$(docker image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)"
if ! log="$(docker build --quiet --iidfile "$ctx/iid" -t "$image" -f deploy/compose/prometheus/Dockerfile "$ctx" 2>&1)"; then
	echo "$log" >&2
	fail "docker build failed"
fi
new="$(cat "$ctx/iid")"
if [ -n "$old" ] && [ "$old" != "$new" ]; then
	docker image rm "$old" >/dev/null 2>&1 || true
fi
echo "$image $new"
