#!/usr/bin/env bash
# The browser test drives Debian's Chromium through Playwright (never Playwright's own download).
# Installs it with apt-get when missing and we are root; otherwise says what to do.
set -euo pipefail
browser="${RLNOTES_CHROMIUM:-/usr/bin/chromium}"
if [ -x "$browser" ]; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
  echo "Installing Chromium from Debian for the browser test..."
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq chromium >/dev/null
  exit 0
fi
echo "The browser test needs Chromium at $browser." >&2
echo "Install it (Debian/Ubuntu: sudo apt-get install -y chromium) or set RLNOTES_CHROMIUM." >&2
exit 1
