import CSQLite
import ChronicleCore
import ChronicleStore
import Foundation

/// Measurement 3: `DeviceStore.rebuild()` over the N-op log left by the apply
/// measurement, and raw SQLite replaying the same statements. Each runs in a
/// fresh child process (this binary, re-executed with a hidden subcommand) so
/// its peak resident memory (`VmHWM`) is its own, not this process's.
struct RebuildBenchmark {
    struct Side {
        var ops: Int64
        /// The timed work: for Chronicle the whole `rebuild()` call (which ends
        /// with a projection digest), for the baseline the SQL work only.
        var seconds: Double
        /// Chronicle only: the rebuild transaction alone, as `RebuildReport.seconds` says.
        var transactionSeconds: Double?
        var peakKilobytes: Int
        var startKilobytes: Int
        var digest: String?

        var opsPerSecond: Double { Double(ops) / seconds }
    }

    struct Result {
        var chronicle: Side
        var baseline: Side
        var digestMatchesIncremental: Bool?
    }

    let storePath: String
    let baselinePath: String
    let ops: Int
    let seed: UInt64
    let incrementalDigest: String?

    func run() throws -> Result {
        progress("rebuild: chronicle (child process)…")
        let chronicle = try Self.side(try runBenchChild(["_rebuild", storePath]))
        progress("rebuild: chronicle \(formatCount(chronicle.opsPerSecond)) ops/s, peak \(chronicle.peakKilobytes / 1024) MB; raw sqlite (child process)…")
        let baseline = try Self.side(try runBenchChild(["_rebuild-raw", baselinePath, String(ops), String(seed)]))
        progress("rebuild: raw sqlite \(formatCount(baseline.opsPerSecond)) ops/s, peak \(baseline.peakKilobytes / 1024) MB")
        return Result(chronicle: chronicle, baseline: baseline,
                      digestMatchesIncremental: incrementalDigest.map { $0 == chronicle.digest })
    }

    private static func side(_ object: [String: Any]) throws -> Side {
        guard let ops = (object["ops"] as? NSNumber)?.int64Value, let seconds = (object["seconds"] as? NSNumber)?.doubleValue,
              let peak = (object["vmhwm_kb"] as? NSNumber)?.intValue, let start = (object["start_vmhwm_kb"] as? NSNumber)?.intValue else {
            throw BenchError("the rebuild child printed an unexpected result: \(object)")
        }
        return Side(ops: ops, seconds: seconds, transactionSeconds: (object["transaction_seconds"] as? NSNumber)?.doubleValue,
                    peakKilobytes: peak, startKilobytes: start, digest: object["digest"] as? String)
    }


    // MARK: - Child processes

    /// `chronicle-bench _rebuild STORE`: opens the store and rebuilds it.
    static func chronicleChild(path: String) throws -> String {
        let store = try DeviceStore.open(at: path)
        let start = procStatusKilobytes("VmHWM") ?? 0
        var throttle = Throttle()
        let t0 = nowNanoseconds()
        let report = try store.rebuild { done, total in
            if throttle.ready() { progress("rebuild (chronicle): \(formatCount(Double(done)))/\(formatCount(Double(total))) ops") }
        }
        let seconds = Double(nowNanoseconds() - t0) / 1e9
        let peak = procStatusKilobytes("VmHWM") ?? 0
        return JSON.object([
            ("ops", .int(report.confirmedReplayed)), ("seconds", .number(seconds)),
            ("transaction_seconds", .number(report.seconds)), ("vmhwm_kb", .int(Int64(peak))),
            ("start_vmhwm_kb", .int(Int64(start))), ("digest", .string(report.digest)),
        ]).rendered
    }

    /// `chronicle-bench _rebuild-raw DB OPS SEED`: what `rebuild()` does, as raw
    /// SQLite. The log's blocks are streamed with one prepared SELECT as the engine
    /// streams them; the statements their ops turn into are regenerated from the
    /// seeded workload outside the timer (decoding blocks and building SQL is
    /// the engine's own work, which is what the ratio should expose).
    static func rawChild(path: String, ops: Int, seed: UInt64) throws -> String {
        let schema = Schema.readItLater
        let projection = ProjectionSchema(schema: schema)
        let materializer = Materializer(schema: schema)
        let vocabulary = Vocabulary(size: Bench.vocabularySize, seed: seed)
        let db = try RawDatabase(path: path)
        let start = procStatusKilobytes("VmHWM") ?? 0
        var timed: UInt64 = 0
        var t = nowNanoseconds()
        try db.exec("BEGIN IMMEDIATE")
        // As `rebuild()`: the larger page cache for the transaction's duration, then every
        // projection object (FTS tables, their content views, tables) dropped.
        try db.exec("PRAGMA cache_size = -\(Bench.bulkCacheKilobytes)")
        for (kind, name) in projection.droppableObjects { try db.exec("DROP \(kind) IF EXISTS \(ProjectionSchema.quoted(name))") }
        try db.exec("DELETE FROM chronicle_shadowed")
        db.clearCache()
        // As `rebuild()`: secondary indexes are created after the replay.
        let tableStatements = projection.tableStatements
        for statement in tableStatements where !statement.hasPrefix("CREATE INDEX") { try db.exec(statement) }
        // The log's blocks (store format v9), each a run of ops encoded as a segment body.
        let total = Int(try db.scalarInt("SELECT coalesce(sum(last_seq - first_seq + 1), 0) FROM chronicle_log_blocks") ?? 0)
        guard total == ops else { throw BenchError("the baseline log holds \(total) ops, expected \(ops)") }
        let select = try db.prepare("SELECT last_seq, body FROM chronicle_log_blocks ORDER BY first_seq")
        try db.bind(select, [])
        timed += nowNanoseconds() - t

        var workload = ConfirmedWorkload(seed: seed, total: ops, libraryID: benchLibraryID(seed: seed), vocabulary: vocabulary)
        var touched = 0
        var readThrough: Int64 = 0
        var throttle = Throttle()
        while !workload.isDone {
            let batch = workload.nextBatch(10_000)
            var steps: [PreparedStep] = []
            steps.reserveCapacity(batch.count * 2)
            for op in batch { steps += try db.prepared(materializer.steps(for: op)) }
            t = nowNanoseconds()
            // The blocks that hold the batch, read whole (their bytes touched).
            while readThrough < batch.last!.serverSeq! {
                guard sqlite3_step(select) == SQLITE_ROW else { throw BenchError("the baseline log ended early") }
                readThrough = sqlite3_column_int64(select, 0)
                if let bytes = sqlite3_column_blob(select, 1) {
                    let count = Int(sqlite3_column_bytes(select, 1))
                    touched &+= Int(bytes.load(fromByteOffset: count - 1, as: UInt8.self))
                }
            }
            try db.execute(steps)
            timed += nowNanoseconds() - t
            if throttle.ready() { progress("rebuild (raw sqlite): \(formatCount(Double(workload.produced)))/\(formatCount(Double(ops))) ops") }
        }
        t = nowNanoseconds()
        sqlite3_reset(select)
        for statement in tableStatements where statement.hasPrefix("CREATE INDEX") { try db.exec(statement) }
        for statement in projection.searchStatements { try db.exec(statement) }
        try Self.rebuildSearchIndexes(db, projection)
        try db.exec("PRAGMA cache_size = -\(Database.Options.defaultCacheKilobytes)")
        try db.exec("COMMIT")
        timed += nowNanoseconds() - t
        let peak = procStatusKilobytes("VmHWM") ?? 0
        return JSON.object([
            ("ops", .int(Int64(ops))), ("seconds", .number(Double(timed) / 1e9)), ("vmhwm_kb", .int(Int64(peak))),
            ("start_vmhwm_kb", .int(Int64(start))), ("checksum", .int(Int64(touched))),
        ]).rendered
    }

    /// What `DeviceStore.rebuildSearchIndexes` runs (Sources/ChronicleStore/Device/DeviceStore+Rebuild.swift,
    /// internal): every index refilled from its content view (`DeviceStore.searchIndexRebuildSQL`), then the stale mark
    /// cleared, then each phrase index emptied and left to its filler (`DeviceStore.resetPhraseIndexes`, for a library
    /// past `phraseIndexFillsInline`: its measure of the content read, the watermark set to 0). Keep in step.
    static func rebuildSearchIndexes(_ db: RawDatabase, _ projection: ProjectionSchema) throws {
        let premium = try db.scalarInt("SELECT \(projection.premiumCondition)") == 1
        for (_, index) in projection.searchIndexes {
            for sql in DeviceStore.searchIndexRebuildSQL(index.index, gatedOff: index.requiresPremium && !premium) { try db.exec(sql) }
        }
        try db.exec("DELETE FROM chronicle_meta WHERE key = 'search_stale'")
        for (_, index) in projection.searchIndexes {
            guard let table = SearchPairs.phraseIndexTable(of: index) else { continue }
            let pairs = ProjectionSchema.quoted(table)
            let view = ProjectionSchema.quoted(ProjectionSchema.contentViewName(of: index))
            let bytes = index.fields.map { "coalesce(length(CAST(\(ProjectionSchema.quoted($0)) AS BLOB)), 0)" }.joined(separator: " + ")
            try db.exec("INSERT INTO \(pairs)(\(pairs)) VALUES ('delete-all')")
            _ = try db.scalarInt("SELECT count(*) + coalesce(sum(bytes), 0) FROM (SELECT \(bytes) AS bytes FROM \(view) LIMIT 257)")
            try db.exec("INSERT OR REPLACE INTO chronicle_meta(key, value) VALUES ('\(SearchPairs.phraseIndexWatermarkKey(of: index))', 0)")
        }
    }
}
