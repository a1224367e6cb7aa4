#!/usr/bin/env bash
# s3-server.sh starts or stops a local S3 server for onceflow's S3 tests:
# versitygw with its posix backend on a temporary directory, listening on
# 127.0.0.1 only, on a free port.
#
#   eval "$(scripts/s3-server.sh start)"   start (or find running) and export
#   scripts/s3-server.sh env               print the exports of the running one
#   scripts/s3-server.sh stop              stop it and delete its data
#
# start prints only `export` lines on standard output:
#   ONCEFLOW_TEST_S3_ENDPOINT  http://127.0.0.1:PORT
#   AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION
# The same lines are kept in $ONCEFLOW_S3_STATE/env. The keys are fixed,
# public test keys for a server that listens on loopback and holds only test
# data; they protect nothing and are not secrets.
#
# State lives in ONCEFLOW_S3_STATE (default ${TMPDIR:-/tmp}/onceflow-s3):
# pid, env, log, and data/ (the buckets). versitygw is installed with
# scripts/install-tools.sh when it is not on PATH or in the Go bin directory.
set -euo pipefail

STATE="${ONCEFLOW_S3_STATE:-${TMPDIR:-/tmp}/onceflow-s3}"
ACCESS_KEY=onceflow-test-access
SECRET_KEY=onceflow-test-secret-not-a-secret
REGION=us-east-1
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

log() { echo "s3-server: $*" >&2; }

running() {
	[ -f "$STATE/pid" ] && kill -0 "$(cat "$STATE/pid")" 2>/dev/null
}

# answers PORT: whether an HTTP server answers on 127.0.0.1:PORT.
answers() (
	line=""
	exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
	printf 'GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
	IFS= read -r -t 2 line <&3 || true
	[[ "$line" == HTTP/1.* ]]
)

free_port() {
	local p i
	for i in $(seq 1 50); do
		p=$((20000 + RANDOM % 40000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return 0
		fi
	done
	log "no free port found"
	return 1
}

find_versitygw() {
	local go=go bindir
	command -v go >/dev/null 2>&1 || go=/usr/local/go/bin/go
	if command -v versitygw >/dev/null 2>&1; then
		command -v versitygw
		return
	fi
	bindir="$("$go" env GOBIN)"
	[ -n "$bindir" ] || bindir="$("$go" env GOPATH)/bin"
	if [ ! -x "$bindir/versitygw" ]; then
		log "versitygw not found; installing it"
		"$here/install-tools.sh" >/dev/null
	fi
	echo "$bindir/versitygw"
}

print_env() {
	cat "$STATE/env"
}

start() {
	if running; then
		log "already running (pid $(cat "$STATE/pid"))"
		print_env
		return
	fi
	local gw port pid i
	gw="$(find_versitygw)"
	mkdir -p "$STATE"
	rm -rf "$STATE/data"
	mkdir -p "$STATE/data"
	port="$(free_port)"
	# The root keys come from the environment, not the command line, so
	# they do not show in the process list.
	ROOT_ACCESS_KEY_ID="$ACCESS_KEY" ROOT_SECRET_ACCESS_KEY="$SECRET_KEY" \
		nohup "$gw" --port "127.0.0.1:$port" --region "$REGION" --quiet \
		posix "$STATE/data" >"$STATE/log" 2>&1 </dev/null &
	pid=$!
	echo "$pid" >"$STATE/pid"
	for i in $(seq 1 100); do
		if answers "$port" 2>/dev/null; then
			cat >"$STATE/env" <<ENV
export ONCEFLOW_TEST_S3_ENDPOINT=http://127.0.0.1:$port
export AWS_ACCESS_KEY_ID=$ACCESS_KEY
export AWS_SECRET_ACCESS_KEY=$SECRET_KEY
export AWS_REGION=$REGION
ENV
			log "versitygw (pid $pid) serves $STATE/data on http://127.0.0.1:$port"
			print_env
			return
		fi
		if ! kill -0 "$pid" 2>/dev/null; then
			log "versitygw exited at start; its log:"
			cat "$STATE/log" >&2
			rm -f "$STATE/pid"
			return 1
		fi
		sleep 0.1
	done
	log "versitygw did not answer on port $port within 10 s; its log:"
	cat "$STATE/log" >&2
	kill "$pid" 2>/dev/null || true
	rm -f "$STATE/pid"
	return 1
}

stop() {
	if [ -f "$STATE/pid" ]; then
		local pid i
		pid="$(cat "$STATE/pid")"
		if kill -0 "$pid" 2>/dev/null; then
			kill "$pid"
			for i in $(seq 1 50); do
				kill -0 "$pid" 2>/dev/null || break
				sleep 0.1
			done
			kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
			log "stopped pid $pid"
		fi
	fi
	rm -rf "$STATE"
}

case "${1:-}" in
start) start ;;
stop) stop ;;
env)
	if running; then print_env; else
		log "not running; run: $0 start"
		exit 1
	fi
	;;
*)
	echo "usage: $0 start|stop|env" >&2
	exit 2
	;;
esac
