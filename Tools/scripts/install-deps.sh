#!/usr/bin/env bash
# Installs the Debian packages Chronicle builds and tests against, if any is missing, and the
# packages named as arguments (a script's own extras). Safe to run repeatedly; needs root (or
# sudo) only when something must be installed.
set -euo pipefail
packages=(pkg-config libsqlite3-dev sqlite3 liblz4-dev lz4 libssl-dev ca-certificates libmicrohttpd-dev libpq-dev libxml2-dev "$@")
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "Installing: ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
