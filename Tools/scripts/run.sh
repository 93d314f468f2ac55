#!/usr/bin/env bash
# The main job: installs what it needs, builds a release, runs the sync server on its
# embedded SQLite store, and demonstrates it with two devices (a phone and a laptop)
# driven by the `chronicle` tool: the phone works offline, the laptop edits the same
# rows, the phone reconnects, and both end with the server's state digest.
#   bash Tools/scripts/run.sh            # then the server keeps running until Ctrl-C (on a terminal)
#   CHRONICLE_PORT=8080 bash Tools/scripts/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
bash Tools/scripts/install-deps.sh
swift build -c release --product chronicle
bin="$(swift build -c release --show-bin-path)/chronicle"
work="$(mktemp -d)"
server_pid=""
cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
password="demo-password-$RANDOM$RANDOM"

say() { printf '\n\033[1m%s\033[0m\n' "$*"; }
on() { local device="$1"; shift; printf '\033[2m[%s]$ chronicle %s\033[0m\n' "$device" "$*"; CHRONICLE_STORE="$work/$device.chronicle" "$bin" "$@"; }
id_of() { local device="$1"; shift; CHRONICLE_STORE="$work/$device.chronicle" "$bin" "$@" --json | sed -n 's/.*"id":"\([0-9a-f-]*\)".*/\1/p'; }

say "1. The sync server: HTTP/1.1 on libmicrohttpd, embedded SQLite in $work/server"
"$bin" server add-user --data "$work/server" ada <<<"$password"
"$bin" serve --data "$work/server" --port "${CHRONICLE_PORT:-0}" >"$work/serve.out" 2>"$work/serve.log" &
server_pid=$!
for _ in $(seq 1 100); do grep -q "listening on" "$work/serve.out" 2>/dev/null && break; sleep 0.1; done
url=$(sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' "$work/serve.out")
[ -n "$url" ] || { echo "the server did not start:"; cat "$work/serve.log"; exit 1; }
echo "listening on $url   (logs: one JSON object a line)"
curl -fsS "$url/healthz" 2>/dev/null && echo || true

say "2. Two devices sign in (the password comes from stdin; the token is kept 0600, never printed)"
for device in phone laptop; do on "$device" init; on "$device" login --server "$url" --user ada <<<"$password"; done

say "3. Online: the phone saves and tags, both sync"
a=$(id_of phone save https://sqlite.org/wal.html --title "Write-Ahead Logging")
b=$(id_of phone save https://example.com/tunnels --title "Why trains lose signal in tunnels")
on phone tag "$a" databases
on phone sync
on laptop sync
on laptop list

say "4. The server goes away (airplane mode); the phone keeps working"
kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=""
on phone highlight "$a" --quote "readers do not block writers" --note "the key property"
on phone note "$b" "Finish this on the next flight"
on phone progress "$a" 0.8
on phone update "$a" --title "WAL: how SQLite readers and writers share a file"
c=$(id_of phone collection create "Read on the plane")
on phone collection add "$c" "$a"
# An episode recorded on the plane: its audio is a file kept in the store, queued apart from the ops.
head -c 3000000 /dev/urandom > "$work/episode.mp3"
audio=$(on phone blob add "$work/episode.mp3" --type audio/mpeg | tee /dev/stderr | tail -1)
on phone op episode.save --payload "{\"title\":\"Recorded on the plane\",\"audio_ref\":\"$audio\"}"
CHRONICLE_SYNC_RETRIES=0 on phone sync || echo "(exit $? — offline: nothing is lost)"
on phone status

say "5. The server is back; the laptop renames the same article and reads less far"
"$bin" serve --data "$work/server" --port "${url##*:}" >"$work/serve.out" 2>>"$work/serve.log" &
server_pid=$!
for _ in $(seq 1 100); do grep -q "listening on" "$work/serve.out" 2>/dev/null && break; sleep 0.1; done
on laptop update "$a" --title "Write-Ahead Logging (laptop)"
on laptop progress "$a" 0.45
on laptop sync

say "6. The phone reconnects; the laptop syncs again"
on phone sync
on laptop sync
on laptop show "$a"
on laptop search "readers"
on laptop blob get "$audio" --to "$work/episode-on-laptop.mp3"
cmp "$work/episode.mp3" "$work/episode-on-laptop.mp3" && echo "the episode's audio reached the laptop byte for byte (uploaded in chunks after the ops)"
on phone audit "$a"

say "7. Convergence: the same state digest on both devices, each rebuilt from its own log"
on phone rebuild --verify
on laptop rebuild --verify
on phone status
on laptop status
curl -fsS "$url/metrics" 2>/dev/null | grep '^chronicle_ops_total' || true

if [ -t 0 ] && [ -t 1 ]; then
  say "The server is still running at $url (data in $work/server). Try: CHRONICLE_STORE=$work/laptop.chronicle $bin list"
  echo "Press Ctrl-C to stop it; everything in $work is removed then."
  wait "$server_pid" || true
fi
