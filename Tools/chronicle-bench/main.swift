// chronicle-bench: measures the device store against raw SQLite doing the same
// SQL work in the same run, and prints a table (or, with --json, one JSON object).
//
//   swift build -c release --product chronicle-bench
//   .build/release/chronicle-bench --quick
import ChronicleCore
import ChronicleStore
import CSQLite
import Foundation

/// Shared constants of the benchmark.
enum Bench {
    /// Distinct words in the generated text; frequencies are Zipf-distributed.
    static let vocabularySize = 5_000

    /// The page cache (KiB) `DeviceStore` uses during rebuild and bulk apply.
    static let bulkCacheKilobytes = DeviceStore.bulkCacheKilobytes

    static let usage = """
        usage: chronicle-bench [options]

        Measures Chronicle's device store beside raw SQLite doing the same SQL work
        (prepared statements through the C API, same DDL and pragmas) in the same run:
          write    one local op per durable transaction (DeviceStore.write): median, p99; beside it the disk
                   alone (a 4 KiB write in place and its fdatasync), the least a durable commit can take
          apply    apply of N confirmed ops, batch by batch (DeviceStore.applyConfirmed): ops/s
          bulk     the same N ops into a fresh store (DeviceStore.applyConfirmedInBulk): ops/s
          rebuild  rebuild from that N-op log (DeviceStore.rebuild): ops/s, peak RSS (child process)
          search   FTS5 search over a library of articles (DeviceStore.search): p50, p99,
                   plus exact bm25 ranking as a reference for the engine's ranking window
          sync     against a real SyncServer over loopback HTTP, each beside its own baseline:
                   pull of an N-op library onto an empty device (SyncEngine.syncOnce) vs
                   applyConfirmedInBulk of the same ops; push of 100,000 queued ops (quick 20,000)
                   vs SyncService.pushNow in process; segment vs JSON bytes per op; write on
                   device A to visible on long-polling device B: p50, p99 (200 samples, quick 50);
                   200 devices (quick 50) over 20 libraries syncing at once: ops/s, push p99,
                   and an audit for lost or duplicated ops, beside the herd's floor (raw SQLite running the server's
                   statements for the same pushes on every core); a 64 MiB file (quick 16) uploaded in chunks and
                   fetched by another device vs the same SQL with no HTTP
          lifecycle  compaction of an N-op store (keepOps 10,000): sealing MB/s vs the lz4 tool (lz4 -1) on the
                   same segment bodies, store size before/after, segment and snapshot LZ4 ratios; audit of one
                   article p50/p99 after vs before compaction; a new device onto an N-op library over HTTP from the
                   server's snapshot (its start image, and its frame with start images off) vs pulling the full log:
                   seconds and peak RSS (child processes); beside sealing
                   and the snapshot start their floors (raw SQLite doing the same work, the engine's additions left out)
          articles the article fetcher's reading of 2,000 generated pages (quick 200; ArticleExtractor) vs libxml2
                   alone parsing the same bytes: MB/s
          migrate  DeviceStore.migrate of an N-op store from the oldest version (format v1, schema v1, DDL from
                   Tests/Fixtures/readitlater-v1-format-v1) vs rebuild() of the same store: seconds, peak RSS
                   (child processes), the backup step alone

        options:
          --ops N         confirmed ops for apply, rebuild, bulk, the sync pull, lifecycle and migrate
                          (default 1,000,000; quick 100,000)
          --articles N    articles in the search library (default 100,000; quick 10,000)
          --writes N      local writes measured (default 5,000; quick 1,000)
          --batch N       confirmed ops per applyConfirmed batch (default 10,000)
          --queries N     queries per search kind (default 200; quick 50)
          --seed N        workload seed (default 42)
          --quick         small sizes for a smoke run
          --only PHASE    write, apply, bulk, rebuild, search, sync, lifecycle, articles or migrate (repeatable;
                          rebuild needs apply's log, which is then built but not reported)
          --dir PATH      where to put the temporary stores (default: the system temp dir)
          --keep          keep the stores afterwards (sync's many-device stores live in /dev/shm)
          --json          print one JSON object instead of the table
          --json-file P   also write the JSON object to file P
          --help          this text

        diagnostics (environment variables; the CHRONICLE_BENCH_BASELINE ones touch the baseline side only):
          CHRONICLE_BENCH_BY_TYPE=1                    apply: baseline time per op type
          CHRONICLE_BENCH_BULK_INTERLEAVED=1           bulk: the baseline's transaction for each batch run between the
                                                       engine's (as until 12-02), not each side alone
          CHRONICLE_BENCH_BASELINE_DDL=no-prefix|no-fts what FTS5 prefix indexes / FTS5 cost
          CHRONICLE_BENCH_BASELINE_PRAGMAS="a=1;b=2"   extra pragmas, e.g. cache_size=-262144
          CHRONICLE_BENCH_BASELINE_FTS5_IDF=1          search: the baseline counts a phrase's matches inside bm25(), as FTS5 does
          CHRONICLE_BENCH_BASELINE_READING_ON=0        search: the baseline counts a long prefix's matches in a second query
                                                       instead of reading on past its window (SearchRank.readsOn)
          CHRONICLE_BENCH_RANK_WINDOW=N                search: engine and baseline rank the newest N matches (default 1,000)
          CHRONICLE_BENCH_SEARCH_SLOWEST=N             search: print each kind's N slowest queries, engine and baseline times
          CHRONICLE_BENCH_SEARCH_AB=1                  search: the engine on one read connection against two, query by query
          CHRONICLE_BENCH_SQLITE_MEMSTATUS=1           SQLite's memory statistics on (its default; the engine turns them off),
                                                       for both sides and the child processes
          CHRONICLE_BENCH_SYNC_PARTS=pull,push,latency,scale,blobs   sync: run only these parts
          CHRONICLE_BENCH_SYNC_PARTS=bursts            sync: only the push-only bursts, five in process and five over
                                                       HTTP, each with a fresh fleet (for comparing builds of the push path)
          CHRONICLE_BENCH_SYNC_PULL_PAGE=N             sync pull: page size (engine and baseline; default the engine's)
          CHRONICLE_BENCH_SYNC_DIAG=1                  sync scale: push-only bursts also over one shared URLSession,
                                                       raw sockets and in process (always: per-device HTTPTransport)
        """
}

struct Options {
    var ops = 1_000_000
    var articles = 100_000
    var writes = 5_000
    var batch = 10_000
    var queries = 200
    var seed: UInt64 = 42
    var quick = false
    var only: Set<String> = []
    var directory: String? = nil
    var keep = false
    var json = false
    var jsonFile: String? = nil

    static func parse(_ arguments: [String]) throws -> Options {
        var options = Options()
        var explicit: Set<String> = []
        var index = 0
        func value(_ flag: String) throws -> String {
            index += 1
            guard index < arguments.count else { throw BenchError("\(flag) needs a value") }
            return arguments[index]
        }
        func number(_ flag: String) throws -> Int {
            let text = try value(flag).replacingOccurrences(of: "_", with: "").replacingOccurrences(of: ",", with: "")
            guard let n = Int(text), n > 0 else { throw BenchError("\(flag) needs a positive whole number") }
            explicit.insert(flag)
            return n
        }
        while index < arguments.count {
            let flag = arguments[index]
            switch flag {
            case "--ops": options.ops = try number(flag)
            case "--articles": options.articles = try number(flag)
            case "--writes": options.writes = try number(flag)
            case "--batch": options.batch = try number(flag)
            case "--queries": options.queries = try number(flag)
            case "--seed": options.seed = UInt64(try number(flag))
            case "--quick": options.quick = true
            case "--only":
                let phase = try value(flag)
                guard ["write", "apply", "bulk", "rebuild", "search", "sync", "lifecycle", "articles", "migrate"].contains(phase) else {
                    throw BenchError("--only takes write, apply, bulk, rebuild, search, sync, lifecycle, articles or migrate (got '\(phase)')")
                }
                options.only.insert(phase)
            case "--dir": options.directory = try value(flag)
            case "--keep": options.keep = true
            case "--json": options.json = true
            case "--json-file": options.jsonFile = try value(flag)
            case "--help", "-h": print(Bench.usage); exit(0)
            default: throw BenchError("unknown option '\(flag)'; see --help")
            }
            index += 1
        }
        if options.quick {
            if !explicit.contains("--ops") { options.ops = 100_000 }
            if !explicit.contains("--articles") { options.articles = 10_000 }
            if !explicit.contains("--writes") { options.writes = 1_000 }
            if !explicit.contains("--queries") { options.queries = 50 }
        }
        return options
    }

    func runs(_ phase: String) -> Bool { only.isEmpty || only.contains(phase) }
}

// MARK: - Child processes (re-executed by the rebuild, lifecycle and migrate measurements)

let arguments = Array(CommandLine.arguments.dropFirst())
if arguments.first == "_bootstrap" || arguments.first == "_bootstrap-file" || arguments.first == "_migrate" {
    do {
        if arguments[0] == "_bootstrap" {
            print(try LifecycleBenchmark.bootstrapChild(Array(arguments.dropFirst())))
        } else if arguments[0] == "_bootstrap-file" {
            print(try LifecycleBenchmark.bootstrapFromFile(Array(arguments.dropFirst())))
        } else if arguments.count == 2 {
            print(try MigrationBenchmark.migrateChild(path: arguments[1]))
        } else {
            throw BenchError("usage: chronicle-bench _migrate STORE")
        }
        exit(0)
    } catch {
        progress("chronicle-bench \(arguments[0]): \(error)")
        exit(1)
    }
}
if arguments.first == "_rebuild" || arguments.first == "_rebuild-raw" {
    do {
        if arguments[0] == "_rebuild", arguments.count == 2 {
            print(try RebuildBenchmark.chronicleChild(path: arguments[1]))
        } else if arguments[0] == "_rebuild-raw", arguments.count == 4, let ops = Int(arguments[2]), let seed = UInt64(arguments[3]) {
            print(try RebuildBenchmark.rawChild(path: arguments[1], ops: ops, seed: seed))
        } else {
            throw BenchError("usage: chronicle-bench _rebuild STORE | _rebuild-raw DB OPS SEED")
        }
        exit(0)
    } catch {
        progress("chronicle-bench \(arguments[0]): \(error)")
        exit(1)
    }
}

// MARK: - Main

let options: Options
do {
    options = try Options.parse(arguments)
} catch {
    progress("chronicle-bench: \(error)")
    exit(2)
}

// Diagnostic: SQLite's memory statistics left on (its default), which the engine turns off
// (`Database.configureLibrary`); initializing SQLite here makes the engine's setting too late.
if ProcessInfo.processInfo.environment["CHRONICLE_BENCH_SQLITE_MEMSTATUS"] == "1" {
    _ = chronicle_config_memstatus(1)
    _ = sqlite3_initialize()
}

let base = options.directory ?? FileManager.default.temporaryDirectory.path
let directory = base + "/chronicle-bench-\(getpid())-\(Int(Date().timeIntervalSince1970))"
do {
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
} catch {
    progress("chronicle-bench: cannot create \(directory): \(error)")
    exit(1)
}

let vocabulary = Vocabulary(size: Bench.vocabularySize, seed: options.seed)
var rows: [TableRow] = []
var json: [(String, JSON)] = [
    ("config", .object([
        ("ops", .int(Int64(options.ops))), ("articles", .int(Int64(options.articles))), ("writes", .int(Int64(options.writes))),
        ("batch", .int(Int64(options.batch))), ("queries_per_kind", .int(Int64(options.queries))),
        ("seed", .int(Int64(options.seed))), ("quick", .bool(options.quick)), ("sqlite", .string(Database.libraryVersion)),
        ("cores", .int(Int64(ProcessInfo.processInfo.activeProcessorCount))), ("directory", .string(directory)),
    ])),
]
var notes: [String] = []
var failed = false
let started = nowNanoseconds()

do {
    // 1. Local writes.
    if options.runs("write") {
        progress("write: \(formatCount(Double(options.writes))) writes, one durable transaction each…")
        var result = try WriteBenchmark(directory: directory, writes: options.writes, seed: options.seed, vocabulary: vocabulary).run()
        let median = result.chronicle.percentileMilliseconds(0.5), baseMedian = result.baseline.percentileMilliseconds(0.5)
        let p99 = result.chronicle.percentileMilliseconds(0.99), baseP99 = result.baseline.percentileMilliseconds(0.99)
        let ratio = median / baseMedian
        rows.append(TableRow(measurement: "write: median latency", chronicle: millisecondsText(median), baseline: millisecondsText(baseMedian),
                             ratio: ratioText(ratio), target: "<= 1.5x raw", verdict: verdict(ratio <= 1.5)))
        rows.append(TableRow(measurement: "write: p99 latency", chronicle: millisecondsText(p99), baseline: millisecondsText(baseP99),
                             ratio: ratioText(p99 / baseP99), target: "<= 1 ms", verdict: verdict(p99 <= 1.0)))
        rows.append(TableRow(measurement: "write: mean latency", chronicle: millisecondsText(result.chronicle.meanMilliseconds),
                             baseline: millisecondsText(result.baseline.meanMilliseconds),
                             ratio: ratioText(result.chronicle.meanMilliseconds / result.baseline.meanMilliseconds), target: "", verdict: ""))
        let diskMedian = result.disk.percentileMilliseconds(0.5), diskP99 = result.disk.percentileMilliseconds(0.99)
        rows.append(TableRow(measurement: "write: the disk alone (4 KiB in place + fdatasync), median / p99",
                             chronicle: millisecondsText(diskMedian) + " / " + millisecondsText(diskP99), baseline: "", ratio: "",
                             target: "", verdict: ""))
        notes.append("write: a durable commit cannot take less than its sync; on this disk one 4 KiB write in place and its fdatasync, "
                     + "interleaved with the writes, took \(millisecondsText(diskMedian)) at the median and \(millisecondsText(diskP99)) at p99.")
        json.append(("write", .object([
            ("writes", .int(Int64(result.writes))),
            ("disk_sync", .object([("median_ms", .number(diskMedian)), ("p99_ms", .number(diskP99)),
                                   ("max_ms", .number(result.disk.percentileMilliseconds(1)))])),
            ("op_types", .object(result.typeCounts.sorted { $0.key < $1.key }.map { ($0.key, .int(Int64($0.value))) })),
            ("chronicle", .object([("median_ms", .number(median)), ("p99_ms", .number(p99)), ("mean_ms", .number(result.chronicle.meanMilliseconds)),
                                   ("max_ms", .number(result.chronicle.percentileMilliseconds(1)))])),
            ("sqlite", .object([("median_ms", .number(baseMedian)), ("p99_ms", .number(baseP99)), ("mean_ms", .number(result.baseline.meanMilliseconds)),
                                ("max_ms", .number(result.baseline.percentileMilliseconds(1)))])),
            ("median_ratio", .number(ratio)), ("p99_ratio", .number(p99 / baseP99)),
            ("targets", .object([("p99_ms_max", .number(1)), ("median_ratio_max", .number(1.5))])),
            ("pass", .bool(p99 <= 1.0 && ratio <= 1.5)),
        ])))
        failed = failed || !(p99 <= 1.0 && ratio <= 1.5)
    }

    // 2. Apply, and 3. rebuild from the log it leaves.
    var applyDigest: String? = nil
    if options.runs("apply") || options.runs("rebuild") {
        let reportApply = options.runs("apply")
        progress("apply: \(formatCount(Double(options.ops))) confirmed ops in batches of \(formatCount(Double(options.batch)))\(reportApply ? "" : " (to build the log for rebuild; not reported)")…")
        let apply = try ApplyBenchmark(directory: directory, ops: options.ops, batchSize: options.batch, seed: options.seed,
                                       vocabulary: vocabulary).run()
        applyDigest = apply.digest
        if reportApply {
            let ratio = apply.chronicleOpsPerSecond / apply.baselineOpsPerSecond
            let pass = apply.chronicleOpsPerSecond >= 100_000 && ratio >= 0.6
            var batches = apply.batchSamples
            rows.append(TableRow(measurement: "apply: \(formatCount(Double(apply.ops))) confirmed ops",
                                 chronicle: formatCount(apply.chronicleOpsPerSecond) + " ops/s",
                                 baseline: formatCount(apply.baselineOpsPerSecond) + " ops/s", ratio: ratioText(ratio),
                                 target: ">= 100,000 ops/s and >= 0.6x raw", verdict: verdict(pass)))
            json.append(("apply", .object([
                ("ops", .int(Int64(apply.ops))), ("batches", .int(Int64(apply.batches))), ("server_ops", .int(Int64(apply.serverOps))),
                ("op_types", .object(apply.typeCounts.sorted { $0.key < $1.key }.map { ($0.key, .int(Int64($0.value))) })),
                ("chronicle", .object([("ops_per_second", .number(apply.chronicleOpsPerSecond)),
                                       ("seconds", .number(Double(apply.chronicleNanoseconds) / 1e9)),
                                       ("batch_p50_ms", .number(batches.percentileMilliseconds(0.5))),
                                       ("batch_max_ms", .number(batches.percentileMilliseconds(1))),
                                       ("store_bytes", .int(apply.storeBytes))])),
                ("sqlite", .object([("ops_per_second", .number(apply.baselineOpsPerSecond)),
                                    ("seconds", .number(Double(apply.baselineNanoseconds) / 1e9)),
                                    ("database_bytes", .int(apply.baselineBytes))])),
                ("ratio", .number(ratio)),
                ("targets", .object([("ops_per_second_min", .number(100_000)), ("ratio_min", .number(0.6))])),
                ("pass", .bool(pass)),
            ])))
            failed = failed || !pass
        }

        if options.runs("rebuild") {
            let rebuild = try RebuildBenchmark(storePath: apply.storePath, baselinePath: apply.baselinePath, ops: apply.ops,
                                               seed: options.seed, incrementalDigest: apply.digest).run()
            let c = rebuild.chronicle, b = rebuild.baseline
            let ratio = c.opsPerSecond / b.opsPerSecond
            let peakMB = Double(c.peakKilobytes) / 1024, basePeakMB = Double(b.peakKilobytes) / 1024
            let speedPass = c.opsPerSecond >= 150_000, memoryPass = peakMB <= 150
            rows.append(TableRow(measurement: "rebuild: \(formatCount(Double(c.ops))) ops", chronicle: formatCount(c.opsPerSecond) + " ops/s",
                                 baseline: formatCount(b.opsPerSecond) + " ops/s", ratio: ratioText(ratio),
                                 target: ">= 150,000 ops/s", verdict: verdict(speedPass)))
            rows.append(TableRow(measurement: "rebuild: peak RSS (VmHWM)", chronicle: formatFixed(peakMB, 1) + " MB",
                                 baseline: formatFixed(basePeakMB, 1) + " MB", ratio: ratioText(peakMB / basePeakMB),
                                 target: "<= 150 MB", verdict: verdict(memoryPass)))
            rows.append(TableRow(measurement: "rebuild: digest = incremental", chronicle: rebuild.digestMatchesIncremental == true ? "yes" : "NO",
                                 baseline: "", ratio: "", target: "same state", verdict: verdict(rebuild.digestMatchesIncremental)))
            if let transaction = c.transactionSeconds {
                notes.append("rebuild: chronicle's rebuild() took \(formatFixed(c.seconds, 2)) s, of which the transaction \(formatFixed(transaction, 2)) s (it takes the state digest on the writer while another thread builds search indexes; the raw baseline takes no digest).")
            }
            notes.append("rebuild: VmHWM at child start (before the rebuild): chronicle \(c.startKilobytes / 1024) MB, raw sqlite \(b.startKilobytes / 1024) MB.")
            json.append(("rebuild", .object([
                ("ops", .int(c.ops)),
                ("chronicle", .object([("ops_per_second", .number(c.opsPerSecond)), ("seconds", .number(c.seconds)),
                                       ("transaction_seconds", c.transactionSeconds.map(JSON.number) ?? .null),
                                       ("peak_rss_mb", .number(peakMB)), ("start_rss_mb", .number(Double(c.startKilobytes) / 1024)),
                                       ("digest_matches_incremental", rebuild.digestMatchesIncremental.map(JSON.bool) ?? .null)])),
                ("sqlite", .object([("ops_per_second", .number(b.opsPerSecond)), ("seconds", .number(b.seconds)),
                                    ("peak_rss_mb", .number(basePeakMB)), ("start_rss_mb", .number(Double(b.startKilobytes) / 1024))])),
                ("ratio", .number(ratio)),
                ("targets", .object([("ops_per_second_min", .number(150_000)), ("peak_rss_mb_max", .number(150))])),
                ("pass", .bool(speedPass && memoryPass && rebuild.digestMatchesIncremental != false)),
            ])))
            failed = failed || !(speedPass && memoryPass && rebuild.digestMatchesIncremental != false)
        }
    }

    // 2b. Bulk apply of the same ops into a fresh store.
    if options.runs("bulk") {
        progress("bulk: \(formatCount(Double(options.ops))) confirmed ops in batches of \(formatCount(Double(options.batch))) through applyConfirmedInBulk (fresh store)…")
        let bulk = try BulkApplyBenchmark(directory: directory, ops: options.ops, batchSize: options.batch, seed: options.seed,
                                          vocabulary: vocabulary).run()
        let ratio = bulk.chronicleOpsPerSecond / bulk.baselineOpsPerSecond
        let pass = bulk.chronicleOpsPerSecond >= 100_000 && ratio >= 0.6
        let digestMatches = applyDigest.map { $0 == bulk.digest }
        rows.append(TableRow(measurement: "bulk: \(formatCount(Double(bulk.ops))) confirmed ops",
                             chronicle: formatCount(bulk.chronicleOpsPerSecond) + " ops/s",
                             baseline: formatCount(bulk.baselineOpsPerSecond) + " ops/s", ratio: ratioText(ratio),
                             target: ">= 100,000 ops/s and >= 0.6x raw", verdict: verdict(pass)))
        rows.append(TableRow(measurement: "bulk: digest = incremental apply",
                             chronicle: digestMatches.map { $0 ? "yes" : "NO" } ?? "n/a", baseline: "", ratio: "",
                             target: "same state", verdict: verdict(digestMatches)))
        let cr = Double(bulk.chronicleRebuildNanoseconds) / 1e9, br = Double(bulk.baselineRebuildNanoseconds) / 1e9
        notes.append("bulk: of the timed work, the closing FTS5 rebuild took chronicle \(formatFixed(cr, 2)) s, raw sqlite \(formatFixed(br, 2)) s; without it: chronicle \(formatCount(Double(bulk.ops) / (Double(bulk.chronicleNanoseconds) / 1e9 - cr))) ops/s, raw sqlite \(formatCount(Double(bulk.ops) / (Double(bulk.baselineNanoseconds) / 1e9 - br))) ops/s; search indexes stale afterwards: \(bulk.staleAfter ? "YES" : "no"); store \(bulk.storeBytes / 1_048_576) MB (raw \(bulk.baselineBytes / 1_048_576) MB).")
        notes.append("bulk: after it returned, the engine's phrase indexes (word pairs of \(formatCount(Double(bulk.phraseIndexRows))) rows of titles, article text and transcripts, which the background filler indexes in short transactions; searches read phrases from the word indexes until then) were complete \(formatFixed(bulk.phraseIndexSeconds, 2)) s later, filled on the benchmark's thread beside the filler, untimed above.")
        json.append(("bulk", .object([
            ("ops", .int(Int64(bulk.ops))), ("batches", .int(Int64(bulk.batches))),
            ("chronicle", .object([("ops_per_second", .number(bulk.chronicleOpsPerSecond)),
                                   ("seconds", .number(Double(bulk.chronicleNanoseconds) / 1e9)),
                                   ("index_rebuild_seconds", .number(cr)),
                                   ("phrase_index_seconds_after", .number(bulk.phraseIndexSeconds)),
                                   ("phrase_index_rows", .int(bulk.phraseIndexRows)),
                                   ("store_bytes", .int(bulk.storeBytes)),
                                   ("digest_matches_incremental", digestMatches.map(JSON.bool) ?? .null),
                                   ("search_stale_after", .bool(bulk.staleAfter))])),
            ("sqlite", .object([("ops_per_second", .number(bulk.baselineOpsPerSecond)),
                                ("seconds", .number(Double(bulk.baselineNanoseconds) / 1e9)),
                                ("index_rebuild_seconds", .number(br)),
                                ("database_bytes", .int(bulk.baselineBytes))])),
            ("ratio", .number(ratio)),
            ("targets", .object([("ops_per_second_min", .number(100_000)), ("ratio_min", .number(0.6))])),
            ("pass", .bool(pass && digestMatches != false && !bulk.staleAfter)),
        ])))
        failed = failed || !(pass && digestMatches != false && !bulk.staleAfter)
    }

    // 4. Search.
    if options.runs("search") {
        progress("search: building a library of \(formatCount(Double(options.articles))) articles…")
        var result = try SearchBenchmark(directory: directory, articles: options.articles, queriesPerKind: options.queries,
                                         seed: options.seed, vocabulary: vocabulary).run()
        var kinds: [(String, JSON)] = []
        var allPass = true
        if result.afterWrite.count > 0 {
            notes.append("search one-word, each query right after a local write (the read connections read every ranked row's length again; `chronicle_bm25` keeps them only until a write): p50 \(millisecondsText(result.afterWrite.percentileMilliseconds(0.5))), p99 \(millisecondsText(result.afterWrite.percentileMilliseconds(0.99))).")
        }
        for index in result.kinds.indices {
            let name = result.kinds[index].name
            let p50 = result.kinds[index].chronicle.percentileMilliseconds(0.5), p99 = result.kinds[index].chronicle.percentileMilliseconds(0.99)
            let b50 = result.kinds[index].baseline.percentileMilliseconds(0.5), b99 = result.kinds[index].baseline.percentileMilliseconds(0.99)
            let matches = result.kinds[index].matches.percentileMilliseconds(0.5) * 1e6
            let mismatches = result.kinds[index].mismatches
            let pass = p99 <= 5
            allPass = allPass && pass
            rows.append(TableRow(measurement: "search \(name): p50", chronicle: millisecondsText(p50), baseline: millisecondsText(b50),
                                 ratio: ratioText(p50 / b50), target: "", verdict: ""))
            rows.append(TableRow(measurement: "search \(name): p99", chronicle: millisecondsText(p99), baseline: millisecondsText(b99),
                                 ratio: ratioText(p99 / b99), target: "<= 5 ms", verdict: verdict(pass)))
            let e50 = result.kinds[index].exact.percentileMilliseconds(0.5), e99 = result.kinds[index].exact.percentileMilliseconds(0.99)
            let overlap = result.kinds[index].meanOverlap
            notes.append("search \(name): median \(formatCount(matches)) FTS rows matched per query; \(mismatches) of \(result.kinds[index].queries.count) queries returned different hits or snippets from the baseline; exact bm25 ranking of every match (raw sqlite, one statement): p50 \(millisecondsText(e50)), p99 \(millisecondsText(e99)); the engine's top \(SearchBenchmark.limit) share \(formatFixed(100 * overlap, 1))% of the exact top \(SearchBenchmark.limit) on average.")
            kinds.append((name, .object([
                ("queries", .int(Int64(result.kinds[index].queries.count))),
                ("examples", .array(result.kinds[index].queries.prefix(5).map(JSON.string))),
                ("median_fts_matches", .number(matches)),
                ("max_fts_matches", .number(result.kinds[index].matches.percentileMilliseconds(1) * 1e6)),
                ("chronicle", .object([("p50_ms", .number(p50)), ("p99_ms", .number(p99)),
                                       ("mean_ms", .number(result.kinds[index].chronicle.meanMilliseconds))])),
                ("sqlite", .object([("p50_ms", .number(b50)), ("p99_ms", .number(b99)),
                                    ("mean_ms", .number(result.kinds[index].baseline.meanMilliseconds))])),
                ("exact_ranking", .object([("p50_ms", .number(e50)), ("p99_ms", .number(e99)), ("mean_top_overlap", .number(overlap))])),
                ("p50_ratio", .number(p50 / b50)), ("p99_ratio", .number(p99 / b99)),
                ("result_mismatches", .int(Int64(mismatches))),
                ("pass", .bool(pass)),
            ])))
        }
        notes.append("search: the engine ranks its indexes on two read connections at once (`search(parallel:)`), the baseline runs the same statements one after another on one; engine and baseline take turns going first, query by query, and the exact ranking runs in a pass of its own.")
        if var phrase = result.kinds.first(where: { $0.name == "phrase" }), phrase.fromWordIndexes.count > 0 {
            notes.append("search phrase, read from the word indexes instead (`search(phraseIndexes: false)`, as until the phrase indexes are complete; a pass of its own): p50 \(millisecondsText(phrase.fromWordIndexes.percentileMilliseconds(0.5))), p99 \(millisecondsText(phrase.fromWordIndexes.percentileMilliseconds(0.99))); hits differ from the phrase indexes' in \(phrase.wordIndexMismatches) of \(phrase.queries.count).")
        }
        notes.append("search: phrase indexes complete after the load in \(formatFixed(result.phraseIndexSeconds, 2)) s more (\(formatCount(Double(result.phraseIndexRows))) rows; the load keeps them up to date as it writes).")
        notes.append("search: \(formatCount(Double(result.articles))) articles (\(formatCount(Double(result.fullTextArticles))) with full text) loaded as \(formatCount(Double(result.loadOps))) confirmed ops in \(formatFixed(result.loadSeconds, 1)) s; store \(result.storeBytes / 1_048_576) MB.")
        json.append(("search", .object([
            ("articles", .int(Int64(result.articles))), ("full_text_articles", .int(Int64(result.fullTextArticles))),
            ("load_ops", .int(Int64(result.loadOps))), ("load_seconds", .number(result.loadSeconds)),
            ("store_bytes", .int(result.storeBytes)), ("limit", .int(Int64(SearchBenchmark.limit))),
            ("kinds", .object(kinds)), ("targets", .object([("p99_ms_max", .number(5))])), ("pass", .bool(allPass)),
        ])))
        failed = failed || !allPass
    }

    // 5. Sync against a real server over HTTP.
    if options.runs("sync") {
        let sync = try SyncBenchmark(directory: directory, sizes: .of(ops: options.ops, quick: options.quick), seed: options.seed,
                                     vocabulary: vocabulary, keep: options.keep).run()
        failed = !sync.report(rows: &rows, json: &json, notes: &notes) || failed
    }

    // 6. The log's lifecycle: compaction, audits after it, a new device from a snapshot.
    if options.runs("lifecycle") {
        let lifecycle = try LifecycleBenchmark(directory: directory, ops: options.ops, seed: options.seed, vocabulary: vocabulary,
                                               quick: options.quick, keep: options.keep).run()
        failed = !lifecycle.report(rows: &rows, json: &json, notes: &notes) || failed
    }

    // 7. Migration of a store from the oldest version.
    if options.runs("articles") {
        ArticleBenchmark(pages: options.quick ? 200 : 2_000, seed: options.seed, vocabulary: vocabulary).run()
            .report(rows: &rows, json: &json, notes: &notes)
    }
    if options.runs("migrate") {
        let migration = try MigrationBenchmark(directory: directory, ops: options.ops, seed: options.seed, vocabulary: vocabulary,
                                               keep: options.keep).run()
        failed = !migration.report(rows: &rows, json: &json, notes: &notes) || failed
    }
} catch {
    progress("chronicle-bench: \(error)")
    if !options.keep { try? FileManager.default.removeItem(atPath: directory) }
    exit(1)
}

if options.keep {
    progress("stores kept in \(directory)")
} else {
    try? FileManager.default.removeItem(atPath: directory)
}
let elapsed = Double(nowNanoseconds() - started) / 1e9
json.append(("notes", .array(notes.map(JSON.string))))
json.append(("seconds", .number(elapsed)))
json.append(("pass", .bool(!failed)))

if let file = options.jsonFile {
    do {
        try Data((JSON.object(json).rendered + "\n").utf8).write(to: URL(fileURLWithPath: file))
    } catch {
        progress("chronicle-bench: cannot write \(file): \(error)")
    }
}
if options.json {
    print(JSON.object(json).rendered)
} else {
    print("Chronicle benchmark — SQLite \(Database.libraryVersion), \(ProcessInfo.processInfo.activeProcessorCount) cores, seed \(options.seed)\(options.quick ? ", quick" : "")")
    print("ratio = chronicle / raw sqlite (same SQL work, same run); lower is better for latency, higher for ops/s")
    print("")
    print(renderTable(rows))
    if !notes.isEmpty {
        print("")
        for note in notes { print("- " + note) }
    }
    print("")
    print("total \(formatFixed(elapsed, 1)) s")
}
