import ChronicleCore
import ChronicleStore
import Foundation

/// The log's lifecycle (issue 5), each figure beside a baseline from the same run:
///
/// 1. compaction of an N-op device store with `keepOps` 10,000: sealing throughput in MB/s
///    of segment bodies beside the `lz4` command-line tool (`lz4 -1`) compressing the same
///    bodies; store size before and after; LZ4 ratios of the segments and the snapshot;
/// 2. audit of one article, p50 and p99, after compaction beside the same audits before;
/// 3. a new device bootstrapping from the server's snapshot of an N-op library over
///    loopback HTTP beside the same device pulling the whole log
///    (`LifecycleBenchmark+Bootstrap.swift`).
struct LifecycleBenchmark {
    static let keepOps: Int64 = 10_000
    /// Records per block in the block log's sealing floor: a device's push batch.
    static let blockLogOps: Int64 = 500
    static let lz4Tool = "/usr/bin/lz4"
    /// Runs of the `lz4` tool; the fastest counts (the tool's best case).
    static let lz4Runs = 3

    let directory: String
    let ops: Int
    let seed: UInt64
    let vocabulary: Vocabulary
    let quick: Bool
    let keep: Bool

    var auditSamples: Int { quick ? 50 : 200 }
    /// Wall-clock budget for the audits after compaction; fewer samples are taken past it (and said so).
    var auditBudgetSeconds: Double { quick ? 60 : 150 }

    struct Result {
        var compaction: CompactionResult
        var bootstrap: BootstrapResult
    }

    struct CompactionResult {
        var ops: Int
        var buildSeconds: Double
        var report: CompactionReport
        /// From the first progress call to the commit of the last sealed segment.
        var sealSeconds: Double
        /// Milliseconds per sealed segment: the first ten segments' mean and the last ten's.
        var firstSegmentsMilliseconds: Double
        var lastSegmentsMilliseconds: Double
        var snapshotSeconds: Double
        var vacuumSeconds: Double
        var totalSeconds: Double
        /// The store file (its WAL checkpointed: the store closed) before and after.
        var fileBytesBefore: Int64
        var fileBytesAfter: Int64
        /// The device's compaction as it runs by default: the file after it (`CompactionReport`,
        /// the WAL emptied by its VACUUM's checkpoint), and the snapshot it left out.
        var defaultFileBytesAfter: Int64
        var defaultSnapshotLeftOut: Int64?
        /// The WAL right after compact's VACUUM (which `CompactionReport.fileBytesAfter` counts).
        var reportedWALBytesAfterVacuum: Int64
        /// The sealed segments' bodies, decompressed from the store's frames (their concatenation is the lz4 tool's input).
        var segments: Int
        var bodyBytes: Int64
        var lz4ToolSeconds: [Double]
        var lz4ToolOutputBytes: Int64
        /// The same bodies in process: segment encode (from decoded ops) and `LZ4Frame.compress`, each timed alone.
        var encodeSeconds: Double
        var compressSeconds: Double
        var snapshot: SnapshotSizes
        var audits: AuditResult
        /// Raw SQLite sealing the same store, and an ideal row log (`LifecycleBenchmark+Floors.swift`).
        var sealingFloor: Floor
        var idealLogFloor: Floor
        /// A log kept in blocks of `blockLogOps` records, sealed a segment and ten segments to a commit.
        var blockLogFloor: Floor
        var blockLogGroupedFloor: Floor

        var sealMBPerSecond: Double { Double(report.segmentBodyBytes) / 1e6 / sealSeconds }
        var lz4ToolBestSeconds: Double { lz4ToolSeconds.min() ?? .nan }
        var lz4ToolMBPerSecond: Double { Double(bodyBytes) / 1e6 / lz4ToolBestSeconds }
        var sealRatio: Double { sealMBPerSecond / lz4ToolMBPerSecond }
        /// A floor's MB/s of the engine's segment bodies (the same ops).
        func mbPerSecond(_ floor: Floor) -> Double { Double(report.segmentBodyBytes) / 1e6 / floor.seconds }
    }

    struct SnapshotSizes {
        var seq: Int64
        var rows: Int
        var frameBytes: Int64
        var bodyBytes: Int64
        /// `SnapshotCodec.encodeBody` of the decoded snapshot: must equal `bodyBytes`.
        var reencodedBytes: Int64
        var lz4ToolBytes: Int64
    }

    struct AuditResult {
        var candidates: Int
        var medianOps: Int
        var before: Samples
        var after: Samples
        /// Audits whose entries or state differ before and after compaction.
        var mismatches: Int
        var budgetHit: Bool
        var budgetSeconds: Double
    }

    func run() throws -> Result {
        let compaction = try measureCompaction()
        let bootstrap = try measureBootstrap()
        return Result(compaction: compaction, bootstrap: bootstrap)
    }

    func remove(_ paths: String...) {
        guard !keep else { return }
        for path in paths {
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        }
    }

    // MARK: - 1. Compaction of a device store

    func measureCompaction() throws -> CompactionResult {
        let path = directory + "/lifecycle-device.chronicle"
        let libraryID = benchLibraryID(seed: seed)
        progress("lifecycle: building a \(formatCount(Double(ops)))-op device store (applyConfirmedInBulk)…")
        let b0 = nowNanoseconds()
        do {
            let store = try DeviceStore.create(at: path, schema: .readItLater, libraryID: libraryID, deviceID: SplitMix64(seed: seed ^ 0x11FE).uuidValue,
                                               clock: SystemClock(), ids: SeededV7IDGenerator(seed: seed ^ 0x11FF, clock: SystemClock()))
            // Logged, not sealed as it goes: this store is the one compaction seals.
            try store.applyConfirmedInBulk(WorkloadBatches(ConfirmedWorkload(seed: seed, total: ops, libraryID: libraryID, vocabulary: vocabulary)),
                                           sealing: false)
            // Its phrase indexes, filled in the background since, complete before compaction is timed.
            try completePhraseIndexes(store, label: "lifecycle")
        }
        let buildSeconds = Double(nowNanoseconds() - b0) / 1e9
        try settle(path)
        let bytesBefore = databaseBytes(path)
        progress("lifecycle: sealing's floor: raw SQLite sealing a copy of the store…")
        let sealingFloor = try self.sealingFloor(copyOf: path, through: Int64(ops) - Self.keepOps, segmentOps: Int64(CompactionPolicy().segmentOpsMax))
        let compacted = try compact(path)
        try settle(path)   // the WAL held VACUUM's copy of the database
        let bytesAfter = databaseBytes(path)
        let lz4 = try runLZ4(compacted.bodies.file, runs: Self.lz4Runs)
        let snapshot = try snapshotSizes(path)
        progress("lifecycle: sealing's floor: an ideal row log of the same bodies…")
        let idealLogFloor = try self.idealLogFloor(bodiesFile: compacted.bodies.file, ops: compacted.report.opsSealed,
                                                   segmentOps: Int64(CompactionPolicy().segmentOpsMax))
        progress("lifecycle: sealing's floor: a log of the same bodies kept in blocks…")
        let blockLogFloor = try self.blockLogFloor(bodiesFile: compacted.bodies.file, ops: compacted.report.opsSealed,
                                                   segmentOps: Int64(CompactionPolicy().segmentOpsMax), blockOps: Self.blockLogOps,
                                                   segmentsPerCommit: 1)
        let blockLogGroupedFloor = try self.blockLogFloor(bodiesFile: compacted.bodies.file, ops: compacted.report.opsSealed,
                                                          segmentOps: Int64(CompactionPolicy().segmentOpsMax), blockOps: Self.blockLogOps,
                                                          segmentsPerCommit: 10)
        remove(path, compacted.bodies.file)
        let clock = compacted.clock, bodies = compacted.bodies
        return CompactionResult(
            ops: ops, buildSeconds: buildSeconds, report: compacted.report, sealSeconds: Double(clock.lastSeal! - clock.sealStart!) / 1e9,
            firstSegmentsMilliseconds: clock.segmentMilliseconds(last: false), lastSegmentsMilliseconds: clock.segmentMilliseconds(last: true),
            snapshotSeconds: Double(clock.snapshot! - (clock.snapshotStart ?? clock.lastSeal!)) / 1e9, vacuumSeconds: Double(clock.vacuum! - clock.snapshot!) / 1e9,
            totalSeconds: compacted.report.seconds, fileBytesBefore: bytesBefore, fileBytesAfter: bytesAfter,
            defaultFileBytesAfter: compacted.byDefault.fileBytesAfter, defaultSnapshotLeftOut: compacted.byDefault.snapshotLeftOut,
            reportedWALBytesAfterVacuum: clock.walBytesAfterVacuum, segments: bodies.segments, bodyBytes: bodies.bytes,
            lz4ToolSeconds: lz4.seconds, lz4ToolOutputBytes: lz4.outputBytes, encodeSeconds: bodies.encodeSeconds,
            compressSeconds: bodies.compressSeconds, snapshot: snapshot, audits: compacted.audits, sealingFloor: sealingFloor,
            idealLogFloor: idealLogFloor, blockLogFloor: blockLogFloor, blockLogGroupedFloor: blockLogGroupedFloor)
    }

    /// Audits, compacts, audits again and extracts the segment bodies, with the store open only here.
    private func compact(_ path: String) throws -> (report: CompactionReport, byDefault: CompactionReport, clock: CompactionClock, audits: AuditResult,
                                                    bodies: (file: String, segments: Int, bytes: Int64, encodeSeconds: Double, compressSeconds: Double)) {
        let store = try DeviceStore.open(at: path)
        let entities = try auditEntities(path)
        progress("lifecycle: \(entities.ids.count) audits before compaction…")
        var before = Samples(capacity: entities.ids.count)
        var expected: [(Int, [String: Value]?)] = []
        for id in entities.ids {
            let t0 = nowNanoseconds()
            let audit = try store.audit(id)
            before.add(nowNanoseconds() - t0)
            expected.append((audit.entries.count, audit.state))
        }

        progress("lifecycle: compacting (keepOps \(formatCount(Double(Self.keepOps))))…")
        var policy = CompactionPolicy()
        policy.keepOps = Self.keepOps
        let clock = CompactionClock(path: path)
        let byDefault = try store.compact(policy, progress: { done, total in
            clock.progress(done)
            if clock.throttle.ready() { progress("lifecycle: sealed \(formatCount(Double(done)))/\(formatCount(Double(total))) ops") }
        }, afterStep: { _, what in clock.step(what) })
        // A device leaves out a snapshot that would make its store larger; asked to keep one, it
        // writes it (nothing is left to seal) and gives the space back again: the snapshot's figures.
        var report = byDefault
        if byDefault.snapshotLeftOut != nil {
            progress("lifecycle: the snapshot was left out (\(formatFixed(Double(byDefault.snapshotLeftOut!) / 1e6, 1)) MB); writing it as asked…")
            policy.keepsSnapshotThatGrowsFile = true
            clock.snapshotStart = nowNanoseconds()
            let kept = try store.compact(policy, afterStep: { _, what in clock.step(what) })
            report.snapshotSeq = kept.snapshotSeq
            report.snapshotBytes = kept.snapshotBytes
            report.fileBytesAfter = kept.fileBytesAfter
            report.seconds += kept.seconds
        }
        guard let sealStart = clock.sealStart, let sealEnd = clock.lastSeal, clock.snapshot != nil, clock.vacuum != nil else {
            throw BenchError("lifecycle: the compaction did not seal, snapshot and vacuum (plan: \(report.plan))")
        }
        progress("lifecycle: \(report.segmentsWritten) segments, \(formatFixed(Double(report.segmentBodyBytes) / 1e6, 1)) MB of bodies sealed in \(formatFixed(Double(sealEnd - sealStart) / 1e9, 2)) s; \(entities.ids.count) audits after compaction…")

        var after = Samples(capacity: entities.ids.count)
        var mismatches = 0, budgetHit = false
        let a0 = nowNanoseconds()
        for (index, id) in entities.ids.enumerated() {
            if Double(nowNanoseconds() - a0) / 1e9 > auditBudgetSeconds { budgetHit = true; break }
            let t0 = nowNanoseconds()
            let audit = try store.audit(id)
            after.add(nowNanoseconds() - t0)
            if audit.entries.count != expected[index].0 || audit.state != expected[index].1 { mismatches += 1 }
        }
        var beforeSame = Samples(capacity: after.count)
        for value in before.nanoseconds.prefix(after.count) { beforeSame.add(value) }
        let audits = AuditResult(candidates: entities.candidates, medianOps: entities.medianOps, before: beforeSame, after: after,
                                 mismatches: mismatches, budgetHit: budgetHit, budgetSeconds: auditBudgetSeconds)
        let bodies = try segmentBodies(store, file: directory + "/lifecycle-segment-bodies.bin")
        return (report, byDefault, clock, audits, bodies)
    }

    /// Waits until nothing in this process holds `path` open (a released store's background
    /// checkpoint may still be running), then checkpoints what is left of the WAL into the
    /// file, so its size is the store's own.
    func settle(_ path: String) throws {
        func openCount() -> Int {
            ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? [])
                .compactMap { try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + $0) }
                .filter { $0.hasPrefix(path) }.count
        }
        let t0 = nowNanoseconds()
        while openCount() > 0, nowNanoseconds() - t0 < 60_000_000_000 { usleep(20_000) }
        if fileBytes(path + "-wal") > 0 { try RawDatabase(path: path).exec("PRAGMA wal_checkpoint(TRUNCATE)") }
    }

    /// Articles with at least five ops, `auditSamples` of them picked by the seed. The ops are
    /// counted from the workload, generated again (the store keeps its log in blocks).
    func auditEntities(_ path: String) throws -> (ids: [UUID], candidates: Int, medianOps: Int) {
        var opsPerArticle: [UUID: Int] = [:]
        var workload = ConfirmedWorkload(seed: seed, total: ops, libraryID: benchLibraryID(seed: seed), vocabulary: vocabulary)
        while !workload.isDone {
            for op in workload.nextBatch(10_000) where op.type.hasPrefix("article.") { opsPerArticle[op.entityID, default: 0] += 1 }
        }
        let rows: [[String?]] = opsPerArticle.filter { $0.value >= 5 }.map { [$0.key.lowercased, String($0.value)] }
            .sorted { $0[0]! < $1[0]! }
        var rng = SplitMix64(seed: seed ^ 0xA0D1)
        var pool = rows
        var picked: [[String?]] = []
        while picked.count < auditSamples, !pool.isEmpty { picked.append(pool.remove(at: rng.below(pool.count))) }
        let counts = picked.compactMap { $0[1].flatMap(Int.init) }.sorted()
        let ids = try picked.map { row -> UUID in
            guard let text = row[0], let id = UUID(uuidString: text) else { throw BenchError("lifecycle: a log row has a bad entity id") }
            return id
        }
        return (ids, rows.count, counts.isEmpty ? 0 : counts[counts.count / 2])
    }
}

/// When each step of one `compact` call ended (the hooks run on the calling thread).
final class CompactionClock {
    let path: String
    var walBytesAfterVacuum: Int64 = 0
    var sealStart: UInt64?
    var lastSeal: UInt64?
    /// When each sealed segment's transaction committed.
    var seals: [UInt64] = []
    var snapshot: UInt64?
    /// When a second compaction, asked to keep the snapshot the first left out, began.
    var snapshotStart: UInt64?
    var vacuum: UInt64?
    var throttle = Throttle()

    init(path: String) { self.path = path }

    /// Mean milliseconds per segment over the first (or last) ten sealed.
    func segmentMilliseconds(last: Bool) -> Double {
        guard let start = sealStart, !seals.isEmpty else { return .nan }
        let ends = seals, starts = [start] + seals.dropLast()
        let durations = zip(starts, ends).map { Double($1 - $0) / 1e6 }
        let part = last ? Array(durations.suffix(10)) : Array(durations.prefix(10))
        return part.reduce(0, +) / Double(part.count)
    }

    func progress(_ done: Int64) {
        if sealStart == nil { sealStart = nowNanoseconds() }
    }

    func step(_ what: String) {
        let now = nowNanoseconds()
        if what.hasPrefix("sealed") {
            lastSeal = now
            seals.append(now)
        } else if what.hasPrefix("wrote the snapshot") {
            snapshot = now
        } else if what.hasPrefix("gave the space back") {
            vacuum = now
            walBytesAfterVacuum = fileBytes(path + "-wal")
        }
    }
}

/// A workload as the batches `applyConfirmedInBulk` folds (10,000 ops each).
struct WorkloadBatches: Sequence, IteratorProtocol {
    var workload: ConfirmedWorkload
    init(_ workload: ConfirmedWorkload) { self.workload = workload }
    mutating func next() -> [Op]? { workload.isDone ? nil : workload.nextBatch(10_000) }
}

extension SplitMix64 {
    /// One UUID drawn from a fresh generator (`SplitMix64(seed:).uuidValue`).
    var uuidValue: UUID { var copy = self; return copy.uuid() }
}
