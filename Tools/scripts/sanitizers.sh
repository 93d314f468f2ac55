#!/usr/bin/env bash
# Runs the test suite under AddressSanitizer and the concurrent parts of it under ThreadSanitizer,
# each build in its own directory (they cannot share one), and fails on the first report.
#
#   bash Tools/scripts/sanitizers.sh [address|thread]...   (default: both)
#
# Address: the whole suite. One report inside Foundation stays suppressed (asan-suppressions.txt):
# `Process.run()` on Linux (swift-corelibs-foundation, Swift 6.3.1) reads past a buffer while it
# lists /proc/self/fd; the tests start programs with ChildProcess (posix_spawn) instead.
# Thread: the suites where threads meet: the HTTP server and its worker threads, the sync engine
# against a live server, the SQLite layer's writer and readers, the background checkpointer,
# compaction beside writes, the two-thread search index build and searches on two read connections,
# servers sharing PostgreSQL (replicas caught up beside pushes, the LISTEN threads, the token cache).
# Not part of test.sh: each build takes a few minutes and the runs are several times slower.
set -euo pipefail
cd "$(dirname "$0")/../.."

kinds=("$@")
[ ${#kinds[@]} -gt 0 ] || kinds=(address thread)
for kind in "${kinds[@]}"; do
  case "$kind" in
    address|thread) ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "sanitizers: unknown kind '$kind' (address or thread; see --help)" >&2; exit 64 ;;
  esac
done
bash Tools/scripts/install-deps.sh postgresql
export SWIFT_BACKTRACE=enable=no
# The PostgreSQL suites need a server, as under test.sh.
pgdir="$(mktemp -d "${TMPDIR:-/tmp}/chronicle-sanitize-postgres.XXXXXX")"
trap 'bash Tools/scripts/postgres.sh stop "$pgdir"' EXIT
CHRONICLE_TEST_POSTGRES="$(bash Tools/scripts/postgres.sh start "$pgdir")"
export CHRONICLE_TEST_POSTGRES

for kind in "${kinds[@]}"; do
  build="${TMPDIR:-/tmp}/chronicle-sanitize-$kind"
  case "$kind" in
    address)
      echo "== AddressSanitizer (build in $build)"
      swift build --build-tests -Xswiftc -sanitize=address --build-path "$build"
      ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:suppressions=$PWD/Tools/scripts/asan-suppressions.txt" \
        swift test --skip-build --build-path "$build"
      ;;
    thread)
      echo "== ThreadSanitizer (build in $build)"
      swift build --build-tests -Xswiftc -sanitize=thread --build-path "$build"
      # PGGSSENCMODE=disable: libpq leaves Kerberos alone, whose mutexes assert at exit under TSan.
      PGGSSENCMODE=disable TSAN_OPTIONS=halt_on_error=1 swift test --skip-build --build-path "$build" --filter \
        "HTTPServerTests|WorkerPoolTests|HTTPBadInputTests|PushPipelineTests|ServerMaintenanceTests|ServerIsolationTests|SharedSessionTests|SyncTransportSuite|SQLiteLayerTests|LocalWriteTests|SearchRankTests|CheckpointerTests|ParallelSearchBuildTests|ParallelSearchTests|CompactionTests|BulkApplyTests|RetentionHorizonTests|PostgresLibraryTests|PostgresAccountsTests|PostgresSealingTests|SharedServersTests"
      ;;
  esac
done
