#!/usr/bin/env bash
# The main job: installs what it needs, builds a release, and walks a device store
# through a read-it-later session offline: save, tag, highlight, search, audit, rebuild, verify.
#   bash Tools/scripts/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
bash Tools/scripts/install-deps.sh
swift build -c release --product chronicle
bin="$(swift build -c release --show-bin-path)/chronicle"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export CHRONICLE_STORE="$work/library.chronicle"

step() { printf '\n\033[1m$ chronicle %s\033[0m\n' "$*"; "$bin" "$@"; }
id_of() { "$bin" "$@" --json | sed -n 's/.*"id":"\([0-9a-f-]*\)".*/\1/p'; }

step init
printf '\n(no network anywhere below: every write is one local SQLite transaction)\n'
a=$(id_of save https://example.com/offline-first --title "Offline-first apps: the network is only bookkeeping")
b=$(id_of save https://example.com/tunnels --title "Reading in tunnels and basements")
step tag "$a" sync
step tag "$b" commute
step highlight "$a" --quote "every device keeps an append-only log" --note "the core idea"
step note "$b" "Finish on the next flight"
step progress "$a" 0.6
c=$(id_of collection create "Weekend")
step collection add "$c" "$a"
step list
step search "append-only"
step search "tunn*"
step show "$a"
step audit "$a"
step rebuild --verify
step verify
step status
