#!/usr/bin/env bash
# Checks a live `chronicle serve` against its OpenAPI document (Schemas/api/openapi.yaml) with
# Schemathesis, from PyPI: every operation gets requests generated from the document, valid and
# invalid, and the run fails on a 5xx, a status code, content type, header or body the document
# does not describe, a method not answered 405 with its Allow header, an invalid request
# accepted, or a request that ignores its token. Tools/scripts/test.sh runs it before the suite.
#
#   bash Tools/scripts/api-conformance.sh [--max-examples N] [--seed N] [--time-limit S]
#
# It installs what it needs (the Debian -dev packages, curl, sqlite3, and Schemathesis, pinned below,
# in a virtual environment under ~/.cache/chronicle), builds the `chronicle` tool, starts a server on
# a free loopback port in a temporary directory with one user whose library has a few synced ops, a
# snapshot and a start image, registers a device, runs the checks with its token against that
# library, and stops the server. The run is bounded: past --time-limit seconds (default 180) it is
# stopped and counts as failed.
#
# Choices, each kept to the operations it concerns:
# - `wait` on pulls is fixed at 0: a generated long-poll holds its request up to 60 s on an idle
#   library. Its bounds are tested in Tests/ChronicleSyncTests/HTTPBadInputTests.swift.
# - A push or a blob chunk whose body matches the schema may still be refused with a 4xx: an op of
#   another library, device or order than the request's; a chunk that does not fit in the blob's
#   length or does not hash to its address. Rules the document states in words and a schema cannot:
#   `positive_data_acceptance` is off for those two; every other check stays on.
# - A well-formed Range can start past the end of what it asks for (or end before it starts): the
#   document answers 416 there, so 416 counts as an answer to valid data for the two range routes.
# - A blob length or chunk over the documented maximum is refused 413 (blob_too_large,
#   chunk_too_large, as documented): 413 counts as rejecting invalid data for the chunk route.
# - An If-Match naming another start image than the current one (or none: an empty list of tags
#   matches nothing, RFC 9110 §13.1.1) is answered 412 start_image_changed, as documented.
# - In the stateful phase, a step whose negative value the link then replaces with one taken from
#   an earlier answer (a blob's address) is a valid request; Schemathesis 4.32.5 still expects it
#   refused ("Invalid component: positive test case"), so `negative_data_rejection` is off in that
#   phase only; the coverage and fuzzing phases send negative data to every operation.
set -euo pipefail
cd "$(dirname "$0")/../.."

max_examples=200
seed=1
time_limit=180
while [ $# -gt 0 ]; do
  case "$1" in
    --max-examples) max_examples="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    --time-limit) time_limit="$2"; shift 2 ;;
    -h|--help) sed -n '2,35p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "api-conformance: unknown option '$1' (see --help)" >&2; exit 64 ;;
  esac
done

# curl, and a Python that can make a virtual environment (Debian's python3 needs python3-venv; its
# own pip refuses to install into the system), then Schemathesis in a venv kept between runs.
extras=(curl sqlite3)
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
# The server compacts on its own every half second once more than 2 ops are hot, in segments of 2,
# writes a snapshot at every seal and builds a start image from it, so that the snapshot and
# start-image routes have something to serve.
"$chronicle" serve --data "$work/data" --host 127.0.0.1 --port "$port" --compact-keep-ops 2 --compact-segment-ops 2 \
  --compact-snapshot-ops 1 --compact-every 0.5 --start-image-ops 1 >"$work/serve.log" 2>&1 &
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
format=$(sqlite3 "$CHRONICLE_STORE" "SELECT value FROM chronicle_meta WHERE key = 'format_version'")
fingerprint=$(sqlite3 "$CHRONICLE_STORE" "SELECT value FROM chronicle_meta WHERE key = 'schema_fingerprint'")

device=$(python3 -c 'import uuid; print(uuid.uuid4())')
registration=$(curl -fsS -X POST "$base/v1/devices" -H 'Content-Type: application/json' \
  -d "{\"user\":\"ada\",\"password\":\"api-conformance checks password\",\"deviceID\":\"$device\"}")
read -r token library < <(printf '%s' "$registration" \
  | python3 -c 'import json, sys; r = json.load(sys.stdin); print(r["token"], r["libraryID"])')
for _ in $(seq 1 100); do
  curl -fsS -o /dev/null -H "Authorization: Bearer $token" "$base/v1/libraries/$library/start-image?format=$format&schema=$fingerprint" \
    2>/dev/null && break
  sleep 0.2
done
curl -fsS -o /dev/null -H "Authorization: Bearer $token" "$base/v1/libraries/$library/start-image?format=$format&schema=$fingerprint" \
  || { echo "api-conformance: the server built no start image:" >&2; tail -20 "$work/serve.log" >&2; exit 1; }

cat >"$work/schemathesis.toml" <<EOF
# Every check, for every operation (a check named on the command line would override the one below).
# An [[operations]] block names one operation by include-name ("METHOD path"): Schemathesis takes
# several include-* keys in one block as alternatives (any of them), not as all together.
checks.enabled = true

[parameters]
"path.library" = "$library"
"query.format" = $format
"query.schema" = "$fingerprint"

[[operations]]
include-name = "GET /v1/libraries/{library}/ops"
parameters = { "query.wait" = 0 }

[[operations]]
include-name = "POST /v1/libraries/{library}/ops"
checks.positive_data_acceptance.enabled = false

[[operations]]
include-name = "PUT /v1/libraries/{library}/blobs/{blob}"
checks.positive_data_acceptance.enabled = false
checks.negative_data_rejection.expected-statuses = [400, 401, 403, 404, 405, 406, 409, 413, 415, 422, 428, 429, "5xx"]

[[operations]]
include-name = "GET /v1/libraries/{library}/blobs/{blob}"
checks.positive_data_acceptance.expected-statuses = ["2xx", "3xx", 401, 403, 404, 409, 416, 429, "5xx"]

[[operations]]
include-name = "GET /v1/libraries/{library}/start-image"
checks.positive_data_acceptance.expected-statuses = ["2xx", "3xx", 401, 403, 404, 409, 412, 416, 429, "5xx"]

[phases.stateful.checks.negative_data_rejection]
enabled = false
EOF

spec="$PWD/Schemas/api/openapi.yaml"
cd "$work"
status=0
timeout --signal=INT --kill-after=10 "$time_limit" "$venv/bin/schemathesis" run "$spec" --url "$base" -H "Authorization: Bearer $token" \
  --max-examples "$max_examples" --seed "$seed" --workers 1 --request-timeout 20 || status=$?
if [ "$status" -eq 124 ]; then
  echo "api-conformance: Schemathesis did not finish within $time_limit s; counted as failed." >&2
fi
if ! kill -0 "$server" 2>/dev/null; then
  echo "api-conformance: the server died during the run:" >&2
  tail -40 "$work/serve.log" >&2
  status=1
fi
exit "$status"
