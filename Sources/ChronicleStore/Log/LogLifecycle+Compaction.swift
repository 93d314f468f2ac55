import ChronicleCore
import Foundation

extension LogLifecycle {
    /// The newest confirmed seq: the hot log's, or the sealed end when the log is empty.
    func confirmedHead(sealed: Int64, in db: Database) throws -> Int64 {
        max(sealed, try hotLogEnd(in: db) ?? 0)
    }

    package func plan(_ policy: CompactionPolicy, now clockNow: Int64, in db: Database) throws -> CompactionPlan {
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

    /// Runs a compaction (`CompactionRun`): seal, snapshot, horizon, space given back.
    package func runCompaction(_ policy: CompactionPolicy, progress: ProgressHandler?,
                               afterStep: ((Int, String) throws -> Void)?) throws -> CompactionReport {
        try CompactionRun(self, policy, progress: progress, afterStep: afterStep).run()
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
    package func prepareRowSeal(after sealed: Int64, previousDigest: String, through: Int64, endingAt boundary: Int64?,
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
    package func storeSegment(_ segment: EncodedSegment, ops: ArraySlice<Op>, digests: (previous: String, digest: String)? = nil,
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
