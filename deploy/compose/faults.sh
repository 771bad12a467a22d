#!/bin/sh
# The docker hooks of faults.yaml (isobar fault-control, docs/drills.md):
#
#   faults.sh kill|start|partition|heal <service>...
#
# Containers are found by their Compose labels (project and service), so
# the names Compose gives them do not matter: docker-compose 1.29
# (isobar_broker-us-east-1_1) and docker compose v2
# (isobar-broker-us-east-1-1) both work. The project is
# $ISOBAR_COMPOSE_PROJECT, isobar by default (`-p isobar`).
#
#   kill       docker kill, as in a crash
#   start      docker start, on the same volumes
#   partition  disconnect the containers from <project>_wan, all at once,
#              and abort their connections to its subnets (nsenter and
#              ss: needs root), which would otherwise hang
#   heal       connect them to <project>_wan again under their service
#              names
set -eu
project=${ISOBAR_COMPOSE_PROJECT:-isobar}
wan=${project}_wan
verb=$1
shift

ids() {
	for s in "$@"; do
		id=$(docker ps -aq --filter "label=com.docker.compose.project=$project" --filter "label=com.docker.compose.service=$s")
		[ -n "$id" ] || { echo "faults.sh: no container of service $s in project $project" >&2; exit 1; }
		echo "$id"
	done
}

case $verb in
kill) docker kill $(ids "$@") >/dev/null ;;
start) docker start $(ids "$@") >/dev/null ;;
partition)
	sub=$(docker network inspect -f '{{range .IPAM.Config}}{{.Subnet}} {{end}}' "$wan")
	# All at once: one after the other, the first would be cut seconds
	# before the last on a busy machine.
	jobs=
	for c in $(docker inspect -f '{{.Id}}:{{.State.Pid}}' $(ids "$@")); do
		(docker network disconnect "$wan" "${c%:*}" && for s in $sub; do nsenter -t "${c#*:}" -n ss -K dst "$s" >/dev/null; done) &
		jobs="$jobs $!"
	done
	for j in $jobs; do wait "$j"; done
	;;
heal)
	for s in "$@"; do
		docker network connect --alias "$s" "$wan" "$(ids "$s")"
	done
	;;
*)
	echo "faults.sh: unknown verb $verb (kill, start, partition, heal)" >&2
	exit 2
	;;
esac
