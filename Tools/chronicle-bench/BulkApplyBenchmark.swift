import CSQLite
import ChronicleCore
import ChronicleTesting
import ChronicleStore
import Foundation

/// Measurement 2b: the same N confirmed ops as the apply measurement, applied to
/// a fresh store through `DeviceStore.applyConfirmedInBulk`, beside raw SQLite
/// doing the same SQL work as that call
/// (Sources/ChronicleStore/Device/DeviceStore+Bulk.swift; keep in step):
///
/// 1. one transaction: the `search_stale` mark, the log's entity index and the projection's
///    read indexes dropped, then `'delete-all'` on every FTS5 index, each phrase index emptied
///    too with its watermark at 0;
/// 2. per batch, one transaction under `synchronous = NORMAL`: the larger page cache
///    pragma, the log rows, the cursor, each op's materializer steps (no FTS5 upkeep);
///    every batch but the last is sealed instead of logged: its segment rows (frame, entity
///    filter, chained digest, encoded and compressed before the timed work, as the engine
///    does off its writer) and its op ids in `chronicle_sealed_ids` (16 bytes each);
/// 3. one transaction (temporary files on disk): the entity index and the read indexes created, every FTS5
///    index refilled and the stale mark cleared, the phrase indexes left to fill
///    (`RebuildBenchmark.rebuildSearchIndexes`), the usual page cache back.
///
/// The engine then fills its phrase indexes in the background; the benchmark completes them
/// after its timed work (`completePhraseIndexes`) and reports that time on its own.
///
/// Each side runs alone, the engine first, over the same generated batches: the
/// engine pulls its batches from a sequence that generates each one (untimed), then
/// the baseline folds the same batches, generated again from the same seed. (Until
/// 12-02 the sequence also ran the baseline's transaction for each batch before
/// handing it over; the engine's background work — its WAL checkpoints, freeing the
/// batch before — then ran on a core of its own during that untimed time, which a
/// real catch-up does not give it, and the engine measured about a quarter faster.)
struct BulkApplyBenchmark {
    struct Result {
        var ops: Int
        var batches: Int
        var chronicleNanoseconds: UInt64
        var baselineNanoseconds: UInt64
        /// Of the above: the closing index rebuild alone.
        var chronicleRebuildNanoseconds: UInt64
        var baselineRebuildNanoseconds: UInt64
        var storeBytes: Int64
        var baselineBytes: Int64
        var digest: String
        var staleAfter: Bool
        /// The phrase indexes completed after the engine's bulk apply (untimed above), and their rows.
        var phraseIndexSeconds = 0.0
        var phraseIndexRows: Int64 = 0

        var chronicleOpsPerSecond: Double { Double(ops) / (Double(chronicleNanoseconds) / 1e9) }
        var baselineOpsPerSecond: Double { Double(ops) / (Double(baselineNanoseconds) / 1e9) }
    }

    let directory: String
    let ops: Int
    let batchSize: Int
    let seed: UInt64
    let vocabulary: Vocabulary

    /// The baseline's SQL, prepared once.
    final class Baseline {
        let raw: RawDatabase
        let schema: Schema
        let projection: ProjectionSchema
        let materializer: Materializer
        let blockInsert: OpaquePointer
        let setMeta: OpaquePointer
        let begin: OpaquePointer
        let commit: OpaquePointer
        let bulkCache: OpaquePointer
        let normalCache: OpaquePointer
        let deleteAll: [OpaquePointer]
        let syncNormal: OpaquePointer
        let syncFull: OpaquePointer
        let lastDigest: OpaquePointer
        let segmentInsert: OpaquePointer
        let filterInsert: OpaquePointer
        let sealedInsert: OpaquePointer
        var nanoseconds: UInt64 = 0
        var rebuildNanoseconds: UInt64 = 0

        init(raw: RawDatabase, schema: Schema) throws {
            self.raw = raw
            self.schema = schema
            projection = ProjectionSchema(schema: schema)
            materializer = Materializer(schema: schema)
            blockInsert = try raw.prepare(LogBlockRow.insertSQL)
            setMeta = try raw.prepare("INSERT INTO chronicle_meta(key, value) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET value = excluded.value")
            begin = try raw.prepare("BEGIN IMMEDIATE")
            commit = try raw.prepare("COMMIT")
            bulkCache = try raw.prepare("PRAGMA cache_size = -\(Bench.bulkCacheKilobytes)")
            normalCache = try raw.prepare("PRAGMA cache_size = -\(Database.Options.defaultCacheKilobytes)")
            deleteAll = try projection.searchIndexes.map { _, index in
                let fts = ProjectionSchema.quoted(index.index)
                return try raw.prepare("INSERT INTO \(fts)(\(fts)) VALUES ('delete-all')")
            } + projection.searchIndexes.compactMap { _, index in SearchPairs.phraseIndexTable(of: index).map { (index, $0) } }.flatMap { index, table in
                let pairs = ProjectionSchema.quoted(table)
                return [try raw.prepare("INSERT INTO \(pairs)(\(pairs)) VALUES ('delete-all')"),
                        try raw.prepare("INSERT OR REPLACE INTO chronicle_meta(key, value) VALUES ('\(SearchPairs.phraseIndexWatermarkKey(of: index))', 0)")]
            }
            syncNormal = try raw.prepare("PRAGMA synchronous = NORMAL")
            syncFull = try raw.prepare("PRAGMA synchronous = FULL")
            lastDigest = try raw.prepare("SELECT digest FROM chronicle_segments ORDER BY first_seq DESC LIMIT 1")
            segmentInsert = try raw.prepare("""
                INSERT INTO chronicle_segments(first_seq, last_seq, op_count, body, digest, previous_digest, body_bytes, created_at)
                VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                """)
            filterInsert = try raw.prepare("INSERT INTO chronicle_segment_filters(first_seq, filter) VALUES (?1, ?2)")
            sealedInsert = try raw.prepare(LogBlockRow.idInsertSQL)
        }

        /// The digest of the newest segment ('' if none).
        private func previousDigest() throws -> String {
            try raw.bind(lastDigest, [])
            defer { sqlite3_reset(lastDigest) }
            guard sqlite3_step(lastDigest) == SQLITE_ROW, let text = sqlite3_column_text(lastDigest, 0) else { return "" }
            return String(cString: text)
        }

        func start() throws {
            let t0 = nowNanoseconds()
            try raw.run(begin, [])
            try raw.run(setMeta, [.text("search_stale"), .integer(1)])
            for index in projection.readIndexes { try raw.exec(index.dropSQL) }
            for statement in deleteAll { try raw.run(statement, []) }
            try raw.run(commit, [])
            nanoseconds += nowNanoseconds() - t0
        }

        /// `seal`: more batches follow, so this one is sealed rather than logged (as the engine does).
        /// Logged, the batch is one block of the log (store format v9; the engine's batches are of at
        /// most a block's ops). Either way each op's id is kept as its 16 bytes with its seq.
        func apply(_ batch: [Op], seal: Bool) throws {
            let logged = try LogBlockRow(batch)
            let body = logged.body
            let frame = seal ? LZ4Frame.compress(body) : []
            let steps = try batch.map { try raw.prepared(materializer.steps(for: $0)) }
            let first = batch.first!.serverSeq!, cursor = batch.last!.serverSeq!
            let t0 = nowNanoseconds()
            try raw.run(syncNormal, [])
            try raw.run(begin, [])
            try raw.run(bulkCache, [])
            if seal {
                let previous = try previousDigest()
                let hasher = SHA256Hasher()
                hasher.update(previous)
                hasher.update(body)
                try raw.run(segmentInsert, [.integer(first), .integer(cursor), .integer(cursor - first + 1), .null, .text(hasher.hexDigest()),
                                            .text(previous), .integer(Int64(body.count)), .integer(0)], blob: frame, at: 4)
                try raw.run(filterInsert, [.integer(first), .null], blob: logged.filter, at: 2)
            } else {
                try logged.insertBlock(blockInsert, in: raw)
            }
            try logged.insertIDs(sealedInsert, in: raw)
            try raw.run(setMeta, [.text("cursor"), .integer(cursor)])
            for item in steps { try raw.execute(item) }
            try raw.run(commit, [])
            try raw.run(syncFull, [])
            nanoseconds += nowNanoseconds() - t0
        }

        func finish() throws {
            let t0 = nowNanoseconds()
            try raw.exec("PRAGMA temp_store = FILE")
            try raw.run(begin, [])
            for index in projection.readIndexes { try raw.exec(index.createSQL) }
            // As rebuildSearchIndexes: an index the plan keeps empty is only emptied.
            try RebuildBenchmark.rebuildSearchIndexes(raw, projection)
            try raw.run(normalCache, [])
            try raw.run(commit, [])
            try raw.exec("PRAGMA temp_store = MEMORY")
            let elapsed = nowNanoseconds() - t0
            nanoseconds += elapsed
            rebuildNanoseconds += elapsed
        }
    }

    /// The batches handed to `applyConfirmedInBulk`. Time spent in `next()`
    /// (generating a batch and, with `interleaved`, running the baseline's
    /// transaction for it) is taken out of the engine's time.
    final class Feed: Sequence, IteratorProtocol {
        var workload: ConfirmedWorkload
        let batchSize: Int
        let baseline: Baseline
        let interleaved: Bool
        let started = nowNanoseconds()
        var excluded: UInt64 = 0
        var batches = 0
        var failure: Error?
        /// When the last `next()` returned (the one that said the batches are over).
        var lastHandedOut: UInt64 = 0
        private var throttle = Throttle()

        init(workload: ConfirmedWorkload, batchSize: Int, baseline: Baseline, interleaved: Bool) {
            self.workload = workload
            self.batchSize = batchSize
            self.baseline = baseline
            self.interleaved = interleaved
        }

        func next() -> [Op]? {
            let t0 = nowNanoseconds()
            defer {
                let t1 = nowNanoseconds()
                excluded += t1 - t0
                lastHandedOut = t1
            }
            guard failure == nil, !workload.isDone else { return nil }
            let batch = workload.nextBatch(batchSize)
            if interleaved {
                do {
                    try baseline.apply(batch, seal: !workload.isDone)
                } catch {
                    failure = error
                    return nil
                }
            }
            batches += 1
            if throttle.ready() {
                let engine = Double(t0 - started - excluded) / 1e9
                let done = Double(workload.produced - batch.count)
                let raw = interleaved ? ", raw sqlite \(formatCount(Double(workload.produced) / (Double(baseline.nanoseconds) / 1e9))) ops/s" : ""
                progress("bulk: \(formatCount(Double(workload.produced)))/\(formatCount(Double(workload.total))) ops; chronicle \(formatCount(done / engine)) ops/s\(raw) (before the index rebuild)")
            }
            return batch
        }
    }

    /// Diagnostic: `CHRONICLE_BENCH_BULK_INTERLEAVED=1` runs the baseline's transaction for each
    /// batch in the engine's untimed time between batches, as the benchmark did until 12-02.
    static let interleaved = ProcessInfo.processInfo.environment["CHRONICLE_BENCH_BULK_INTERLEAVED"] == "1"

    func run() throws -> Result {
        let schema = Schema.readItLater
        let path = directory + "/bulk.chronicle"
        let rawPath = directory + "/bulk-raw.sqlite"
        let libraryID = benchLibraryID(seed: seed)
        var deviceRNG = SplitMix64(seed: seed ^ 0xDE71CE)
        let result: Result = try {
            let clock = ManualClock()
            let store = try DeviceStore.create(at: path, schema: schema, libraryID: libraryID, deviceID: deviceRNG.uuid(),
                                               clock: clock, ids: SeededV7IDGenerator(seed: seed, clock: clock))
            let raw = try StoreDDL.read(fromStoreAt: path, schema: schema).createBaseline(at: rawPath)
            let baseline = try Baseline(raw: raw, schema: schema)
            let interleaved = Self.interleaved
            let feed = Feed(workload: ConfirmedWorkload(seed: seed, total: ops, libraryID: libraryID, vocabulary: vocabulary),
                            batchSize: batchSize, baseline: baseline, interleaved: interleaved)

            if interleaved { try baseline.start() }
            let t0 = nowNanoseconds()
            try store.applyConfirmedInBulk(feed)
            let t1 = nowNanoseconds()
            if let failure = feed.failure { throw failure }
            guard feed.workload.isDone else { throw BenchError("bulk: the engine stopped before the workload ended") }
            // After the final `next()` (nil) the engine only rebuilds its indexes.
            let chronicle = t1 - t0 - feed.excluded
            // Its background work since: the phrase indexes, completed before anything else is timed.
            let phrase = try completePhraseIndexes(store, label: "bulk")
            if !interleaved {
                // The engine's background checkpoint finishes before the baseline starts.
                store.checkpoint()
                progress("bulk: chronicle \(formatCount(Double(ops) / (Double(chronicle) / 1e9))) ops/s; raw sqlite, the same batches…")
                var workload = ConfirmedWorkload(seed: seed, total: ops, libraryID: libraryID, vocabulary: vocabulary)
                var throttle = Throttle()
                try baseline.start()
                while !workload.isDone {
                    let batch = workload.nextBatch(batchSize)
                    try baseline.apply(batch, seal: !workload.isDone)
                    if throttle.ready() {
                        progress("bulk: raw sqlite \(formatCount(Double(workload.produced)))/\(formatCount(Double(ops))) ops, \(formatCount(Double(workload.produced) / (Double(baseline.nanoseconds) / 1e9))) ops/s (before the index rebuild)")
                    }
                }
            }
            progress("bulk: raw sqlite rebuilding its indexes…")
            try baseline.finish()
            progress("bulk: chronicle \(formatCount(Double(ops) / (Double(chronicle) / 1e9))) ops/s, raw sqlite \(formatCount(Double(ops) / (Double(baseline.nanoseconds) / 1e9))) ops/s; computing the digest…")
            let stale = try store.needsSearchIndexRebuild()
            let digest = try store.digest()
            return Result(ops: ops, batches: feed.batches, chronicleNanoseconds: chronicle, baselineNanoseconds: baseline.nanoseconds,
                          chronicleRebuildNanoseconds: t1 - feed.lastHandedOut, baselineRebuildNanoseconds: baseline.rebuildNanoseconds,
                          storeBytes: 0, baselineBytes: 0, digest: digest, staleAfter: stale,
                          phraseIndexSeconds: phrase.seconds, phraseIndexRows: phrase.rows)
        }()
        var final = result
        final.storeBytes = databaseBytes(path)
        final.baselineBytes = databaseBytes(rawPath)
        return final
    }
}
