import ChronicleCore
import Foundation

/// One compaction of a store's log (`LogLifecycle.runCompaction`), in four steps, each in its own
/// transactions so that an interruption leaves a whole store: seal the hot log into segments,
/// write the snapshots the plan calls for, drop history past the horizon, give the space back.
final class CompactionRun<Store: LogLifecycle> {
    private let store: Store
    private let policy: CompactionPolicy
    private let progress: ProgressHandler?
    private let afterStep: ((Int, String) throws -> Void)?
    private let start = DispatchTime.now().uptimeNanoseconds
    private let now: Int64
    private let plan: CompactionPlan
    private var report: CompactionReport
    private var step = 0
    /// The bytes the store's pages in use took before the compaction (free pages and the WAL aside).
    private let usedBytesBefore: Int64

    init(_ store: Store, _ policy: CompactionPolicy, progress: ProgressHandler?, afterStep: ((Int, String) throws -> Void)?) throws {
        self.store = store
        self.policy = policy
        self.progress = progress
        self.afterStep = afterStep
        let now = store.clock.nowMilliseconds()
        self.now = now
        plan = try store.read { db in try store.plan(policy, now: now, in: db) }
        report = CompactionReport(plan: plan)
        report.fileBytesBefore = try store.fileBytes()
        usedBytesBefore = try Self.usedBytes(store)
    }

    /// What the file would hold after VACUUM: its pages in use, in bytes.
    private static func usedBytes(_ store: Store) throws -> Int64 {
        try store.read { db in
            ((try db.scalarInt("PRAGMA page_count") ?? 0) - (try db.scalarInt("PRAGMA freelist_count") ?? 0)) * (try db.scalarInt("PRAGMA page_size") ?? 4096)
        }
    }

    func run() throws -> CompactionReport {
        progress?(0, plan.opsToSeal)
        try seal()
        try writeSnapshots()
        try dropHistory()
        // Give the space back: VACUUM rewrites the file (atomically; an interruption leaves it as it was).
        // In WAL mode the rewrite goes through the WAL, so a TRUNCATE checkpoint follows: without it the
        // benchmark's 1,000,000-op store kept a 478 MB WAL after compacting.
        if !plan.isEmpty && policy.givesSpaceBack {
            try store.vacuum()
            try done("gave the space back")
        }
        report.fileBytesAfter = try store.fileBytes()
        report.seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        return report
    }

    private func done(_ what: String) throws {
        step += 1
        try afterStep?(step, what)
    }

    // MARK: 1. Seal

    /// Seals the plan's ops, one segment per transaction, reading and encoding ahead where there
    /// are several segments to write.
    private func seal() throws {
        try store.sealing {
            if plan.opsToSeal > Int64(policy.segmentOpsMax) { try store.sealAhead(plan, policy: policy, now: now, seal: sealOne) }
            // Whatever is left (everything, for a single segment, or after another compaction on the file sealed meanwhile).
            while try sealOne({ [plan, policy, now, store] db in
                try store.sealNextSegment(through: plan.sealThrough, endingAt: plan.dropThrough, policy: policy, now: now, in: db)
            }) {}
        }
    }

    /// One seal's transaction (`body` writes the segment); false when there was nothing left to seal.
    private func sealOne(_ body: (Database) throws -> SealedChunk?) throws -> Bool {
        let written = try store.sealTransaction { db -> SealedChunk? in try body(db) }
        guard let written else { return false }
        report.segmentsWritten += 1
        report.opsSealed += written.ops
        report.logBytesSealed += written.log
        report.segmentBodyBytes += written.body
        report.segmentFrameBytes += written.frame
        progress?(report.opsSealed, plan.opsToSeal)
        try done("sealed a segment")
        return true
    }

    // MARK: 2. Snapshots

    /// The snapshot a horizon starts history from, where there is none yet, then the newest one
    /// (older ones go, except the one history begins at and the one it is about to).
    private func writeSnapshots() throws {
        if let drop = plan.snapshotAtDrop {
            _ = try writeSnapshot(at: drop, deletingOlder: false)
        }
        guard let at = plan.snapshotAt else { return }
        guard let written = try writeSnapshot(at: at, deletingOlder: true) else { return }
        report.snapshotSeq = written.seq
        report.snapshotBytes = written.bytes
    }

    /// A drop point's snapshot is replayed to its exact seq in a scratch database; the newest one,
    /// where the projection holds only confirmed state (the server's; a device's with nothing
    /// pending, unless history is to begin there), is read from it at its head: a dump, no replay.
    /// Nil where the newest snapshot is left out because it would grow the store (`keepsSnapshot`).
    private func writeSnapshot(at exact: Int64?, deletingOlder: Bool) throws -> (seq: Int64, bytes: Int64)? {
        let (seq, body, stateDigest) = try store.read { db in
            if let exact, try !deletingOlder || !store.snapshotAtHead(at: exact, dropThrough: plan.dropThrough, in: db) {
                let (body, digest) = try DeviceStore.stateSnapshotBody(at: exact, source: db, store.materializer, store.projection,
                                                                      libraryID: store.libraryID, progress: nil)
                return (exact, body, digest)
            }
            let head = try store.confirmedHead(sealed: LogTables.sealedUpTo(in: db), in: db)
            let (body, digest) = try ProjectionTables.snapshotBody(store.projection, from: db, seq: head, libraryID: store.libraryID)
            return (head, body, digest)
        }
        let frame = LZ4Frame.compress(body)
        if deletingOlder, try !keepsSnapshot(of: Int64(frame.count)) {
            report.snapshotLeftOut = Int64(frame.count)
            return nil
        }
        try store.writeTransaction { db in
            try LogTables.insertSnapshot(at: seq, frame: frame, stateDigest: stateDigest, createdAt: now, in: db)
            if deletingOlder {
                try db.execute("DELETE FROM chronicle_snapshots WHERE seq < ?1 AND seq <> ?2 AND seq <> ?3",
                               [.integer(seq), .integer(try LogTables.historyBase(in: db)), .integer(plan.dropThrough ?? -1)])
            }
        }
        try done("wrote the snapshot at seq \(seq)")
        return (seq, Int64(frame.count))
    }

    /// Whether the newest snapshot, `bytes` compressed, is kept. A server keeps it (new devices
    /// start from it), and so does a compaction that drops history (history begins at one) or is
    /// asked to (`keepsSnapshotThatGrowsFile`). Otherwise, on a store whose space is given back, it
    /// is kept only if the store's pages in use then stay no more than before the compaction (what
    /// VACUUM leaves of the file; the WAL and free pages aside): the snapshot only
    /// speeds a rebuild up, and a device's log blocks are already compact enough that sealing
    /// them can save less than the snapshot takes.
    private func keepsSnapshot(of bytes: Int64) throws -> Bool {
        if store.snapshotsServeNewDevices || plan.dropThrough != nil || policy.keepsSnapshotThatGrowsFile || !policy.givesSpaceBack {
            return true
        }
        // The pages in use after sealing, plus the snapshot's frame and a page for its row.
        return try Self.usedBytes(store) + bytes + 4096 <= usedBytesBefore
    }

    // MARK: 3. Horizon

    /// History older than the horizon goes, where a snapshot holds the state. Checked again inside
    /// the transaction: a compaction running alongside (another process on the same file) may have
    /// deleted the snapshot this one wrote; then history stays until the next run.
    private func dropHistory() throws {
        guard let drop = plan.dropThrough else { return }
        let now = self.now
        let dropped = try store.writeTransaction { db -> Bool in
            guard try db.scalarInt("SELECT 1 FROM chronicle_snapshots WHERE seq = ?1", [.integer(drop)]) != nil else { return false }
            try db.execute("DELETE FROM chronicle_segments WHERE last_seq <= ?1", [.integer(drop)])
            try LogTables.setMeta("history_base_seq", .integer(drop), in: db)
            try LogTables.setMeta("history_dropped_at", .integer(now), in: db)
            try Self.recordHistoryBase(drop, in: db)
            try db.execute("DELETE FROM chronicle_snapshots WHERE seq < ?1", [.integer(drop)])
            return true
        }
        if dropped {
            report.historyDroppedThrough = drop
            try done("dropped history through seq \(drop)")
        }
    }

    /// The id of the op at the new base, which a pull compares with the server's
    /// (`holdsConfirmed`): a server restored from a backup may hold another one there.
    /// (A scan of the confirmed op ids, which have no index by seq; a compaction reads more.)
    /// This device's own ops up to there are no longer held. (A device store's tables only.)
    private static func recordHistoryBase(_ drop: Int64, in db: Database) throws {
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
    }
}
