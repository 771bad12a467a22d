#!/usr/bin/env bash
# Installs Docker Compose v2 (`docker compose`, the CLI plugin) where only
# docker-compose 1.29 is to be had (Debian 12's package), so that the
# compose tests (deploy/compose) run with both: it builds the plugin from
# its Go module (github.com/docker/compose/v5, the same program as Compose
# v2, served by the Go module proxy; scripts/build-go-module.sh) into
# ~/.docker/cli-plugins. One `go
# build`: about half a minute with a warm module cache, a few minutes from
# a cold one. Idempotent: when `docker compose version` already runs, it
# only prints it. COMPOSE_VERSION overrides the version built.
set -euo pipefail
cd "$(dirname "$0")/.."
version=${COMPOSE_VERSION:-v5.6.0}
plugins="${DOCKER_CONFIG:-$HOME/.docker}/cli-plugins"

if ! command -v docker >/dev/null; then
	echo "install-compose: no docker client; nothing to do" >&2
	exit 0
fi
if ! docker compose version >/dev/null 2>&1; then
	echo "building Docker Compose $version into $plugins/docker-compose" >&2
	bash scripts/build-go-module.sh github.com/docker/compose/v5 "$version" ./cmd "$plugins/docker-compose" \
		"-s -w -X github.com/docker/compose/v5/internal.Version=$version"
fi
docker compose version >&2
