#!/usr/bin/env bash
# vendor-web.sh fetches the status page's third-party JavaScript from npm
# with `npm pack` (a tarball of the published package, no install scripts
# run) and copies the files we use, with their licenses, into the tree:
#
#   uPlot     monitor/assets/vendor/uplot/     embedded in the binary (the charts)
#   axe-core  cmd/onceflow/testdata/axe/       tests only (the accessibility lint)
#
# To update: change a version below, run `bash scripts/vendor-web.sh`, run
# the browser tests (go test -run TestStatusPage ./cmd/onceflow/), and
# commit the changed files. Nothing is fetched at build or run time.
set -euo pipefail
cd "$(dirname "$0")/.."

UPLOT_VERSION=1.6.32
AXE_VERSION=4.14.1

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

fetch() { # fetch PACKAGE VERSION: unpack the tarball into $tmp/PACKAGE
	local pkg=$1 version=$2
	mkdir -p "$tmp/$pkg"
	(cd "$tmp" && npm pack --silent "$pkg@$version" >/dev/null)
	tar -xzf "$tmp/$pkg-$version.tgz" -C "$tmp/$pkg" --strip-components=1
}

fetch uplot "$UPLOT_VERSION"
dst=monitor/assets/vendor/uplot
rm -rf "$dst" && mkdir -p "$dst"
cp "$tmp/uplot/dist/uPlot.iife.min.js" "$tmp/uplot/dist/uPlot.min.css" "$tmp/uplot/LICENSE" "$dst/"
echo "uPlot $UPLOT_VERSION from npm (npm pack uplot@$UPLOT_VERSION), fetched by scripts/vendor-web.sh" >"$dst/VERSION"

fetch axe-core "$AXE_VERSION"
dst=cmd/onceflow/testdata/axe
rm -rf "$dst" && mkdir -p "$dst"
cp "$tmp/axe-core/axe.min.js" "$tmp/axe-core/LICENSE" "$dst/"
echo "axe-core $AXE_VERSION from npm (npm pack axe-core@$AXE_VERSION), fetched by scripts/vendor-web.sh; used by the browser tests only" >"$dst/VERSION"

ls -l monitor/assets/vendor/uplot cmd/onceflow/testdata/axe >&2
