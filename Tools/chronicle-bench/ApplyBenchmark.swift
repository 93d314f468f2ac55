import ChronicleCore
import ChronicleTesting
import ChronicleStore
import Foundation

/// The library every generated confirmed op belongs to; derived from the seed
/// so the rebuild baseline (a child process) regenerates the same ops.
func benchLibraryID(seed: UInt64) -> UUID {
    var rng = SplitMix64(seed: seed ^ 0x11B0_0000)
    return rng.uuid()
}

/// Measurement 2: bulk apply of N confirmed ops through `DeviceStore.applyConfirmed`,
/// beside raw SQLite doing the log insert and the materializer's steps in the
/// same batch transactions on a database with the same DDL.
struct ApplyBenchmark {
    struct Result {
        var ops: Int
        var batches: Int
        var chronicleNanoseconds: UInt64
        var baselineNanoseconds: UInt64
        var batchSamples: Samples
        var typeCounts: [String: Int]
        var serverOps: Int
        var storePath: String
        var baselinePath: String
        var storeBytes: Int64
        var baselineBytes: Int64
        var digest: String

        var chronicleOpsPerSecond: Double { Double(ops) / (Double(chronicleNanoseconds) / 1e9) }
        var baselineOpsPerSecond: Double { Double(ops) / (Double(baselineNanoseconds) / 1e9) }
    }

    let directory: String
    let ops: Int
    let batchSize: Int
    let seed: UInt64
    let vocabulary: Vocabulary

    /// Per-op-type baseline timings, when `CHRONICLE_BENCH_BY_TYPE` is set.
    final class ByType {
        var nanoseconds: [String: (count: Int, total: UInt64)] = [:]
        func add(_ type: String, _ ns: UInt64) {
            let old = nanoseconds[type] ?? (0, 0)
            nanoseconds[type] = (old.count + 1, old.total + ns)
        }
        func report() {
            let all = nanoseconds.values.reduce(0) { $0 + $1.total }
            for (type, entry) in nanoseconds.sorted(by: { $0.value.total > $1.value.total }) {
                progress("  \(type): \(entry.count) ops, \(formatFixed(Double(entry.total) / Double(entry.count) / 1000, 1)) µs/op, \(formatFixed(100 * Double(entry.total) / Double(all), 1))% of baseline time")
            }
        }
    }
    var byTypeEnabled: Bool { ProcessInfo.processInfo.environment["CHRONICLE_BENCH_BY_TYPE"] != nil }

    func run() throws -> Result {
        let schema = Schema.readItLater
        let path = directory + "/apply.chronicle"
        let rawPath = directory + "/apply-raw.sqlite"
        let libraryID = benchLibraryID(seed: seed)
        var deviceRNG = SplitMix64(seed: seed ^ 0xDE71CE)
        let result: Result = try {
            let clock = ManualClock()
            let store = try DeviceStore.create(at: path, schema: schema, libraryID: libraryID, deviceID: deviceRNG.uuid(),
                                               clock: clock, ids: SeededV7IDGenerator(seed: seed, clock: clock))
            let raw = try StoreDDL.read(fromStoreAt: path, schema: schema).createBaseline(at: rawPath)
            let materializer = Materializer(schema: schema)
            let blockInsert = try raw.prepare(LogBlockRow.insertSQL)
            let idInsert = try raw.prepare(LogBlockRow.idInsertSQL)
            let setCursor = try raw.prepare("INSERT INTO chronicle_meta(key, value) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET value = excluded.value")
            let begin = try raw.prepare("BEGIN IMMEDIATE")
            let commit = try raw.prepare("COMMIT")
            let indexer = try RawSearchIndexer(db: raw, projection: ProjectionSchema(schema: schema))

            let byType: ByType? = byTypeEnabled ? ByType() : nil
            var chronicle: UInt64 = 0, baseline: UInt64 = 0, batches = 0
            var batchSamples = Samples()
            var throttle = Throttle()
            // Each side runs alone over the same batches (generated again from the seed), the
            // engine first: run batch by batch in turn, the engine's background WAL checkpoint
            // ran during the baseline's timed batch, slowing it and sparing the engine.
            var workload = ConfirmedWorkload(seed: seed, total: ops, libraryID: libraryID, vocabulary: vocabulary)
            while !workload.isDone {
                let batch = workload.nextBatch(batchSize)
                let t0 = nowNanoseconds()
                try store.applyConfirmed(batch)
                let t1 = nowNanoseconds()
                chronicle += t1 - t0
                batchSamples.add(t1 - t0)
                batches += 1
                if throttle.ready() || workload.isDone {
                    progress("apply: \(formatCount(Double(workload.produced)))/\(formatCount(Double(ops))) ops; chronicle \(formatCount(Double(workload.produced) / (Double(chronicle) / 1e9))) ops/s")
                }
            }
            store.checkpoint()
            var rawWorkload = ConfirmedWorkload(seed: seed, total: ops, libraryID: libraryID, vocabulary: vocabulary)
            while !rawWorkload.isDone {
                let batch = rawWorkload.nextBatch(batchSize)
                // The same work as hand-written SQLite, in the engine's order: the ops' ids and
                // their block of the log (store format v9: the batch encoded as a segment body, with
                // its entity filter), the cursor, each op's materializer steps (noting the FTS5
                // entries they change), then the FTS5 entries in rowid order; one transaction.
                let logged = try LogBlockRow(batch)
                let work = try batch.map { op in (steps: try raw.prepared(materializer.steps(for: op)), watch: indexer.watch(op, schema: schema)) }
                let cursor = batch.last!.serverSeq!
                let t2 = nowNanoseconds()
                try raw.run(begin, [])
                try logged.insertIDs(idInsert, in: raw)
                try logged.insertBlock(blockInsert, in: raw)
                try raw.run(setCursor, [.text("cursor"), .integer(cursor)])
                if let byType {
                    // Diagnostic (CHRONICLE_BENCH_BY_TYPE=1): baseline projection time per op type.
                    for (op, item) in zip(batch, work) {
                        let s0 = nowNanoseconds()
                        try indexer.apply(item.steps, watching: item.watch)
                        byType.add(op.type, nowNanoseconds() - s0)
                    }
                } else {
                    for item in work { try indexer.apply(item.steps, watching: item.watch) }
                }
                try indexer.flush()
                try raw.run(commit, [])
                baseline += nowNanoseconds() - t2
                if throttle.ready() || rawWorkload.isDone {
                    progress("apply: raw sqlite \(formatCount(Double(rawWorkload.produced)))/\(formatCount(Double(ops))) ops, \(formatCount(Double(rawWorkload.produced) / (Double(baseline) / 1e9))) ops/s")
                }
            }
            byType?.report()
            // The baseline must have done the same indexing work: every FTS5 index holds as many
            // entries on both sides (a baseline that skipped entries once looked faster, then broke).
            for (_, index) in ProjectionSchema(schema: schema).searchIndexes {
                let sql = "SELECT count(*) FROM \(ProjectionSchema.quoted(index.index + "_docsize"))"
                let engine = try store.read { db in try db.scalarInt(sql) } ?? 0
                let baseline = try raw.scalarInt(sql) ?? 0
                guard engine == baseline else {
                    throw BenchError("apply: \(index.index) holds \(engine) entries in the engine's store but \(baseline) in the baseline's; the baseline no longer does the engine's work")
                }
            }
            progress("apply: computing the projection digest (for the rebuild check)…")
            let digest = try store.digest()
            return Result(ops: ops, batches: batches, chronicleNanoseconds: chronicle, baselineNanoseconds: baseline,
                          batchSamples: batchSamples, typeCounts: workload.typeCounts, serverOps: workload.serverOps,
                          storePath: path, baselinePath: rawPath, storeBytes: 0, baselineBytes: 0, digest: digest)
        }()
        // Both connections are closed here, so the sizes include checkpointed WAL content.
        var final = result
        final.storeBytes = databaseBytes(path)
        final.baselineBytes = databaseBytes(rawPath)
        return final
    }
}
