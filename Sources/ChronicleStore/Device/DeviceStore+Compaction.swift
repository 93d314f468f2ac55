import ChronicleCore
import Foundation

/// What to keep hot in the log, and what to seal.
public struct CompactionPolicy: Sendable, Equatable {
    /// Keep at least the newest N confirmed ops in the log (nil: no such limit).
    public var keepOps: Int64? = 10_000
    /// Keep ops confirmed less than this long ago, by server time (nil: no such limit).
    public var keepMilliseconds: Int64? = nil
    /// Ops per sealed segment.
    public var segmentOpsMax = 10_000
    /// Drop sealed history older than this (by server time) where a snapshot covers it.
    /// Off by default: the audit trail is kept whole unless an operator chooses otherwise.
    public var horizonMilliseconds: Int64? = nil
    /// Rewrite the file afterwards (`VACUUM`) so the freed pages go back to the file system.
    /// A running server leaves this off: VACUUM holds the library's writer for as long as it
    /// copies the file, and the pages the sealed rows freed are reused by the next pushes.
    public var givesSpaceBack = true
    /// Seal only whole segments of `segmentOpsMax` ops: the ops short of one more stay hot until
    /// it is full. A running server compacts this way, so its segments all come out the same size.
    public var wholeSegmentsOnly = false
    /// Write a new snapshot only once this many ops lie between the newest one and the seal
    /// point (nil: at every seal point). A snapshot costs about as much as the library's whole
    /// state, however few ops were sealed, so a running server that seals a segment at a time
    /// snapshots less often; a new device then pulls the ops after the snapshot it starts from.
    public var snapshotEveryOps: Int64? = nil
    /// A device sealing at least this many ops at once sets its log's entity index aside
    /// (`DeviceStore.setAsideForSealing`); tests lower it.
    var entityIndexAsideOpsMin: Int64 = 40_000

    public init() {}
}

/// What a compaction will do (what `--dry-run` prints).
public struct CompactionPlan: Sendable, Equatable {
    /// Ops up to this seq get sealed (equal to `alreadySealedThrough` when there is nothing to seal).
    public var sealThrough: Int64
    public var alreadySealedThrough: Int64
    public var opsToSeal: Int64
    public var segmentsToWrite: Int
    /// The seq the new snapshot will hold the state at (this or later: see `snapshotAtHead`);
    /// nil when no new snapshot is due.
    public var snapshotAt: Int64?
    /// Sealed history up to this seq will be dropped (horizon policy); nil when none.
    public var dropThrough: Int64?
    /// A snapshot is written at `dropThrough` first, where none of the current schema version is
    /// and the new one is later: history then begins at a known state.
    public var snapshotAtDrop: Int64?
    public var hotOpsAfter: Int64
    /// The new snapshot is read from the projection tables as they are, at the head (seq
    /// `sealThrough + hotOpsAfter` when planned, or later): where they hold the confirmed state
    /// only (the server's; a device's with no op pending, unless history is to begin at
    /// `snapshotAt`). Otherwise it is replayed to `snapshotAt` exactly in a scratch database.
    /// Decided again when the snapshot is written.
    public var snapshotAtHead = false

    public var isEmpty: Bool { opsToSeal == 0 && snapshotAt == nil && dropThrough == nil }
}

/// What a compaction did.
public struct CompactionReport: Sendable {
    public var plan: CompactionPlan
    public var segmentsWritten = 0
    public var opsSealed: Int64 = 0
    /// Bytes the sealed ops took in the log: a device's, its blocks' bodies (store format v9; the
    /// segment bodies, so about the body / frame ratio); the server's, its rows' text.
    public var logBytesSealed: Int64 = 0
    /// Bytes of the segments' bodies before and after LZ4.
    public var segmentBodyBytes: Int64 = 0
    public var segmentFrameBytes: Int64 = 0
    /// The seq of the snapshot written at the end (nil: none). At least `plan.snapshotAt`: the
    /// server's snapshot holds its state at the head as the snapshot was read, which may be later.
    public var snapshotSeq: Int64?
    public var snapshotBytes: Int64 = 0
    public var historyDroppedThrough: Int64?
    public var fileBytesBefore: Int64 = 0
    public var fileBytesAfter: Int64 = 0
    public var seconds: Double = 0

    /// Sealed log bytes per compressed segment byte.
    public var compressionRatio: Double { segmentFrameBytes > 0 ? Double(logBytesSealed) / Double(segmentFrameBytes) : 0 }
}

/// What sealing one segment did.
struct SealedChunk { var ops: Int64; var log: Int64; var body: Int64; var frame: Int64 }

/// `sealAhead` stops: another compaction on the file sealed first.
struct SealPrefixMoved: Error {}

/// A segment read from the log and encoded, for the writer to store (`LogLifecycle.storeSeal`).
struct PreparedSeal: Sendable {
    var segment: EncodedSegment
    var ops: [Op]
    /// Bytes its ops took in the log (`CompactionReport.logBytesSealed`).
    var logBytes: Int64
    /// The digest of the segment it follows, and its own, chained to that one.
    var previousDigest: String
    var digest: String
}

/// A store with a confirmed log that can be sealed, snapshotted and compacted: a
/// device store, or the server's store of one library.
protocol LogLifecycle: Sendable {
    var path: String { get }
    var libraryID: UUID { get }
    var materializer: Materializer { get }
    var projection: ProjectionSchema { get }
    var clock: any ChronicleClock { get }
    /// True when the projection holds exactly the confirmed state at the head (the server's;
    /// a device's shows its pending ops on top): a snapshot is then read from it as it is,
    /// at the head, rather than replayed into a scratch database up to the seal point.
    var projectsConfirmedStateOnly: Bool { get }
    /// `projectsConfirmedStateOnly`, or true as `db` sees the store now (a device with no op pending).
    func confirmedStateOnly(in db: Database) throws -> Bool
    /// What "now" is on the server's clock, for decisions that compare it with server times
    /// (the horizon, `keepMilliseconds`): the server's own clock (`now`), or on a device the
    /// newest server time it holds, since its own clock may be years off the server's.
    func serverNow(_ now: Int64, in db: Database) throws -> Int64
    func read<T>(_ body: (Database) throws -> T) throws -> T
    func writeTransaction<T>(_ body: (Database) throws -> T) throws -> T
    /// Runs `VACUUM` on the writer connection.
    func vacuum() throws
    /// Keeps the ids of `ops`, which are leaving the log for a segment, so that each still
    /// applies at most once (`duplicateOp` for one already kept). Inside the caller's transaction.
    func rememberSealed(_ ops: ArraySlice<Op>, in db: Database) throws
    /// The newest seq in the hot log (nil when it holds none).
    func hotLogEnd(in db: Database) throws -> Int64?
    /// The first hot op after `sealed` whose server time is `time` or later.
    func firstHotSeq(after sealed: Int64, timeAtLeast time: Int64, in db: Database) throws -> Int64?
    /// The last hot op in `(sealed, through]` whose server time is before `time`.
    func lastHotSeq(after sealed: Int64, through: Int64, timeBefore time: Int64, in db: Database) throws -> Int64?
    /// Reads the run of up to `segmentOpsMax` ops after `sealed` (not past `through`, nor across
    /// `boundary`) from the hot log and encodes it as the segment that follows the one digested
    /// `previousDigest`. Reads only. Nil when `sealed` reaches `through`.
    func prepareSeal(after sealed: Int64, previousDigest: String, through: Int64, endingAt boundary: Int64?,
                     policy: CompactionPolicy, in db: Database) throws -> PreparedSeal?
    /// Takes the ops of `segment`, just stored, out of the hot log (inside the caller's transaction).
    func releaseSealed(_ segment: EncodedSegment, in db: Database) throws
    /// Runs a compaction's seals (`sealTransaction` each).
    func sealing<T>(_ body: () throws -> T) throws -> T
    /// One seal's transaction.
    func sealTransaction<T>(_ body: (Database) throws -> T) throws -> T
}

extension LogLifecycle {
    static func sealedDuplicate(_ op: Op) -> ChronicleError {
        ChronicleError(.duplicateOp, "Op \(op.opID.lowercased) is already in the confirmed log (sealed); an op id is applied at most once.")
    }
}

extension DeviceStore: LogLifecycle {
    var projectsConfirmedStateOnly: Bool { false }

    /// The newest server time this store holds: never later than the server's clock, whatever
    /// this device's clock says (`Schemas/store/device-v9.md`, "Times in the projection").
    func serverNow(_ now: Int64, in db: Database) throws -> Int64 {
        try Self.newestServerTime(in: db) ?? 0
    }

    /// The server time of the newest confirmed op held (in the log's blocks, else in the last
    /// sealed segment); nil when the store holds none.
    static func newestServerTime(in db: Database) throws -> Int64? {
        if let newest = try db.scalarInt("SELECT max(newest_time) FROM chronicle_log_blocks") { return newest }
        return try db.query("SELECT body FROM chronicle_segments ORDER BY first_seq DESC LIMIT 1") { row in
            try row.withBytes(0) { try SegmentCodec.decode(Array($0)).ops.last?.serverTime }
        }.first ?? nil
    }

    /// With nothing in the outbox, the projection is the confirmed state at the cursor.
    func confirmedStateOnly(in db: Database) throws -> Bool {
        try db.scalarInt("SELECT EXISTS (SELECT 1 FROM chronicle_outbox)") == 0
    }

    func vacuum() throws {
        try writer.withLock { db in
            try db.execute("VACUUM")
            checkpointer.truncate(writer: db)
        }
    }

    /// A device keeps every confirmed op's id when the op is confirmed (`chronicle_op_ids`), so
    /// sealing has none to add.
    func rememberSealed(_ ops: ArraySlice<Op>, in db: Database) throws {}

    func hotLogEnd(in db: Database) throws -> Int64? { try LogTables.blocksEnd(in: db) }

    func firstHotSeq(after sealed: Int64, timeAtLeast time: Int64, in db: Database) throws -> Int64? {
        try Self.firstHotSeq(after: sealed, timeAtLeast: time, libraryID: libraryID, in: db)
    }

    func lastHotSeq(after sealed: Int64, through: Int64, timeBefore time: Int64, in db: Database) throws -> Int64? {
        try Self.lastHotSeq(after: sealed, through: through, timeBefore: time, libraryID: libraryID, in: db)
    }

    /// A block that starts right after `sealed` and fits the segment is sealed whole: its body is
    /// compressed as it is (no op decoded) and its filter copied. Otherwise the ops up to the
    /// segment's end are decoded from the blocks and encoded again as one segment; that run stops
    /// before a block that could be sealed whole, so that sealing keeps to the blocks' boundaries.
    func prepareSeal(after sealed: Int64, previousDigest: String, through: Int64, endingAt boundary: Int64?,
                     policy: CompactionPolicy, in db: Database) throws -> PreparedSeal? {
        guard sealed < through else { return nil }
        let opsMax = Int64(max(1, policy.segmentOpsMax))
        var last = min(through, sealed + opsMax)
        if let boundary, sealed < boundary, boundary < last { last = boundary }
        let blocks = try db.query("""
            SELECT first_seq, last_seq FROM chronicle_log_blocks WHERE last_seq > ?1 AND first_seq <= ?2 ORDER BY first_seq
            """, [.integer(sealed), .integer(last)]) { (first: $0.int(0), last: $0.int(1)) }
        precondition(blocks.first.map { $0.first <= sealed + 1 } ?? false, "the log is not gap-free after the sealed prefix")
        let wholeMin = min(Self.sealWholeBlockOpsMin, opsMax)
        if let head = blocks.first, head.first == sealed + 1, head.last <= last, head.last - head.first + 1 >= wholeMin || head.last == last,
           let (filter, body) = try db.query("SELECT filter, body FROM chronicle_log_blocks WHERE first_seq = ?1", [.integer(head.first)], { row in
               (row.withBytes(0) { Array($0) }, row.withBytes(1) { Array($0) })
           }).first {
            let segment = EncodedSegment(firstSeq: head.first, lastSeq: head.last, body: body, frame: LZ4Frame.compress(body), filter: filter)
            return PreparedSeal(segment: segment, ops: [], logBytes: Int64(body.count), previousDigest: previousDigest,
                                digest: LogTables.chainDigest(previous: previousDigest, body: body))
        }
        // Stop before the next block that could be sealed whole.
        for block in blocks.dropFirst() where block.last - block.first + 1 >= wholeMin && block.last - block.first + 1 <= opsMax {
            last = min(last, block.first - 1)
            break
        }
        var ops: [Op] = []
        try LogTables.forEachHotOp(in: db, libraryID: libraryID, after: sealed, upTo: last, entity: nil) { ops.append($0) }
        precondition(ops.count == Int(last - sealed) && ops.first?.serverSeq == sealed + 1,
                     "the log is not gap-free after the sealed prefix")
        // One segment, unless its ops are so large that the body must be split (the first part is sealed now).
        let segment = try LogTables.encodeSegments(ops[...], libraryID: libraryID, opsMax: ops.count)[0]
        return PreparedSeal(segment: segment, ops: [], logBytes: Int64(segment.body.count),
                            previousDigest: previousDigest, digest: LogTables.chainDigest(previous: previousDigest, body: segment.body))
    }

    /// A device's seals only move confirmed ops from its blocks into segments, so their commits
    /// neither wait for the disk (a power loss may roll the last ones back, to blocks not sealed
    /// yet, which the next compaction seals; the snapshot's commit after them waits for it) nor
    /// copy the WAL into the database meanwhile (once after the last, and VACUUM rewrites the
    /// file anyway). Together they were a quarter of sealing's time (990,000 ops: 0.46 s, now 0.34).
    func sealing<T>(_ body: () throws -> T) throws -> T {
        try checkpointer.holdingCheckpoints(body)
    }

    func sealTransaction<T>(_ body: (Database) throws -> T) throws -> T {
        try writeTransaction(spillToFiles: false, relaxedSync: true, body)
    }

    /// Blocks whose every op is now sealed leave; one the segment ended inside stays (its sealed
    /// ops are skipped) until sealing passes its end.
    func releaseSealed(_ segment: EncodedSegment, in db: Database) throws {
        try db.execute("DELETE FROM chronicle_log_blocks WHERE first_seq <= ?1 AND last_seq <= ?1", [.integer(segment.lastSeq)])
    }

    /// Works out what `compact(policy)` would do now, without changing anything.
    public func compactionPlan(_ policy: CompactionPolicy) throws -> CompactionPlan {
        let now = clock.nowMilliseconds()
        return try read { db in try plan(policy, now: now, in: db) }
    }

    /// Seals the confirmed log's prefix into LZ4 segments, writes a snapshot of the state
    /// at the seal point (at the head, read from the tables, when no op is pending:
    /// `CompactionPlan.snapshotAtHead`), drops history past the horizon if the policy asks,
    /// and gives the space back to the file system.
    ///
    /// Every step is its own transaction and leaves a complete store: killed at any
    /// point, the store opens with the same state digest and nothing lost. `afterStep`
    /// runs after each committed step (a progress hook; fault tests stop the process there).
    @discardableResult
    public func compact(_ policy: CompactionPolicy, progress: ProgressHandler? = nil,
                        afterStep: ((Int, String) throws -> Void)? = nil) throws -> CompactionReport {
        try runCompaction(policy, progress: progress, afterStep: afterStep)
    }

}

extension LogLifecycle {
    /// The newest confirmed seq: the hot log's, or the sealed end when the log is empty.
    func confirmedHead(sealed: Int64, in db: Database) throws -> Int64 {
        max(sealed, try hotLogEnd(in: db) ?? 0)
    }

    func plan(_ policy: CompactionPolicy, now clockNow: Int64, in db: Database) throws -> CompactionPlan {
        // Every time compared below is a server time.
        let now = try serverNow(clockNow, in: db)
        let sealed = try LogTables.sealedUpTo(in: db)
        let cursor = try confirmedHead(sealed: sealed, in: db)
        var through = cursor
        if let keep = policy.keepOps { through = min(through, cursor - keep) }
        if let keep = policy.keepMilliseconds {
            if let recent = try firstHotSeq(after: sealed, timeAtLeast: now - keep, in: db) { through = min(through, recent - 1) }
        }
        through = max(through, sealed)
        let segmentOps = Int64(max(1, policy.segmentOpsMax))
        if policy.wholeSegmentsOnly { through = sealed + (through - sealed) / segmentOps * segmentOps }
        let ops = through - sealed
        let latestSnapshot = try db.scalarInt("SELECT max(seq) FROM chronicle_snapshots") ?? 0
        let snapshotAt: Int64? = through > latestSnapshot && through - latestSnapshot >= max(1, policy.snapshotEveryOps ?? 1) ? through : nil
        var dropThrough: Int64?
        var snapshotAtDrop: Int64?
        if let horizon = policy.horizonMilliseconds {
            // Whole segments whose newest op is older than the horizon and that a snapshot will cover.
            // Server times never go back, so those segments are a prefix: a binary search finds its
            // end, decoding a handful of segments one at a time (decoding them all at once held a
            // 1,000,000-op library's every op in memory).
            // (Every segment sealed by the end of the run: one without a snapshot at its end gets one first.)
            let covered = max(through, latestSnapshot)
            let segments = try db.query("SELECT first_seq, last_seq FROM chronicle_segments WHERE last_seq <= ?1 ORDER BY first_seq",
                                        [.integer(covered)]) { ($0.int(0), $0.int(1)) }
            func isOld(_ firstSeq: Int64) throws -> Bool {
                let newest = try db.query("SELECT body FROM chronicle_segments WHERE first_seq = ?1", [.integer(firstSeq)]) { row in
                    try row.withBytes(0) { try SegmentCodec.decode(Array($0)).ops.last?.serverTime }
                }.first ?? nil
                return (newest ?? Int64.max) < now - horizon
            }
            var (low, high) = (0, segments.count)   // segments[..<low] are old, segments[high...] are not
            while low < high {
                let middle = (low + high) / 2
                if try isOld(segments[middle].0) { low = middle + 1 } else { high = middle }
            }
            if low > 0 { dropThrough = segments[low - 1].1 }
            // Ops about to be sealed count too: the segments about to be written whose ops are all
            // older than the horizon (server times never go back, so all ops up to the newest old one).
            if ops > 0,
               let newest = try lastHotSeq(after: sealed, through: through, timeBefore: now - horizon, in: db), newest > sealed {
                let boundary = newest == through ? through : sealed + (newest - sealed) / segmentOps * segmentOps
                if boundary > sealed { dropThrough = boundary }
            }
            // History is dropped only up to a snapshot, so the state there is known: where there is
            // none, compaction writes one first (a library still in use has its newest snapshot later;
            // the server's newest is of its head, whatever the seal point). So it does where the one
            // there was made with an earlier version of the schema: carried over, it would lack what
            // only the log knew, and a replay from it would no longer give the state (it replaces it).
            if let drop = dropThrough, drop != snapshotAt || projectsConfirmedStateOnly, try !holdsCurrentSnapshot(at: drop, in: db) {
                snapshotAtDrop = drop
            }
        }
        return CompactionPlan(sealThrough: through, alreadySealedThrough: sealed, opsToSeal: ops,
                              segmentsToWrite: Int((ops + segmentOps - 1) / segmentOps), snapshotAt: snapshotAt,
                              dropThrough: dropThrough, snapshotAtDrop: snapshotAtDrop, hotOpsAfter: cursor - through,
                              snapshotAtHead: try snapshotAt.map { try snapshotAtHead(at: $0, dropThrough: dropThrough, in: db) } ?? false)
    }

    /// Whether a snapshot of the current schema version is saved at exactly `seq`.
    func holdsCurrentSnapshot(at seq: Int64, in db: Database) throws -> Bool {
        guard let saved = try LogTables.storedSnapshot(atMost: seq, in: db), saved.seq == seq else { return false }
        return saved.header.schemaFingerprint == projection.schema.fingerprint
    }

    /// Whether the newest snapshot, due at `at`, is read from the projection at its head (`CompactionPlan.snapshotAtHead`).
    func snapshotAtHead(at: Int64, dropThrough: Int64?, in db: Database) throws -> Bool {
        try projectsConfirmedStateOnly || (at != dropThrough && confirmedStateOnly(in: db))
    }

    func runCompaction(_ policy: CompactionPolicy, progress: ProgressHandler?,
                       afterStep: ((Int, String) throws -> Void)?) throws -> CompactionReport {
        let start = DispatchTime.now().uptimeNanoseconds
        let now = clock.nowMilliseconds()
        let plan = try read { db in try self.plan(policy, now: now, in: db) }
        var report = CompactionReport(plan: plan)
        report.fileBytesBefore = try fileBytes()
        var step = 0
        func done(_ what: String) throws {
            step += 1
            try afterStep?(step, what)
        }
        let total = plan.opsToSeal
        progress?(0, total)

        // 1. Seal, one segment per transaction.
        func seal(_ body: (Database) throws -> SealedChunk?) throws -> Bool {
            let written = try sealTransaction { db -> SealedChunk? in try body(db) }
            guard let written else { return false }
            report.segmentsWritten += 1
            report.opsSealed += written.ops
            report.logBytesSealed += written.log
            report.segmentBodyBytes += written.body
            report.segmentFrameBytes += written.frame
            progress?(report.opsSealed, total)
            try done("sealed a segment")
            return true
        }
        try sealing {
            if plan.opsToSeal > Int64(policy.segmentOpsMax) { try sealAhead(plan, policy: policy, now: now, seal: seal) }
            // Whatever is left (everything, for a single segment, or after another compaction on the file sealed meanwhile).
            while try seal({ db in try sealNextSegment(through: plan.sealThrough, endingAt: plan.dropThrough, policy: policy, now: now, in: db) }) {}
        }

        // 2. The snapshot a horizon starts history from, where there is none yet, then the newest one
        // (older ones go, except the one history begins at and the one it is about to). A drop point's
        // is replayed to its exact seq in a scratch database; the newest one, where the projection
        // holds only confirmed state (the server's; a device's with nothing pending, unless history
        // is to begin there), is read from it at its head: a dump, no replay.
        func writeSnapshot(at exact: Int64?, deletingOlder: Bool) throws -> (seq: Int64, bytes: Int64) {
            let (seq, body, stateDigest) = try read { db in
                if let exact, try !deletingOlder || !snapshotAtHead(at: exact, dropThrough: plan.dropThrough, in: db) {
                    let (body, digest) = try DeviceStore.stateSnapshotBody(at: exact, source: db, materializer, projection,
                                                                          libraryID: libraryID, progress: nil)
                    return (exact, body, digest)
                }
                let head = try confirmedHead(sealed: LogTables.sealedUpTo(in: db), in: db)
                let (body, digest) = try ProjectionTables.snapshotBody(projection, from: db, seq: head, libraryID: libraryID)
                return (head, body, digest)
            }
            let frame = LZ4Frame.compress(body)
            try writeTransaction { db in
                try LogTables.insertSnapshot(at: seq, frame: frame, stateDigest: stateDigest, createdAt: now, in: db)
                if deletingOlder {
                    try db.execute("DELETE FROM chronicle_snapshots WHERE seq < ?1 AND seq <> ?2 AND seq <> ?3",
                                   [.integer(seq), .integer(try LogTables.historyBase(in: db)), .integer(plan.dropThrough ?? -1)])
                }
            }
            try done("wrote the snapshot at seq \(seq)")
            return (seq, Int64(frame.count))
        }
        if let drop = plan.snapshotAtDrop {
            _ = try writeSnapshot(at: drop, deletingOlder: false)
        }
        if let at = plan.snapshotAt {
            let written = try writeSnapshot(at: at, deletingOlder: true)
            report.snapshotSeq = written.seq
            report.snapshotBytes = written.bytes
        }

        // 3. The horizon: history older than it goes, where a snapshot holds the state. Checked again
        // inside the transaction: a compaction running alongside (another process on the same file)
        // may have deleted the snapshot this one wrote; then history stays until the next run.
        if let drop = plan.dropThrough {
            let dropped = try writeTransaction { db -> Bool in
                guard try db.scalarInt("SELECT 1 FROM chronicle_snapshots WHERE seq = ?1", [.integer(drop)]) != nil else { return false }
                try db.execute("DELETE FROM chronicle_segments WHERE last_seq <= ?1", [.integer(drop)])
                try LogTables.setMeta("history_base_seq", .integer(drop), in: db)
                try LogTables.setMeta("history_dropped_at", .integer(now), in: db)
                // The id of the op at the new base, which a pull compares with the server's
                // (`holdsConfirmed`): a server restored from a backup may hold another one there.
                // (A scan of the confirmed op ids, which have no index by seq; a compaction reads more.)
                // This device's own ops up to there are no longer held.
                let devices = try db.scalarInt("SELECT count(*) FROM sqlite_schema WHERE name = 'chronicle_op_ids'") == 1
                if devices { try db.execute("DELETE FROM chronicle_own_confirmed WHERE server_seq <= ?1", [.integer(drop)]) }
                if devices, let id = try db.scalarText("""
                    SELECT substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-' || substr(h, 13, 4) || '-' || substr(h, 17, 4) || '-' || substr(h, 21)
                    FROM (SELECT hex(op_id) AS h FROM chronicle_op_ids WHERE server_seq = ?1)
                    """, [.integer(drop)]).flatMap({ UUID(uuidString: $0) }) {
                    try LogTables.setMeta("history_base_op_id", .text(id.lowercased), in: db)
                } else {
                    try db.execute("DELETE FROM chronicle_meta WHERE key = 'history_base_op_id'")
                }
                try db.execute("DELETE FROM chronicle_snapshots WHERE seq < ?1", [.integer(drop)])
                return true
            }
            if dropped {
                report.historyDroppedThrough = drop
                try done("dropped history through seq \(drop)")
            }
        }

        // 4. Give the space back: VACUUM rewrites the file (atomically; an interruption leaves it as it was).
        // In WAL mode the rewrite goes through the WAL, so a TRUNCATE checkpoint follows: without it the
        // benchmark's 1,000,000-op store kept a 478 MB WAL after compacting.
        if !plan.isEmpty && policy.givesSpaceBack {
            try vacuum()
            try done("gave the space back")
        }
        report.fileBytesAfter = try fileBytes()
        report.seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        return report
    }

    /// Seals segments with the reading and encoding a segment ahead on another thread: a read
    /// connection reads the next segment's ops from the log, encodes, compresses and digests it
    /// while the writer stores the one before and deletes its rows. Each was about half of a
    /// segment's time. The log's rows up to the seal point do not change meanwhile (only sealing
    /// deletes them); where another compaction on the file sealed first, `storeSeal` finds the
    /// prefix moved, and this stops and leaves the rest to the caller's loop.
    func sealAhead(_ plan: CompactionPlan, policy: CompactionPolicy, now: Int64,
                   seal: ((Database) throws -> SealedChunk?) throws -> Bool) throws {
        do {
            try PrefetchChannel<PreparedSeal>.stream(capacity: 1, produce: { channel in
                var (sealed, previous) = try self.read { db in
                    (try LogTables.sealedUpTo(in: db), try Self.lastSegmentDigest(in: db))
                }
                // Each segment in its own read: no snapshot is held across the writer's commits. Only
                // a seal deletes log rows, so the rows after `sealed` are all there unless another
                // compaction sealed past it (this one's writer is at most where this thread is).
                while let next = try self.read({ db in
                    guard try LogTables.sealedUpTo(in: db) <= sealed else { throw SealPrefixMoved() }
                    return try self.prepareSeal(after: sealed, previousDigest: previous, through: plan.sealThrough,
                                         endingAt: plan.dropThrough, policy: policy, in: db)
                }) {
                    try channel.put([next])
                    (sealed, previous) = (next.segment.lastSeq, next.digest)
                }
            }, consume: { prepared in
                guard try seal({ db in try self.storeSeal(prepared, now: now, in: db) }) else { throw SealPrefixMoved() }
            })
        } catch is SealPrefixMoved {}
    }

    /// Seals the next run of up to `segmentOpsMax` ops (not past `through`) into one segment,
    /// inside the caller's transaction. Nil when everything up to `through` is sealed.
    /// `boundary`: a seq a segment must end at (where a horizon drops history, whole segments go).
    func sealNextSegment(through: Int64, endingAt boundary: Int64? = nil, policy: CompactionPolicy, now: Int64,
                         in db: Database) throws -> SealedChunk? {
        let sealed = try LogTables.sealedUpTo(in: db)
        guard let prepared = try prepareSeal(after: sealed, previousDigest: try Self.lastSegmentDigest(in: db), through: through,
                                             endingAt: boundary, policy: policy, in: db) else { return nil }
        return try storeSeal(prepared, now: now, in: db)
    }

    /// The digest of the last sealed segment ("" before the first): the next one chains to it.
    static func lastSegmentDigest(in db: Database) throws -> String {
        try db.scalarText("SELECT digest FROM chronicle_segments ORDER BY first_seq DESC LIMIT 1") ?? ""
    }

    /// `prepareSeal` for a log kept a row per op (`chronicle_log`: the server's).
    func prepareRowSeal(after sealed: Int64, previousDigest: String, through: Int64, endingAt boundary: Int64?,
                        policy: CompactionPolicy, in db: Database) throws -> PreparedSeal? {
        guard sealed < through else { return nil }
        var last = min(through, sealed + Int64(max(1, policy.segmentOpsMax)))
        if let boundary, sealed < boundary, boundary < last { last = boundary }
        // The bytes a log row takes, roughly: its text columns plus six integers.
        let rows = try db.query("""
            SELECT \(LogTables.logColumns), length(payload) + length(op_id) + length(type) + length(entity_id) + length(device_id) + 40
            FROM chronicle_log WHERE server_seq > ?1 AND server_seq <= ?2 ORDER BY server_seq
            """, [.integer(sealed), .integer(last)]) { row in (try LogTables.logOp(row, libraryID: libraryID), row.int(11)) }
        let ops = rows.map(\.0)
        precondition(ops.count == Int(last - sealed) && ops.first?.serverSeq == sealed + 1,
                     "the log is not gap-free after the sealed prefix")
        // One segment, unless its ops are so large that the body must be split (the first part is sealed now).
        let segment = try LogTables.encodeSegments(ops[...], libraryID: libraryID, opsMax: ops.count)[0]
        let count = Int(segment.lastSeq - segment.firstSeq + 1)
        return PreparedSeal(segment: segment, ops: Array(ops[..<count]), logBytes: rows[..<count].reduce(0) { $0 + $1.1 },
                            previousDigest: previousDigest, digest: LogTables.chainDigest(previous: previousDigest, body: segment.body))
    }

    /// Stores `prepared` and deletes its ops from the log, inside the caller's transaction. Nil,
    /// changing nothing, when the sealed prefix no longer ends where `prepared` was read after.
    func storeSeal(_ prepared: PreparedSeal, now: Int64, in db: Database) throws -> SealedChunk? {
        let segment = prepared.segment
        guard try LogTables.sealedUpTo(in: db) == segment.firstSeq - 1,
              try Self.lastSegmentDigest(in: db) == prepared.previousDigest else { return nil }
        try storeSegment(segment, ops: prepared.ops[...], digests: (prepared.previousDigest, prepared.digest), now: now, in: db)
        try releaseSealed(segment, in: db)
        return SealedChunk(ops: segment.opCount, log: prepared.logBytes, body: Int64(segment.body.count),
                           frame: Int64(segment.frame.count))
    }

    /// Stores `segment` (of `ops`) after the sealed prefix, chained to the segment before it, with
    /// its entity filter, and keeps its op ids so each op still applies at most once. Inside the
    /// caller's transaction; the segments' triggers refuse one that does not continue the prefix.
    /// `digests`: the previous segment's and this one's, where the caller has them.
    func storeSegment(_ segment: EncodedSegment, ops: ArraySlice<Op>, digests: (previous: String, digest: String)? = nil,
                      now: Int64, in db: Database) throws {
        let previous = try digests?.previous ?? Self.lastSegmentDigest(in: db)
        let digest = digests?.digest ?? LogTables.chainDigest(previous: previous, body: segment.body)
        try db.statement("""
            INSERT INTO chronicle_segments(first_seq, last_seq, op_count, body, digest, previous_digest, body_bytes, created_at)
            VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
            """).execute([.integer(segment.firstSeq), .integer(segment.lastSeq), .integer(segment.lastSeq - segment.firstSeq + 1), .null,
                          .text(digest), .text(previous),
                          .integer(Int64(segment.body.count)), .integer(now)], blob: segment.frame, at: 4)
        try db.statement("INSERT INTO chronicle_segment_filters(first_seq, filter) VALUES (?1, ?2)")
            .execute([.integer(segment.firstSeq), .null], blob: segment.filter, at: 2)
        try rememberSealed(ops, in: db)
    }

    func fileBytes() throws -> Int64 {
        let size = { (path: String) -> Int64 in ((try? FileManager.default.attributesOfItem(atPath: path)[.size]) as? Int64) ?? 0 }
        return size(path) + size(path + "-wal")
    }

}

extension DeviceStore {
}
