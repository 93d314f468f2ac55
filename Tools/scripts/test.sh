#!/usr/bin/env bash
# Runs every test: installs what the tests need, builds, and runs the whole suite.
#   bash Tools/scripts/test.sh
# CHRONICLE_PROPERTY_SEEDS=N raises the number of random histories the property test runs (default 1000).
set -euo pipefail
cd "$(dirname "$0")/../.."
bash Tools/scripts/install-deps.sh
swift build --build-tests
# A crash prints its backtrace and exits; it never waits for a debugger.
export SWIFT_BACKTRACE="${SWIFT_BACKTRACE:-enable=yes,interactive=no}"
swift test --skip-build
