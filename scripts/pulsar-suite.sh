#!/usr/bin/env bash
# Runs 37 tests of the Pulsar Go client's own suite (pulsar-client-go
# v0.19.0, package pulsar) against a broker on localhost:6650 (binary) and
# localhost:8080 (HTTP), each test in its own process. What each test
# needs from the broker: docs/compat/pulsar-suite.md.
#
# With --admin it runs instead the tests of the client's admin library
# (package pulsaradmin/pkg/admin), all of them by default; coverage:
# docs/compat/admin.md.
#
# With --full it runs every top-level test of the client's package pulsar
# (or the ones named) against a standalone it starts configured as the
# client's own CI configures its test broker (the module's
# integration-tests/conf/standalone.conf and scripts/pulsar-test-service-
# start.sh): plaintext and TLS listeners (6650/6651, 8080/8443) with the
# module's certificates, token authentication with its secret key, basic
# authentication with its .htpasswd, TLS client-certificate
# authentication, superusers localhost, superUser and admin, the
# anonymous role for clients without credentials, authorization on; then
# public is administered by and public/default granted to anonymous, and
# private/auth granted to token-principal; transactions on. Results:
# docs/compat/client.md.
#
# Usage: scripts/pulsar-suite.sh [--admin] [--start] [--proxy] [--full] [--results DIR] [--list] [TestName ...]
#   --admin        the pulsaradmin suite instead of the client's
#   --full         every test of the client's package, against a standalone
#                  configured as the client's CI configures its broker
#                  (implies --start)
#   --start        start `go run ./cmd/isobar standalone --data-dir <tmp>`
#                  first and stop it at exit (otherwise a broker must be
#                  listening already)
#   --proxy        with --start: the standalone's broker listens on 16650
#                  and 18080 instead, and an `isobar proxy` in front of it
#                  on 6650 and 8080, so every test goes through the proxy
#   --results DIR  keep the per-test logs in DIR (default: a new temp dir)
#   --list         print the test names and exit
#   TestName ...   run only these tests (default: all 37)
# Environment: TEST_TIMEOUT (per test, default 180s).
# Exit status: 0 if every test passed, 1 if any failed, 2 on bad usage or
# when no broker is reachable.
set -euo pipefail

ver=v0.19.0
repo=$(cd "$(dirname "$0")/.." && pwd)
test_timeout=${TEST_TIMEOUT:-180s}

all_tests=(
	TestProducerConsumer
	TestSimpleProducer
	TestProducerAsyncSend
	TestConsumerSubscriptionEarliestPosition
	TestBatchSendMessagesWithMetadata
	TestProducerName
	TestConsumerEventTime
	TestBatchMessageReceive
	TestFlushInProducer
	TestMaxMessageSize
	TestConsumerCompression
	TestLargeMessage
	TestChunkAckAndNAck
	TestTopicPartitions
	TestPartitionTopicsConsumerPubSub
	TestRoundRobinRouterPartitionedProducer
	TestConsumerShared
	TestConsumerKeyShared
	TestPartitionTopic_ActiveConsumerChanged
	TestConsumerUnSubscribe
	TestConsumerAck
	TestConsumerNoBatchCumulativeAck
	TestAckWithResponse
	TestConsumerNack
	TestDLQ
	TestConsumerSeek
	TestReader
	TestReaderOnSpecificMessage
	TestReaderHasNext
	TestReaderLatestInclusiveHasNext
	TestMultiTopicConsumerReceive
	TestRegexConsumer
	TestProducerDuplicateNameOnSameTopic
	TestExclusiveProducer
	TestNonPersistentTopic
	TestNormalZeroQueueConsumer
	TestConsumerCompressionWithRSAEncryption
)

usage() {
	sed -n '/^# Usage:/,/^# when no broker/p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

start=0
suite=client
results=""
tests=()
while (($# > 0)); do
	case $1 in
	--start) start=1 ;;
	--full)
		full=1
		start=1
		;;
	--proxy) proxy=1 ;;
	--admin) suite=admin ;;
	--results)
		(($# >= 2)) || usage
		results=$2
		shift
		;;
	--list) list=1 ;;
	-h | --help) usage ;;
	-*)
		echo "pulsar-suite: unknown flag $1" >&2
		usage
		;;
	*)
		if [[ ! $1 =~ ^Test[A-Za-z0-9_]+$ ]]; then
			echo "pulsar-suite: $1 is not a test name" >&2
			exit 2
		fi
		tests+=("$1")
		;;
	esac
	shift
done
if ((${proxy:-0})) && ((!start)); then
	echo "pulsar-suite: --proxy needs --start" >&2
	exit 2
fi
pkg=pulsar
if [[ $suite == admin ]]; then
	pkg=pulsaradmin/pkg/admin
fi
if ((${list:-0})) && [[ $suite == client ]]; then
	printf '%s\n' "${all_tests[@]}"
	exit 0
fi
if ((${full:-0})) && { [[ $suite != client ]] || ((${proxy:-0})); }; then
	echo "pulsar-suite: --full runs the client's suite against a standalone, without --admin or --proxy" >&2
	exit 2
fi
if ((${#tests[@]} == 0)) && [[ $suite == client ]] && ((!${full:-0})); then
	tests=("${all_tests[@]}")
fi

# port_open HOST PORT: true if something accepts TCP connections there.
port_open() {
	timeout 2 bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null
}

broker_up() {
	port_open localhost 6650 && port_open localhost 8080
}

# Probe first: without a broker every test would wait out the client's 30 s
# operation timeout.
if ((!start)) && ((!${list:-0})) && ! broker_up; then
	for port in 6650 8080; do
		port_open localhost "$port" || echo "pulsar-suite: nothing listens on localhost:$port" >&2
	done
	echo "pulsar-suite: the suite needs a broker on localhost:6650 (binary) and localhost:8080 (HTTP);" >&2
	echo "  start one (go run ./cmd/isobar standalone) or pass --start" >&2
	exit 2
fi

work=$(mktemp -d)
broker_pid=""
proxy_pid=""
# stop_group PID: stop a process started in its own session (setsid):
# `go run` or the binary and what it started, nothing else.
stop_group() {
	kill -TERM -- "-$1" 2>/dev/null || kill -TERM "$1" 2>/dev/null || true
	for _ in $(seq 50); do
		kill -0 "$1" 2>/dev/null || break
		sleep 0.2
	done
	kill -KILL -- "-$1" 2>/dev/null || true
}
cleanup() {
	if [[ -n $proxy_pid ]]; then
		stop_group "$proxy_pid"
	fi
	if [[ -n $broker_pid ]]; then
		stop_group "$broker_pid"
	fi
	rm -rf "$work"
}
trap cleanup EXIT

if [[ -z $results ]]; then
	results=$(mktemp -d "${TMPDIR:-/tmp}/pulsar-suite.XXXXXX")
fi
mkdir -p "$results"
results=$(cd "$results" && pwd)

if ((start)); then
	if port_open localhost 6650 || port_open localhost 8080; then
		echo "pulsar-suite: --start: localhost:6650 or :8080 is already in use; stop that broker or drop --start" >&2
		exit 2
	fi
	if ((${full:-0})) && { port_open localhost 6651 || port_open localhost 8443; }; then
		echo "pulsar-suite: --full: localhost:6651 or :8443 (the suite's TLS ports) is already in use" >&2
		exit 2
	fi
	data_dir="$work/data"
	mkdir -p "$data_dir"
	echo "starting isobar standalone (data $data_dir, log $results/standalone.log)" >&2
	if ((${proxy:-0})); then
		# One build for both processes; the broker off the suite's ports.
		(cd "$repo" && go build -o "$work/isobar" ./cmd/isobar)
		setsid "$work/isobar" standalone --data-dir "$data_dir" --broker-port 16650 --http-port 18080 >"$results/standalone.log" 2>&1 &
		broker_pid=$!
		standalone_up() { port_open localhost 16650 && port_open localhost 18080 && [[ -s $data_dir/endpoints.json ]]; }
	elif ((${full:-0})); then
		# The client module's certificates, keys and files, as its CI's
		# standalone.conf names them.
		src="$(go env GOMODCACHE)/github.com/apache/pulsar-client-go@$ver"
		[[ -d $src ]] || (cd "$repo" && go mod download "github.com/apache/pulsar-client-go@$ver")
		it="$src/integration-tests"
		cat >"$work/suite.yaml" <<-YAML
			broker:
			  tls:
			    certFile: $it/certs/broker-cert.pem
			    keyFile: $it/certs/broker-key.pem
			    trustCertsFile: $it/certs/cacert.pem
			  auth:
			    authenticationEnabled: true
			    authorizationEnabled: true
			    token:
			      secretKey: file://$it/tokens/secret.key
			    tlsAuthentication: true
			    basicAuthFile: $it/conf/.htpasswd
			    anonymousUserRole: anonymous
			    superUserRoles: [localhost, superUser, admin]
			  # backlogQuotaCheckIntervalInSeconds=5
			  maintenanceInterval: 5s
			  # transactionCoordinatorEnabled=true
			  transactions:
			    enabled: true
		YAML
		(cd "$repo" && go build -o "$work/isobar" ./cmd/isobar)
		setsid "$work/isobar" standalone --data-dir "$data_dir" --host localhost --config "$work/suite.yaml" >"$results/standalone.log" 2>&1 &
		broker_pid=$!
		standalone_up() { broker_up && port_open localhost 6651 && port_open localhost 8443; }
	else
		(cd "$repo" && exec setsid go run ./cmd/isobar standalone --data-dir "$data_dir") >"$results/standalone.log" 2>&1 &
		broker_pid=$!
		standalone_up() { broker_up; }
	fi
	deadline=$((SECONDS + 300))
	until standalone_up; do
		if ! kill -0 "$broker_pid" 2>/dev/null; then
			echo "pulsar-suite: isobar standalone exited before listening; last lines of its log:" >&2
			tail -n 20 "$results/standalone.log" >&2
			broker_pid=""
			exit 2
		fi
		if ((SECONDS > deadline)); then
			echo "pulsar-suite: isobar standalone is not listening on :6650 and :8080 after 300s" >&2
			exit 2
		fi
		sleep 0.5
	done
	if ((${proxy:-0})); then
		meta=$(sed -n 's/.*"metadataUrl": *"\([^"]*\)".*/\1/p' "$data_dir/endpoints.json" | head -n 1)
		echo "starting isobar proxy on 6650/8080 (metadata store $meta, log $results/proxy.log)" >&2
		setsid "$work/isobar" proxy --region standalone --metastore "$meta" --name suite-proxy \
			--listen 127.0.0.1:6650 --http-listen 127.0.0.1:8080 >"$results/proxy.log" 2>&1 &
		proxy_pid=$!
		until broker_up && [[ $(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:8080/readyz) == 200 ]]; do
			if ! kill -0 "$proxy_pid" 2>/dev/null; then
				echo "pulsar-suite: isobar proxy exited before serving; last lines of its log:" >&2
				tail -n 20 "$results/proxy.log" >&2
				proxy_pid=""
				exit 2
			fi
			if ((SECONDS > deadline)); then
				echo "pulsar-suite: isobar proxy is not ready on :6650 and :8080 after 300s" >&2
				exit 2
			fi
			sleep 0.5
		done
	fi
fi

if ((${full:-0})); then
	# The client CI's setup (scripts/pulsar-test-service-start.sh), as the
	# superuser admin: anonymous administers public and may produce and
	# consume on public/default; token-principal on private/auth.
	admin_token=$(cat "$it/tokens/admin-token")
	call() {
		local code
		code=$(curl -s -o "$work/call.out" -w '%{http_code}' -X "$1" -H "Authorization: Bearer $admin_token" \
			-H 'Content-Type: application/json' ${3:+--data "$3"} "http://localhost:8080$2")
		if [[ $code != 2* ]]; then
			echo "pulsar-suite: setup: $1 $2: HTTP $code: $(cat "$work/call.out")" >&2
			exit 2
		fi
	}
	call POST /admin/v2/tenants/public '{"adminRoles":["anonymous"],"allowedClusters":["standalone"]}'
	call POST /admin/v2/namespaces/public/default/permissions/anonymous '["produce","consume"]'
	call PUT /admin/v2/tenants/private '{"allowedClusters":["standalone"]}'
	call PUT /admin/v2/namespaces/private/auth
	call POST /admin/v2/namespaces/private/auth/permissions/token-principal '["produce","consume"]'
fi

src="$(go env GOMODCACHE)/github.com/apache/pulsar-client-go@$ver"
if [[ ! -d $src ]]; then
	(cd "$repo" && go mod download "github.com/apache/pulsar-client-go@$ver")
fi
cp -r "$src" "$work/client"
chmod -R u+w "$work/client"
bin="$work/pulsar.test"
echo "building the client's test binary (a few minutes when the build cache is cold)" >&2
if ! (cd "$work/client" && GOFLAGS=-mod=mod go test -c -vet=off -o "$bin" "./$pkg") >"$results/build.log" 2>&1; then
	echo "pulsar-suite: building the test binary failed; see $results/build.log" >&2
	tail -n 20 "$results/build.log" >&2
	exit 1
fi

if { [[ $suite == admin ]] || ((${full:-0})); } && { ((${list:-0})) || ((${#tests[@]} == 0)); }; then
	mapfile -t all_tests < <(cd "$work/client/$pkg" && "$bin" -test.list '^Test' | grep '^Test')
	if ((${list:-0})); then
		printf '%s\n' "${all_tests[@]}"
		exit 0
	fi
	tests=("${all_tests[@]}")
fi
echo "results in $results" >&2
passed=0
failed=()
skipped=()
other=()
for name in "${tests[@]}"; do
	log="$results/$name.log"
	t0=$(date +%s.%N)
	status=FAIL
	note=""
	if ! broker_up; then
		note=" (broker not reachable, not run)"
		echo "broker not reachable on localhost:6650 / :8080" >"$log"
	else
		# From the package directory: tests read crypto/testdata/... relatively.
		rc=0
		(cd "$work/client/$pkg" && "$bin" -test.run "^${name}\$" -test.count=1 \
			-test.timeout="$test_timeout" -test.v) >"$log" 2>&1 || rc=$?
		# Exit status 0 with no "--- PASS" line: the test skipped itself,
		# or no test had that name. A test that starts a Pulsar container of
		# its own (testcontainers) does not apply to a broker under test.
		if ((rc == 0)) && grep -q -- "^--- PASS: ${name} " "$log"; then
			status=PASS
		elif ((rc == 0)) && grep -q -- "^--- SKIP: ${name} " "$log"; then
			status=SKIP
			note=" ($(grep -m1 -o 'Skipping.*' "$log" || echo 'skipped by the test'))"
		elif ((rc == 0)); then
			note=" (no such test)"
		elif grep -q "Failed to start the pulsar container" "$log"; then
			status=N/A
			note=" (starts a Pulsar container of its own)"
		fi
	fi
	t1=$(date +%s.%N)
	printf '%-4s %-42s %7ss%s\n' "$status" "$name" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')" "$note"
	case $status in
	PASS) passed=$((passed + 1)) ;;
	SKIP) skipped+=("$name") ;;
	N/A) other+=("$name") ;;
	*) failed+=("$name") ;;
	esac
done

echo "passed $passed/$((${#tests[@]} - ${#skipped[@]} - ${#other[@]})) (${#skipped[@]} skipped by the test itself, ${#other[@]} start a Pulsar container of their own)"
echo "logs: $results"
if ((${#skipped[@]} > 0)); then
	echo "skipped: ${skipped[*]}"
fi
if ((${#other[@]} > 0)); then
	echo "own container: ${other[*]}"
fi
if ((${#failed[@]} > 0)); then
	echo "failed: ${failed[*]}"
	exit 1
fi
