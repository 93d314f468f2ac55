#!/usr/bin/env bash
# Fuzzes the segment and snapshot decoders, and the article fetcher's reading of pages
# (libxml2 and the walk over its tree) and of HTTP answers, with libFuzzer and keeps a minimized
# corpus of interesting inputs under Tests/Fuzz/Corpus/<target>/, which
# Tests/ChronicleCoreTests/FuzzCorpusTests.swift replays in the normal test suite.
#
#   bash Tools/fuzz/fuzz.sh [segment|snapshot|article|response|all] [RUNS]     # default: all 10000000
#
# Each target is the decoders' sources from Sources/ChronicleCore (no package
# build, no embedded schemas, no libcrypto: the decoders need none of them)
# plus FuzzContract.swift and its entry file, compiled with
# `swiftc -sanitize=fuzzer,address -O`. Seeds come from FuzzSeeds.swift.
# A crash, a trap, an undocumented error code or a broken round trip stops the
# run and leaves the input in Tests/Fuzz/Crashes/<target>/; reproduce it with
#   SWIFT_BACKTRACE=enable=no .build-fuzz/fuzz-<target> Tests/Fuzz/Crashes/<target>/<file>
#
# Environment: FUZZ_BUILD_DIR (default .build-fuzz), FUZZ_MAX_LEN (8192),
# FUZZ_TIMEOUT seconds per input (10), FUZZ_RSS_MB (2048), FUZZ_FLAGS (more
# libFuzzer flags, e.g. "-jobs=2 -workers=2"). Runs under `nice -n 19`.
set -euo pipefail

target=${1:-all}
runs=${2:-10000000}
case "$target" in
    segment|snapshot|article|response) targets=("$target") ;;
    all) targets=(segment snapshot article response) ;;
    *) echo "usage: bash Tools/fuzz/fuzz.sh [segment|snapshot|article|response|all] [RUNS]" >&2; exit 2 ;;
esac
[[ "$runs" =~ ^[0-9]+$ ]] || { echo "RUNS must be a number, not '$runs'" >&2; exit 2; }

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${FUZZ_BUILD_DIR:-$root/.build-fuzz}
max_len=${FUZZ_MAX_LEN:-8192}
timeout=${FUZZ_TIMEOUT:-10}
rss_mb=${FUZZ_RSS_MB:-2048}
read -r -a extra <<< "${FUZZ_FLAGS:-}"
core=$root/Sources/ChronicleCore

# The decoders and what they reach: values and ops, the error type, the
# canonical number formatting `Value.display` uses, the segment and snapshot codecs.
library=(
    "$core/Model/Value.swift" "$core/Model/Op.swift"
    "$core/Support/ChronicleError.swift" "$core/Support/CanonicalJSON.swift"
    "$core"/Segment/*.swift "$core"/Snapshot/*.swift
)
# -module-name ChronicleCore: the harness uses only the library's public API,
# spelled as a client would. lld: gold prints spurious warnings for ASan's symbols.
swift_flags=(
    -swift-version 6 -parse-as-library -O -wmo -warnings-as-errors -module-name ChronicleCore
    -I "$root/Sources/CLZ4" -llz4 -use-ld=lld
)

# Swift seeds Set and Dictionary hashing per process; a fuzzer wants every run of an input alike.
export SWIFT_DETERMINISTIC_HASHING=1
# The Swift runtime's crash backtracer would take the signal of a trap or an
# abort from libFuzzer (and can hang there), so libFuzzer would neither save
# the input nor print the stack. Leave crashes to libFuzzer and ASan.
export SWIFT_BACKTRACE=enable=no

mkdir -p "$build/logs"
echo "== building seed generator"
swiftc "${swift_flags[@]}" "${library[@]}" "$here/FuzzSeeds.swift" -o "$build/fuzz-seeds"
rm -rf "$build/seeds"
"$build/fuzz-seeds" "$build/seeds/segment" "$build/seeds/snapshot"

status=0
for t in "${targets[@]}"; do
    entry=$here/Fuzz$(tr '[:lower:]' '[:upper:]' <<< "${t:0:1}")${t:1}.swift
    bin=$build/fuzz-$t
    echo "== building fuzz-$t"
    if [[ $t == article ]]; then
        # The reader and its contract alone, on libxml2 (Sources/CXML2); seeds are the committed corpus.
        mkdir -p "$build/seeds/article"
        nice -n 19 swiftc -swift-version 6 -parse-as-library -O -wmo -warnings-as-errors -module-name ChronicleArticles \
            -I "$root/Sources/CXML2" $(pkg-config --cflags-only-I libxml-2.0 | sed 's/-I/-Xcc -I/g') -lxml2 -use-ld=lld \
            -sanitize=fuzzer,address "$root/Sources/ChronicleArticles/ArticleExtractor.swift" \
            "$root/Sources/ChronicleArticles/ArticleContract.swift" "$entry" -o "$bin"
    elif [[ $t == response ]]; then
        # The HTTP answer reader and its contract alone (pure Swift); seeds are the committed corpus.
        mkdir -p "$build/seeds/response"
        nice -n 19 swiftc -swift-version 6 -parse-as-library -O -wmo -warnings-as-errors -module-name ChronicleArticles -use-ld=lld \
            -sanitize=fuzzer,address "$root/Sources/ChronicleArticles/PageResponseReader.swift" \
            "$root/Sources/ChronicleArticles/PageResponseContract.swift" "$entry" -o "$bin"
    else
        nice -n 19 swiftc "${swift_flags[@]}" -sanitize=fuzzer,address \
            "${library[@]}" "$here/FuzzContract.swift" "$entry" -o "$bin"
    fi

    kept=$root/Tests/Fuzz/Corpus/$t        # the minimized corpus, committed
    work=$build/corpus/$t                  # everything new this run finds
    crashes=$root/Tests/Fuzz/Crashes/$t
    log=$build/logs/$t.log
    mkdir -p "$kept" "$work" "$crashes"

    echo "== fuzzing $t for $runs executions (log: $log)"
    set +e
    nice -n 19 "$bin" -runs="$runs" -max_len="$max_len" -timeout="$timeout" -rss_limit_mb="$rss_mb" \
        -dict="$here/$t.dict" -artifact_prefix="$crashes/" -print_final_stats=1 -reload=0 \
        "${extra[@]}" "$work" "$kept" "$build/seeds/$t" > "$log" 2>&1
    code=$?
    set -e
    if [[ $code -ne 0 ]]; then
        status=$code
        echo "!! fuzz-$t stopped with status $code: a finding. Inputs in $crashes:" >&2
        ls -l "$crashes" >&2
        grep -B2 -A40 -m1 -E "ERROR: libFuzzer|ERROR: AddressSanitizer|FUZZ CONTRACT VIOLATED|Fatal error" "$log" >&2 || tail -40 "$log" >&2
    fi
    grep -E "^#[0-9]+[[:space:]]+(INITED|DONE)" "$log" || true
    grep -E "^stat::" "$log" || true

    # -use_counters=0: keep one input per new edge rather than per new hit count,
    # which halves the kept corpus for the same coverage ($work keeps the rest).
    echo "== minimizing the $t corpus (-merge=1)"
    merged=$build/merged/$t
    rm -rf "$merged" && mkdir -p "$merged"
    # Its own artifact prefix: an input that still fails in the merge is not left in the working tree.
    nice -n 19 "$bin" -merge=1 -use_counters=0 -max_len="$max_len" -timeout="$timeout" -rss_limit_mb="$rss_mb" \
        -artifact_prefix="$build/merge-$t-" \
        "$merged" "$kept" "$work" "$build/seeds/$t" > "$build/logs/$t-merge.log" 2>&1
    grep -E "MERGE-OUTER: [0-9]+ new files" "$build/logs/$t-merge.log" || true
    find "$kept" -type f -delete
    cp "$merged"/* "$kept"/
    echo "kept $(find "$kept" -type f | wc -l) inputs, $(cat "$kept"/* | wc -c) bytes in $kept"
done
exit "$status"
