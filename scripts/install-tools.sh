#!/usr/bin/env bash
# install-tools.sh installs the Go tools onceflow's checks and tests use, at
# pinned versions, into $GOBIN (or $(go env GOPATH)/bin):
#
#   versitygw    an S3 gateway on a local directory, for the S3 tests
#                (scripts/s3-server.sh starts it)
#   staticcheck  the linter every commit must pass
#
# Idempotent: a tool already installed at its pinned version is left alone
# (the version is read from the binary's build information with
# `go version -m`). Prints the bin directory on its last line.
set -euo pipefail

GO="${GO:-go}"
if ! command -v "$GO" >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
	GO=/usr/local/go/bin/go
fi

TOOLS=(
	"github.com/versity/versitygw/cmd/versitygw@v1.8.0"
	"honnef.co/go/tools/cmd/staticcheck@v0.8.2"
)

bindir="$("$GO" env GOBIN)"
if [ -z "$bindir" ]; then
	bindir="$("$GO" env GOPATH)/bin"
fi

log() { echo "install-tools: $*" >&2; }

for spec in "${TOOLS[@]}"; do
	pkg="${spec%@*}"
	version="${spec##*@}"
	bin="$bindir/${pkg##*/}"
	if [ -x "$bin" ]; then
		# The "mod" line of the main module names its version.
		have="$("$GO" version -m "$bin" 2>/dev/null | awk '$1 == "mod" { print $3; exit }')"
		if [ "$have" = "$version" ]; then
			log "${pkg##*/} $version already installed at $bin"
			continue
		fi
		log "${pkg##*/} at $bin is ${have:-of unknown version}; installing $version"
	else
		log "installing ${pkg##*/} $version"
	fi
	GOBIN="$bindir" "$GO" install "$spec"
done
echo "$bindir"
