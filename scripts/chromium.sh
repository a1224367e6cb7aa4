#!/usr/bin/env bash
# chromium.sh makes sure a headless-capable Chromium is installed, for the
# browser tests of the status page (cmd/onceflow's TestStatusPage…). It
# installs Debian's chromium package with apt-get when no browser is found
# (run as root, as scripts/test.sh is in CI). Idempotent. The last line
# printed is the browser's path:
#
#   ONCEFLOW_CHROMIUM="$(bash scripts/chromium.sh | tail -n 1)"
set -euo pipefail

log() { echo "chromium: $*" >&2; }

find_browser() {
	if [ -n "${ONCEFLOW_CHROMIUM:-}" ] && [ -x "${ONCEFLOW_CHROMIUM}" ]; then
		echo "$ONCEFLOW_CHROMIUM"
		return 0
	fi
	for b in chromium chromium-browser google-chrome-stable google-chrome headless_shell; do
		if command -v "$b" >/dev/null 2>&1; then
			command -v "$b"
			return 0
		fi
	done
	return 1
}

if path="$(find_browser)"; then
	echo "$path"
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	log "no Chromium found and not root: install it with 'sudo apt-get install -y chromium'"
	exit 1
fi
log "no Chromium found; installing Debian's chromium package with apt-get"
apt-get update -qq >&2
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >&2
find_browser
