import ChronicleCore
import ChronicleStore
import Foundation
import ChronicleServerStore

// Sealing and the horizon, kept in PostgreSQL and followed by the replicas.
extension PostgresLibrary {
    /// Seals PostgreSQL as far as `replica` is sealed (`sealNext`: the replica's segments where
    /// they continue PostgreSQL's, else PostgreSQL's own rows), one segment per transaction under
    /// the library's sealing lock (`lockSealing`; pushes go on meanwhile), each checked op by op
    /// against the log rows it replaces before they go (the guard trigger lets only ops a segment
    /// holds leave); then drops PostgreSQL's history as far as the replica's was dropped past the
    /// retention horizon (`drop`). Several servers may do this at once: each segment goes in once.
    /// Nothing to do (no query) while the replica has sealed and dropped no further than
    /// PostgreSQL was last seen to have.
    public func sealed(_ replica: ServerLibrary) throws {
        let local = try replica.sealedThrough()
        let base = try replica.historyBase()
        let sealDue = local > published.withLock({ $0 })
        let dropDue = base > publishedBase.withLock({ $0 })
        guard sealDue || dropDue else { return }
        do {
            try pool.withConnection { pg in
                if sealDue {
                    var moved = 0
                    while true {
                        do {
                            guard try pg.transaction({ pg in try sealNext(replica, through: local, pg) }) else { break }
                        } catch is SealMoved where moved < 3 {
                            moved += 1   // a server of an earlier version sealed meanwhile: read where it left off
                        }
                    }
                }
                if dropDue {
                    do {
                        try pg.transaction { pg in try drop(through: base, replica, pg) }
                        publishedBase.withLock { $0 = max($0, base) }
                    } catch is SealMoved {}   // moved by a server of an earlier version: the next pass looks again
                }
            }
        } catch let error as PostgresError where error.isUnavailable {
            throw counted(error)
        }
        published.withLock { $0 = max($0, local) }
    }

    /// Drops PostgreSQL's history through `base` where the replica has (past the retention
    /// horizon), in the caller's transaction under the library's sealing lock: the replica's snapshot
    /// at `base` is kept there, the ids of the ops in the segments that go are kept
    /// (`chronicle_dropped_ops`: each op still applies at most once), and the segments and older
    /// snapshots go. Only at the end of one of PostgreSQL's segments, and only through what is
    /// sealed there; otherwise nothing changes (a replica whose segments end where PostgreSQL's do
    /// drops it later).
    func drop(through base: Int64, _ replica: ServerLibrary, _ pg: PostgresConnection) throws {
        let state = try lockSealing(pg)
        publishedBase.withLock { $0 = max($0, state.historyBase) }
        let key = libraryID.lowercased
        guard base > state.historyBase, base <= state.sealedThrough,
              try pg.execute("SELECT 1 FROM chronicle_segments WHERE library_id = $1 AND last_seq = $2", [key, String(base)]).count == 1,
              let snapshot = try replica.snapshot(at: base) else { return }
        try Self.insertSnapshot(snapshot.frame, at: base, stateDigest: snapshot.stateDigest, library: key, pg)
        var after = state.historyBase
        var dropped = 0
        while after < base {
            let segments = try pg.execute("""
                SELECT frame, last_seq FROM chronicle_segments WHERE library_id = $1 AND first_seq > $2 AND last_seq <= $3
                ORDER BY first_seq LIMIT 4
                """, [key, String(after), String(base)])
            guard segments.count > 0 else {
                throw ChronicleError(.invariantViolated, "PostgreSQL's segments of library \(key) do not run on from seq \(after).")
            }
            for row in 0..<segments.count {
                let ops = try ServerLibrary.decodeSealed(try segments.bytes(row, 0), libraryID: libraryID).ops
                try Self.insertDropped(ops.map { ServerLibrary.DroppedOp(opID: $0.opID.lowercased, serverSeq: $0.serverSeq!, deviceID: $0.deviceID.lowercased) },
                                       library: key, pg)
                dropped += ops.count
                after = try segments.int(row, 1)
            }
        }
        // The row is locked from here to the commit only (pushes wait on it that long, not for the ids above).
        let moved = try pg.execute("""
            UPDATE chronicle_libraries SET history_base = $2, history_dropped_at = (extract(epoch FROM clock_timestamp()) * 1000)::bigint
            WHERE library_id = $1 AND history_base = $3
            """, [key, String(base), String(state.historyBase)])
        guard moved.affected == 1 else { throw SealMoved() }
        try pg.execute("DELETE FROM chronicle_segments WHERE library_id = $1 AND last_seq <= $2", [key, String(base)])
        try pg.execute("DELETE FROM chronicle_snapshots WHERE library_id = $1 AND seq < $2", [key, String(base)])
        counters.withLock { $0.opsDropped += dropped }
    }

    /// Seals PostgreSQL's next segment, up to `target` (where the replica's sealed prefix ends), in
    /// the caller's transaction; false when PostgreSQL is sealed that far. Where the replica has a
    /// segment that starts at PostgreSQL's sealed end, that segment's frame is kept, once it is
    /// found to hold exactly the ops logged there. Otherwise (the replica dropped those segments
    /// past the horizon already, or seals other sizes) PostgreSQL's own rows are sealed, up to
    /// where the replica's next segment starts, so that the two line up again.
    func sealNext(_ replica: ServerLibrary, through target: Int64, _ pg: PostgresConnection) throws -> Bool {
        let state = try lockSealing(pg)
        published.withLock { $0 = max($0, state.sealedThrough) }
        let end = min(target, state.head)
        guard state.sealedThrough < end else { return false }
        let key = libraryID.lowercased
        let first = state.sealedThrough + 1
        let next = try replica.sealedSegments(after: state.sealedThrough, limit: 1).first
        let ops: [Op], body: [UInt8], frame: [UInt8]
        if let next, next.firstSeq == first, next.lastSeq <= end {
            (ops, body) = try ServerLibrary.decodeSealed(next.frame, libraryID: libraryID)
            frame = next.frame
        } else {
            var last = min(end, first + Int64(Self.ownSegmentOpsMax) - 1)
            if let next, next.firstSeq > first { last = min(last, next.firstSeq - 1) }
            let rows = try pg.execute("""
                SELECT \(Self.logColumns) FROM chronicle_log WHERE library_id = $1 AND server_seq >= $2 AND server_seq <= $3 ORDER BY server_seq
                """, [key, String(first), String(last)])
            let logged = try (0..<rows.count).map { try op(rows, $0) }
            guard logged.count == Int(last - first + 1), logged.first?.serverSeq == first else {
                throw ChronicleError(.invariantViolated, "PostgreSQL's log of library \(key) does not run from seq \(first) to \(last) without a gap.")
            }
            let sealed = try ServerLibrary.encodeSegment(logged)
            ops = Array(logged.prefix(sealed.opCount))
            (body, frame) = (sealed.body, sealed.frame)
        }
        let last = ops.last!.serverSeq!
        let digest = LogTables.chainDigest(previous: state.sealedDigest, body: body)
        try Self.insertSegment(frame, first: first, last: last, digest: digest, previousDigest: state.sealedDigest, bodyBytes: body.count,
                               library: key, pg)
        // The segment is in, so the guard trigger lets the rows it holds go: they must be its ops.
        let removed = try pg.execute("""
            DELETE FROM chronicle_log WHERE library_id = $1 AND server_seq >= $2 AND server_seq <= $3 RETURNING \(Self.logColumns)
            """, [key, String(first), String(last)])
        guard try (0..<removed.count).map({ try op(removed, $0) }).sorted(by: { $0.serverSeq! < $1.serverSeq! }) == ops else {
            throw ChronicleError(.invariantViolated, "This server's sealed segment \(first)…\(last) of library \(key) does not hold the ops PostgreSQL logged there; nothing was sealed in PostgreSQL. Remove the replica (it is made anew) and check the library with `chronicle server verify --postgres`.")
        }
        // The row is locked from here to the commit only: a push waits that long, not for the rows above.
        let moved = try pg.execute("""
            UPDATE chronicle_libraries SET sealed_through = $2, sealed_digest = $3
            WHERE library_id = $1 AND sealed_through = $4 AND sealed_digest = $5
            """, [key, String(last), digest, String(state.sealedThrough), state.sealedDigest])
        guard moved.affected == 1 else { throw SealMoved() }
        counters.withLock { $0.segmentsSealed += 1; $0.opsSealed += ops.count }
        return true
    }

    /// The most ops in a segment PostgreSQL seals from its own rows.
    static let ownSegmentOpsMax = 10_000

    /// Takes the library's sealing lock for the caller's transaction and reads what PostgreSQL
    /// holds. Sealing and dropping history take this lock (an advisory one, keyed by the library)
    /// rather than the library's row: the row is locked only by the `UPDATE` that moves the sealed
    /// end or the history base, just before the commit, so pushes to the library do not wait while
    /// a segment's rows are checked and deleted. The segment's reference to the row takes a
    /// `KEY SHARE` lock, which a write's `FOR NO KEY UPDATE` does not wait for.
    func lockSealing(_ pg: PostgresConnection) throws -> State {
        try pg.execute("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", [Self.sealingLockPrefix + libraryID.lowercased])
        return try Self.readState(libraryID, pg, forUpdate: false)
    }

    /// Names the advisory lock `lockSealing` takes (hashed with the library's id).
    static let sealingLockPrefix = "chronicle sealing "

    /// The sealed end or the history base moved while a seal or a drop was under way: only a
    /// server of an earlier version, which does not take the sealing lock, can have moved it.
    /// The transaction is rolled back, and sealing reads where it now begins.
    struct SealMoved: Error, CustomStringConvertible {
        var description: String {
            "PostgreSQL's sealed segments moved while this server sealed (a server of an earlier version sealed too); nothing was changed, and the next pass seals from where they end."
        }
    }
}
