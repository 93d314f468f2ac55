#!/usr/bin/env bash
# Checks a live `chronicle serve` against its OpenAPI document (Schemas/api/openapi.yaml) with
# Schemathesis, from PyPI: every operation gets requests generated from the document, valid and
# invalid, and the run fails on a 5xx, a status code, content type, header or body the document
# does not describe, a method not answered 405 with its Allow header, an invalid request
# accepted, or a request that ignores its token.
#
#   bash Tools/scripts/api-conformance.sh [--max-examples N] [--seed N]
#
# It installs what it needs (the Debian -dev packages, curl, and Schemathesis, pinned below, in a
# virtual environment under ~/.cache/chronicle), builds the `chronicle` tool, starts a server on a
# free loopback port in a temporary directory with one user whose library has a few synced ops and
# a snapshot, registers a device, runs the checks with its token against that library, and stops
# the server. Not part of the test suite: it needs PyPI, and the suite runs without it.
#
# Two choices, each kept to one operation:
# - `wait` on pulls is fixed at 0: a generated long-poll holds its request up to 60 s on an idle
#   library. Its bounds are tested in Tests/ChronicleSyncTests/HTTPBadInputTests.swift.
# - A push whose body matches the schema may still be refused with a 400 (an op of another
#   library, device or order than the request's): rules the document states in words and a
#   schema cannot. `positive_data_acceptance` is off for push; every other check stays on.
set -euo pipefail
cd "$(dirname "$0")/../.."

max_examples=200
seed=1
while [ $# -gt 0 ]; do
  case "$1" in
    --max-examples) max_examples="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "api-conformance: unknown option '$1' (see --help)" >&2; exit 64 ;;
  esac
done

# curl, and a Python that can make a virtual environment (Debian's python3 needs python3-venv; its
# own pip refuses to install into the system), then Schemathesis in a venv kept between runs.
extras=(curl)
{ command -v python3 >/dev/null && python3 -m venv --help >/dev/null 2>&1; } || extras+=(python3 python3-venv)
bash Tools/scripts/install-deps.sh "${extras[@]}"
venv="${XDG_CACHE_HOME:-$HOME/.cache}/chronicle/schemathesis-4.32.5"
if [ ! -x "$venv/bin/schemathesis" ]; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "schemathesis==4.32.5"
fi
swift build --product chronicle
chronicle="$(swift build --show-bin-path)/chronicle"

work=$(mktemp -d)
server=""
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
base="http://127.0.0.1:$port"
echo "api-conformance checks password" | "$chronicle" server add-user --data "$work/data" ada >/dev/null
"$chronicle" serve --data "$work/data" --host 127.0.0.1 --port "$port" >"$work/serve.log" 2>&1 &
server=$!
for _ in $(seq 1 100); do
  curl -fsS "$base/healthz" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -fsS "$base/healthz" >/dev/null || { echo "api-conformance: the server did not start:" >&2; cat "$work/serve.log" >&2; exit 1; }

# A library with history and a snapshot, so pulls serve segments and the snapshot route a frame:
# a device signs in with the tool, saves and tags a few articles, syncs, and the library is compacted.
export CHRONICLE_STORE="$work/phone.chronicle"
"$chronicle" init >/dev/null
echo "api-conformance checks password" | "$chronicle" login --server "$base" --user ada >/dev/null
for n in 1 2 3 4 5; do
  id=$("$chronicle" save "https://example.com/conformance/$n" --title "Conformance article $n" --json \
    | python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])')
  "$chronicle" tag "$id" "checked" >/dev/null
done
"$chronicle" sync --once >/dev/null
"$chronicle" server compact --data "$work/data" ada --keep-ops 2 >/dev/null

device=$(python3 -c 'import uuid; print(uuid.uuid4())')
registration=$(curl -fsS -X POST "$base/v1/devices" -H 'Content-Type: application/json' \
  -d "{\"user\":\"ada\",\"password\":\"api-conformance checks password\",\"deviceID\":\"$device\"}")
read -r token library < <(printf '%s' "$registration" \
  | python3 -c 'import json, sys; r = json.load(sys.stdin); print(r["token"], r["libraryID"])')

cat >"$work/schemathesis.toml" <<EOF
# Every check, for every operation (a check named on the command line would override the one below).
checks.enabled = true

[parameters]
"path.library" = "$library"

[[operations]]
include-path = "/v1/libraries/{library}/ops"
include-method = "GET"
parameters = { "query.wait" = 0 }

[[operations]]
include-path = "/v1/libraries/{library}/ops"
include-method = "POST"
checks.positive_data_acceptance.enabled = false
EOF

spec="$PWD/Schemas/api/openapi.yaml"
cd "$work"
"$venv/bin/schemathesis" run "$spec" --url "$base" -H "Authorization: Bearer $token" \
  --max-examples "$max_examples" --seed "$seed" --workers 1 --request-timeout 20
