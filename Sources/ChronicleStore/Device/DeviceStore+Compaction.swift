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
    /// Keep the new snapshot even where it leaves the file larger than before the compaction.
    /// Off by default on a device: its log blocks are already compact, so the snapshot (which
    /// only makes a rebuild start later in the log) can outweigh what sealing saves, and it is
    /// then left out (`CompactionReport.snapshotLeftOut`). A server always keeps its snapshot, and
    /// a compaction that drops history past a horizon keeps the one history begins at.
    public var keepsSnapshotThatGrowsFile = false
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
    /// The compressed size of a snapshot the compaction made and left out, because keeping it
    /// would have left the file larger than before (`CompactionPolicy.keepsSnapshotThatGrowsFile`).
    public var snapshotLeftOut: Int64?
    public var historyDroppedThrough: Int64?
    public var fileBytesBefore: Int64 = 0
    public var fileBytesAfter: Int64 = 0
    public var seconds: Double = 0

    /// Sealed log bytes per compressed segment byte.
    public var compressionRatio: Double { segmentFrameBytes > 0 ? Double(logBytesSealed) / Double(segmentFrameBytes) : 0 }
}

extension DeviceStore: LogLifecycle {
    package var projectsConfirmedStateOnly: Bool { false }
    package var snapshotsServeNewDevices: Bool { false }

    /// The newest server time this store holds: never later than the server's clock, whatever
    /// this device's clock says (`Schemas/store/device-v9.md`, "Times in the projection").
    package func serverNow(_ now: Int64, in db: Database) throws -> Int64 {
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
    package func confirmedStateOnly(in db: Database) throws -> Bool {
        try db.scalarInt("SELECT EXISTS (SELECT 1 FROM chronicle_outbox)") == 0
    }

    package func vacuum() throws {
        try writer.withLock { db in
            try db.execute("VACUUM")
            checkpointer.truncate(writer: db)
        }
    }

    /// A device keeps every confirmed op's id when the op is confirmed (`chronicle_op_ids`), so
    /// sealing has none to add.
    package func rememberSealed(_ ops: ArraySlice<Op>, in db: Database) throws {}

    package func hotLogEnd(in db: Database) throws -> Int64? { try LogTables.blocksEnd(in: db) }

    package func firstHotSeq(after sealed: Int64, timeAtLeast time: Int64, in db: Database) throws -> Int64? {
        try Self.firstHotSeq(after: sealed, timeAtLeast: time, libraryID: libraryID, in: db)
    }

    package func lastHotSeq(after sealed: Int64, through: Int64, timeBefore time: Int64, in db: Database) throws -> Int64? {
        try Self.lastHotSeq(after: sealed, through: through, timeBefore: time, libraryID: libraryID, in: db)
    }

    /// A block that starts right after `sealed` and fits the segment is sealed whole: its body is
    /// compressed as it is (no op decoded) and its filter copied. Otherwise the ops up to the
    /// segment's end are decoded from the blocks and encoded again as one segment; that run stops
    /// before a block that could be sealed whole, so that sealing keeps to the blocks' boundaries.
    package func prepareSeal(after sealed: Int64, previousDigest: String, through: Int64, endingAt boundary: Int64?,
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
    package func sealing<T>(_ body: () throws -> T) throws -> T {
        try checkpointer.holdingCheckpoints(body)
    }

    package func sealTransaction<T>(_ body: (Database) throws -> T) throws -> T {
        try writeTransaction(spillToFiles: false, relaxedSync: true, body)
    }

    /// Blocks whose every op is now sealed leave; one the segment ended inside stays (its sealed
    /// ops are skipped) until sealing passes its end.
    package func releaseSealed(_ segment: EncodedSegment, in db: Database) throws {
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

extension DeviceStore {
}
