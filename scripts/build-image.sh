#!/usr/bin/env bash
# Builds the isobar container image, isobar:dev (IMAGE overrides the tag),
# from deploy/Dockerfile: a FROM-scratch image holding the static isobar
# binary built here with Go (CGO_ENABLED=0, -trimpath), the CA
# certificates of this machine, a non-root user and a writable /data.
# Nothing is pulled: there is no base image and no build stage in a
# container. Running it again with nothing changed gives the same image
# (Docker's layer cache; the binary builds byte for byte the same).
# Prints the image id on stdout; exits 3 when Docker is missing or its
# daemon does not answer, 1 on any other failure.
set -euo pipefail
cd "$(dirname "$0")/.."
image="${IMAGE:-isobar:dev}"
certs=/etc/ssl/certs/ca-certificates.crt

fail() { echo "build-image.sh: $1" >&2; exit "${2:-1}"; }

command -v docker >/dev/null 2>&1 || fail "docker is not on PATH (install Docker Engine to build the image)" 3
docker info >/dev/null 2>&1 || fail "the Docker daemon does not answer (docker info failed; is dockerd running and may this user use it?)" 3
command -v go >/dev/null 2>&1 || fail "go is not on PATH"
[ -r "$certs" ] || fail "$certs not found (install Debian's ca-certificates)"

ctx="$(mktemp -d)"
trap 'rm -rf "$ctx"' EXIT

CGO_ENABLED=0 go build -trimpath -o "$ctx/isobar" ./cmd/isobar
cp "$certs" "$ctx/ca-certificates.crt"
printf 'root:x:0:0:root:/:/sbin/nologin\nisobar:x:65532:65532:isobar:/data:/sbin/nologin\n' >"$ctx/passwd"
printf 'root:x:0:\nisobar:x:65532:\n' >"$ctx/group"
mkdir -p "$ctx/data/journal" "$ctx/data/ledgers"
# Fixed modes and times, so the context is the same from run to run.
chmod 0755 "$ctx/isobar" "$ctx/data" "$ctx/data/journal" "$ctx/data/ledgers"
chmod 0644 "$ctx/ca-certificates.crt" "$ctx/passwd" "$ctx/group"

# The legacy builder (no buildx plugin here) warns that it is deprecated;
# keep its output for a failure only.
old="$(docker image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)"
if ! log="$(docker build --quiet --iidfile "$ctx/iid" -t "$image" -f deploy/Dockerfile "$ctx" 2>&1)"; then
	echo "$log" >&2
	fail "docker build failed"
fi
new="$(cat "$ctx/iid")"
# The image this tag named before is left without a name: remove it unless
# a container still uses it, so that rebuilds do not pile up.
if [ -n "$old" ] && [ "$old" != "$new" ]; then
	docker image rm "$old" >/dev/null 2>&1 || true
fi
echo "$image $new"
