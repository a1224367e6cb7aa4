#!/usr/bin/env bash
# test.sh is the README's test command: it installs the pinned tools, starts
# the services the tests need (PostgreSQL 15 and a versitygw S3 server on
# loopback; Kafka is kfake, embedded in the tests), runs gofmt, go vet and
# staticcheck, and then every test with the race detector.
#
# Everything is built with -tags onceflow_faults, which compiles in the
# named fault points the crash tests kill processes at (internal/fault);
# without it those tests skip. internal/fault is also vetted without the
# tag, the way production binaries are built.
#
#   bash scripts/test.sh                 everything
#   bash scripts/test.sh ./engine/...    only these packages (services still started)
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
# Stop the S3 server at the end only if this run started it: a server that
# was already running belongs to someone else (another run, a developer).
if bash scripts/s3-server.sh env >/dev/null 2>&1; then
	eval "$(bash scripts/s3-server.sh env)"
else
	eval "$(bash scripts/s3-server.sh start)"
	trap 'bash scripts/s3-server.sh stop >/dev/null 2>&1 || true' EXIT
fi

pkgs=("$@")
if [ ${#pkgs[@]} -eq 0 ]; then
	pkgs=(./...)
fi

echo "== gofmt" >&2
unformatted="$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"
if [ -n "$unformatted" ]; then
	echo "gofmt needed on:" >&2
	echo "$unformatted" >&2
	exit 1
fi
tags=onceflow_faults
echo "== go vet" >&2
go vet -tags "$tags" "${pkgs[@]}"
go vet ./internal/fault/...
echo "== staticcheck" >&2
staticcheck -tags "$tags" "${pkgs[@]}"
staticcheck ./internal/fault/...
echo "== go test -race" >&2
# shellcheck disable=SC2086
go test -race -count=1 -timeout 14m -tags "$tags" ${ONCEFLOW_TEST_FLAGS:-} "${pkgs[@]}"

if [ $# -eq 0 ]; then
	# The benchmark module (its own go.mod, with DuckDB): the agreement
	# checks between streamed and reference results, at small scale.
	echo "== bench: go vet, go test" >&2
	(cd bench && go vet ./... && go test -race -count=1 -timeout 10m ./...)
fi
