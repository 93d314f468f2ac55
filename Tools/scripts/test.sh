#!/usr/bin/env bash
# Runs every test: installs what the tests need, builds, checks the HTTP API against its document
# (Tools/scripts/api-conformance.sh), starts the services the suite uses (a throwaway PostgreSQL
# server on loopback), and runs the whole suite.
#   bash Tools/scripts/test.sh
# CHRONICLE_PROPERTY_SEEDS=N raises the number of random histories the property test runs (default 1000).
set -euo pipefail
cd "$(dirname "$0")/../.."
# The docs first: every relative link and every repository path they name in code exists (Tools/scripts/check-docs.py).
command -v python3 >/dev/null || bash Tools/scripts/install-deps.sh python3; python3 Tools/scripts/check-docs.py
# The layering: device modules reach no server module, Core does no I/O, no test double ships
# in a production module (Tools/scripts/check-layers.py).
python3 Tools/scripts/check-layers.py
bash Tools/scripts/install-deps.sh postgresql openssl
swift build --build-tests
# The API documentation of the public modules, with the toolchain's DocC; a broken symbol link
# fails the run (Tools/scripts/docs.sh; the archives land in .build/docs).
bash Tools/scripts/docs.sh
# The API against its document: Schemathesis (from PyPI, pinned) against a real `chronicle serve`
# with a signed-in device's token, bounded to 3 minutes, failing the script on any failure. Before
# the suite, so that `swift test`'s summary stays the last thing this script prints.
bash Tools/scripts/api-conformance.sh --time-limit 180
# PostgreSQL for the server's shared store (ChroniclePostgresTests): its own directory and port,
# stopped and removed when the tests end, however they end.
pgdir="$(mktemp -d "${TMPDIR:-/tmp}/chronicle-test-postgres.XXXXXX")"
trap 'bash Tools/scripts/postgres.sh stop "$pgdir"' EXIT
CHRONICLE_TEST_POSTGRES="$(bash Tools/scripts/postgres.sh start "$pgdir")"
export CHRONICLE_TEST_POSTGRES
echo "PostgreSQL for the tests: $CHRONICLE_TEST_POSTGRES" >&2
# A crash prints its backtrace and exits; it never waits for a debugger.
export SWIFT_BACKTRACE="${SWIFT_BACKTRACE:-enable=yes,interactive=no}"
swift test --skip-build
