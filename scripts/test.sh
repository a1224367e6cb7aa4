#!/usr/bin/env bash
# test.sh is the README's test command: it installs the pinned tools, starts
# the services the tests need (PostgreSQL 15 and a versitygw S3 server on
# loopback; Kafka is kfake, embedded in the tests; Chromium for the browser
# test, scripts/chromium.sh), runs gofmt, go vet and
# staticcheck, and then every test with the race detector.
#
# Everything is built with -tags onceflow_faults, which compiles in the
# named fault points the crash tests kill processes at (internal/fault);
# without it those tests skip. internal/fault is also vetted without the
# tag, the way production binaries are built.
#
#   bash scripts/test.sh                 everything
#   bash scripts/test.sh ./engine/...    only these packages of the module in
#                                        the current folder (services still started)
#
# Extra `go test` flags go in ONCEFLOW_TEST_FLAGS (e.g. "-run Crash -v").
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v go >/dev/null 2>&1; then
	export PATH="/usr/local/go/bin:$PATH"
fi
bindir="$(bash scripts/install-tools.sh | tail -n 1)"
export PATH="$bindir:$PATH"

eval "$(bash scripts/pg-setup.sh)"
# Chromium for the status page's browser test (cmd/onceflow); installed
# with apt-get when missing. Without it that test skips (fails under
# ONCEFLOW_REQUIRE_SERVICES=1, as in .ci/run).
if chromium="$(bash scripts/chromium.sh | tail -n 1)"; then
	export ONCEFLOW_CHROMIUM="$chromium"
fi
# Stop the S3 server at the end only if this run started it: a server that
# was already running belongs to someone else (another run, a developer).
if bash scripts/s3-server.sh env >/dev/null 2>&1; then
	eval "$(bash scripts/s3-server.sh env)"
else
	eval "$(bash scripts/s3-server.sh start)"
	trap 'bash scripts/s3-server.sh stop >/dev/null 2>&1 || true' EXIT
fi

# The Go modules of the workspace (go.work), each tested on its own: the
# engine module, then the command line and the plugins whose heavy
# dependencies stay out of the engine's go.mod. bench comes last.
MODULES=(. cmd/onceflow sql iceberg statestore/pebblestore)

tags=onceflow_faults
if [ $# -gt 0 ]; then
	echo "== go vet, go test -race $*" >&2
	go vet -tags "$tags" "$@"
	# shellcheck disable=SC2086
	go test -race -count=1 -timeout 14m -tags "$tags" ${ONCEFLOW_TEST_FLAGS:-} "$@"
	exit 0
fi

echo "== gofmt" >&2
unformatted="$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"
if [ -n "$unformatted" ]; then
	echo "gofmt needed on:" >&2
	echo "$unformatted" >&2
	exit 1
fi
for m in "${MODULES[@]}"; do
	echo "== go vet, staticcheck: $m" >&2
	(cd "$m" && go vet -tags "$tags" ./... && staticcheck -tags "$tags" ./...)
done
go vet ./internal/fault/...
staticcheck ./internal/fault/...
# The tests run in two lanes at once: the engine module (whose crash,
# chaos and scale-out tests mostly wait on processes they kill and
# restart) beside the other modules and bench, one after another. Each
# lane's output is printed whole when it ends; a failure in either fails
# the run.
logs="$(mktemp -d)"
lane() { # lane NAME CMD...: run CMD, keep its output and exit code
	local name="$1"
	shift
	local rc=0
	("$@") >"$logs/$name.out" 2>&1 || rc=$?
	echo "$rc" >"$logs/$name.rc"
}
engine_tests() {
	echo "== go test -race: ."
	# shellcheck disable=SC2086
	go test -race -count=1 -timeout 16m -tags "$tags" ${ONCEFLOW_TEST_FLAGS:-} ./...
}
plugin_tests() {
	local m
	for m in "${MODULES[@]:1}"; do
		echo "== go test -race: $m"
		# shellcheck disable=SC2086
		(cd "$m" && go test -race -count=1 -timeout 14m -tags "$tags" ${ONCEFLOW_TEST_FLAGS:-} ./...) || return 1
	done
	# The benchmark module (its own go.mod, with DuckDB): the agreement
	# checks between streamed and reference results, at small scale.
	echo "== bench: go vet, go test"
	(cd bench && go vet ./... && go test -race -count=1 -timeout 10m ./...)
}
echo "== go test -race: every module, in two lanes" >&2
lane engine engine_tests &
lane plugins plugin_tests &
wait
rc=0
for name in engine plugins; do
	cat "$logs/$name.out"
	if [ "$(cat "$logs/$name.rc")" != 0 ]; then
		echo "FAIL: the $name lane" >&2
		rc=1
	fi
done
rm -rf "$logs"
exit $rc
