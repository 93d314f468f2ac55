import ChronicleCore
import ChronicleStore
import Foundation
import ChronicleServerStore

/// One library whose order lives in PostgreSQL: the upstream its replica in this process
/// follows (see `PostgresServerStore`).
///
/// A write (a push, a server op) locks the library's row in PostgreSQL (`FOR NO KEY UPDATE`), catches
/// the replica up with what other processes committed, runs on the replica exactly as on a
/// server with its own file, writes what it decided to PostgreSQL and commits there, and only
/// then commits the replica. A process that dies between the two commits leaves a replica
/// behind PostgreSQL, never ahead: the next write or read catches it up.
public final class PostgresLibrary: LibraryUpstream {
    public let libraryID: UUID
    let pool: PostgresPool
    /// Orders this process's catch-ups and writes on the replica (the count of them is only there
    /// so that the lock guards a value: ThreadSanitizer reports accesses to an empty one as races).
    private let writing = Locked<Int>(0)

    /// What PostgreSQL holds for the library: its head, a generation that moves with every
    /// write, and where its sealed segments end.
    struct State {
        var head: Int64
        var headTime: Int64
        var generation: Int64
        var incarnation: UUID
        /// The last seq kept in `chronicle_segments` (0: none); the log holds the ops after it.
        var sealedThrough: Int64
        /// The chained digest of the last segment ("" before the first).
        var sealedDigest: String
        /// The seq history begins after (0: whole); a snapshot there holds the state, and the ids of
        /// the ops before it are kept (`chronicle_dropped_ops`).
        var historyBase: Int64
        var historyDroppedAt: Int64?
    }

    /// How far PostgreSQL's segments were last seen to reach: a replica that has sealed no
    /// further has nothing to hand over (`sealed`).
    private let published = Locked<Int64>(0)
    /// Where PostgreSQL's history was last seen to begin: a replica whose history begins no later
    /// has nothing to drop there.
    private let publishedBase = Locked<Int64>(0)

    /// The store's counters (`/metrics`), shared by its libraries.
    let counters: Locked<PostgresCounters>

    /// Set when the replica was found short of where PostgreSQL's history begins: it cannot
    /// catch up, and is made anew (`PostgresServerStore.needsRemaking`).
    let behindHistory = Locked(false)

    init(libraryID: UUID, pool: PostgresPool, counters: Locked<PostgresCounters> = Locked(PostgresCounters())) {
        self.libraryID = libraryID
        self.pool = pool
        self.counters = counters
    }

    /// `unavailable(error)`, counted.
    func counted(_ error: PostgresError) -> ProtocolError {
        counters.withLock { $0.unavailable += 1 }
        return Self.unavailable(error)
    }

    /// Makes the library's row if there is none; returns what PostgreSQL holds.
    func create(schema: Schema, now: Int64) throws -> State {
        try pool.withConnection { pg in
            try pg.execute("""
                INSERT INTO chronicle_libraries(library_id, incarnation, schema_name, created_at) VALUES ($1, $2, $3, $4)
                ON CONFLICT (library_id) DO NOTHING
                """, [libraryID.lowercased, UUID().lowercased, schema.name, String(now)])
            return try Self.readState(libraryID, pg, forUpdate: false)
        }
    }

    /// The op id PostgreSQL holds at `seq`, in the log or in a sealed segment.
    func opID(at seq: Int64) throws -> String? {
        let key = libraryID.lowercased
        return try pool.withConnection { pg in
            if let id = try pg.execute("SELECT op_id FROM chronicle_log WHERE library_id = $1 AND server_seq = $2", [key, String(seq)]).text(0, 0) {
                return id
            }
            // Sealed (the segment goes in before its ops leave the log, in one transaction), or past the horizon.
            let rows = try pg.execute("""
                SELECT frame FROM chronicle_segments WHERE library_id = $1 AND first_seq <= $2 AND last_seq >= $2
                """, [key, String(seq)])
            guard rows.count == 1 else {
                return try pg.execute("SELECT op_id FROM chronicle_dropped_ops WHERE library_id = $1 AND server_seq = $2",
                                      [key, String(seq)]).text(0, 0)
            }
            return try ServerLibrary.decodeSealed(try rows.bytes(0, 0), libraryID: libraryID).ops.first { $0.serverSeq == seq }?.opID.lowercased
        }
    }

    /// Starts an empty replica where PostgreSQL's history begins: the snapshot there, and the ids of
    /// the ops before it, read a batch at a time.
    private func start(_ replica: ServerLibrary, at state: State, _ pg: PostgresConnection) throws {
        let key = libraryID.lowercased
        let snapshot = try pg.execute("SELECT frame, state_digest FROM chronicle_snapshots WHERE library_id = $1 AND seq = $2",
                                      [key, String(state.historyBase)])
        guard snapshot.count == 1 else {
            throw ChronicleError(.invariantViolated, "PostgreSQL's history of library \(key) begins after seq \(state.historyBase), but holds no snapshot there.")
        }
        try replica.start(fromSnapshot: try snapshot.bytes(0, 0), at: state.historyBase, stateDigest: try snapshot.string(0, 1),
                          droppedAt: state.historyDroppedAt) { remember in
            var after: Int64 = 0
            while true {
                let rows = try pg.execute("""
                    SELECT op_id, server_seq, device_id FROM chronicle_dropped_ops
                    WHERE library_id = $1 AND server_seq > $2 AND server_seq <= $3 ORDER BY server_seq LIMIT 20000
                    """, [key, String(after), String(state.historyBase)])
                if rows.count == 0 { break }
                try remember(try (0..<rows.count).map {
                    ServerLibrary.DroppedOp(opID: try rows.string($0, 0), serverSeq: try rows.int($0, 1), deviceID: try rows.string($0, 2))
                })
                after = try rows.int(rows.count - 1, 1)
            }
        }
    }

    /// What PostgreSQL holds for library `id`; with `forUpdate`, the row is locked until the
    /// transaction ends (`FOR NO KEY UPDATE`: writes queue on it one at a time, while a seal,
    /// whose segment only refers to the row, goes on beside them).
    static func readState(_ id: UUID, _ pg: PostgresConnection, forUpdate: Bool) throws -> State {
        let rows = try pg.execute("""
            SELECT head, head_time, generation, incarnation, sealed_through, sealed_digest, history_base, history_dropped_at
            FROM chronicle_libraries WHERE library_id = $1
            """
                                  + (forUpdate ? " FOR NO KEY UPDATE" : ""), [id.lowercased])
        guard rows.count == 1 else {
            throw ProtocolError(404, .unknownLibrary, "The server has no library \(id.lowercased).")
        }
        guard let incarnation = UUID(text: try rows.string(0, 3)) else {
            throw ChronicleError(.invariantViolated, "Library \(id.lowercased) has a malformed incarnation in PostgreSQL.")
        }
        return State(head: try rows.int(0, 0), headTime: try rows.int(0, 1), generation: try rows.int(0, 2), incarnation: incarnation,
                     sealedThrough: try rows.int(0, 4), sealedDigest: try rows.string(0, 5), historyBase: try rows.int(0, 6),
                     historyDroppedAt: rows.isNull(0, 7) ? nil : try rows.int(0, 7))
    }

    // MARK: - Catching up

    /// Brings `replica` up to what PostgreSQL holds now.
    public func catchUp(_ replica: ServerLibrary) throws {
        do {
            try writing.withLock { count in
                count &+= 1
                try pool.withConnection { pg in try catchUp(replica, to: try Self.readState(libraryID, pg, forUpdate: false), pg) }
            }
        } catch let error as PostgresError where error.isUnavailable {
            throw counted(error)
        }
    }

    /// PostgreSQL unreachable: a 503 with a Retry-After; nothing was written.
    static func unavailable(_ error: PostgresError) -> ProtocolError {
        ProtocolError(503, .serverStoreUnavailable, "The server cannot reach its database; nothing was written. Try again shortly.",
                      detail: error.message, retryAfterSeconds: 2)
    }

    /// Ops are read by seq after the replica's head, from sealed segments and then the log;
    /// refused ops and devices by the generation that wrote them, after the one the replica records.
    private func catchUp(_ replica: ServerLibrary, to state: State, _ pg: PostgresConnection) throws {
        var state = state
        let known = try replica.replicaGeneration()
        if known == state.generation { return }
        var head = replica.localHead
        let startHead = head
        defer { counters.withLock { $0.catchUps += 1; $0.opsCaughtUp += Int(replica.localHead - startHead) } }
        guard known < state.generation, head <= state.head else {
            throw ChronicleError(.invariantViolated, "This server's replica of library \(libraryID.lowercased) is ahead of PostgreSQL (seq \(head), generation \(known); PostgreSQL: seq \(state.head), generation \(state.generation)). Restart the server to make the replica anew.")
        }
        let key = libraryID.lowercased
        if head < state.historyBase {
            guard head == 0 else {
                // Idle here past the horizon while another server dropped history beyond its head.
                behindHistory.withLock { $0 = true }
                throw ProtocolError(503, .replicaBehindHorizon, "This server's copy of library \(key) stopped at seq \(head), and the history it would catch up from now begins after seq \(state.historyBase) (retention horizon). It is being made anew from the snapshot there; nothing was written. Try again shortly.",
                                    retryAfterSeconds: 1)
            }
            try start(replica, at: state, pg)
            head = replica.localHead
        }
        while head < state.head {
            if head < state.sealedThrough {
                // Segments are never changed, so they are read without the row lock.
                let segments = try pg.execute("""
                    SELECT frame FROM chronicle_segments WHERE library_id = $1 AND last_seq > $2 AND first_seq <= $3
                    ORDER BY first_seq LIMIT 4
                    """, [key, String(head), String(state.sealedThrough)])
                guard segments.count > 0 else {
                    throw ChronicleError(.invariantViolated, "PostgreSQL has no sealed segment of library \(key) after seq \(head), though its segments reach \(state.sealedThrough) (history dropped past the retention horizon meanwhile?). Restart the server to make the replica anew.")
                }
                for row in 0..<segments.count {
                    try replica.replicate(sealed: try segments.bytes(row, 0), generation: known)
                }
                let moved = replica.localHead
                guard moved > head else {
                    throw ChronicleError(.invariantViolated, "PostgreSQL's sealed segments of library \(key) do not continue seq \(head).")
                }
                head = moved
                continue
            }
            let rows = try pg.execute("""
                SELECT \(Self.logColumns) FROM chronicle_log
                WHERE library_id = $1 AND server_seq > $2 AND server_seq <= $3 ORDER BY server_seq LIMIT \(Self.catchUpBatch)
                """, [key, String(head), String(state.head)])
            let firstSeq = rows.count == 0 ? nil : try rows.int(0, 0)
            if firstSeq != head + 1 {
                // Another server sealed these ops since the state was read (outside the row lock):
                // they are in segments now.
                let now = try Self.readState(libraryID, pg, forUpdate: false)
                guard now.sealedThrough > head else {
                    throw ChronicleError(.invariantViolated, "PostgreSQL's log of library \(key) has no op at seq \(head + 1), though its head is \(state.head).")
                }
                state.sealedThrough = now.sealedThrough
                continue
            }
            let ops = try (0..<rows.count).map { try op(rows, $0) }
            head = ops.last!.serverSeq!
            if head < state.head { try replica.replicate(ops: ops, rejected: [], devices: [], generation: known) }
            else { try replicateRest(ops, into: replica, after: known, upTo: state.generation, pg) }
        }
        if replica.localHead == state.head, try replica.replicaGeneration() != state.generation {
            try replicateRest([], into: replica, after: known, upTo: state.generation, pg)
        }
    }

    /// The last batch of a catch-up: its ops with the refused ops and devices of the generations caught up.
    private func replicateRest(_ ops: [Op], into replica: ServerLibrary, after known: Int64, upTo generation: Int64,
                               _ pg: PostgresConnection) throws {
        let key = libraryID.lowercased
        let bounds = [key, String(known), String(generation)]
        let refusedRows = try pg.execute("""
            SELECT op_id, device_id, device_seq, type, entity_id, code, message, rejected_at FROM chronicle_rejected_ops
            WHERE library_id = $1 AND generation > $2 AND generation <= $3 ORDER BY generation, op_id
            """, bounds)
        let rejected = try (0..<refusedRows.count).map { row in
            ServerLibrary.RejectedOp(opID: try refusedRows.string(row, 0), deviceID: try refusedRows.string(row, 1),
                                     deviceSeq: try refusedRows.int(row, 2), type: try refusedRows.string(row, 3),
                                     entityID: try refusedRows.string(row, 4), code: try refusedRows.string(row, 5),
                                     message: try refusedRows.string(row, 6), rejectedAt: try refusedRows.int(row, 7))
        }
        let deviceRows = try pg.execute("""
            SELECT device_id, last_device_seq FROM chronicle_devices WHERE library_id = $1 AND generation > $2 AND generation <= $3
            """, bounds)
        let devices = try (0..<deviceRows.count).map { (id: try deviceRows.string($0, 0), lastDeviceSeq: try deviceRows.int($0, 1)) }
        try replica.replicate(ops: ops, rejected: rejected, devices: devices, generation: generation)
    }

    static let catchUpBatch = 5_000
    /// The log's columns, named as in the SQLite log.
    static let logColumns = LogTables.logColumns

    private func op(_ rows: PostgresRows, _ row: Int) throws -> Op {
        func id(_ column: Int) throws -> UUID {
            guard let id = UUID(text: try rows.string(row, column)) else {
                throw ChronicleError(.invariantViolated, "PostgreSQL's log of library \(libraryID.lowercased) holds a malformed id in row \(row).")
            }
            return id
        }
        return Op(opID: try id(1), libraryID: libraryID, deviceID: try id(2), deviceSeq: try rows.int(row, 3),
                  type: try rows.string(row, 4), version: Int(try rows.int(row, 5)), entityID: try id(6),
                  payload: try CanonicalJSON.decodePayload(try rows.string(row, 7)), deviceTime: try rows.int(row, 8),
                  baseSeq: try rows.int(row, 9), serverSeq: try rows.int(row, 0), serverTime: try rows.int(row, 10))
    }

    // MARK: - Sealing

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
    private func drop(through base: Int64, _ replica: ServerLibrary, _ pg: PostgresConnection) throws {
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
    private func sealNext(_ replica: ServerLibrary, through target: Int64, _ pg: PostgresConnection) throws -> Bool {
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
    private func lockSealing(_ pg: PostgresConnection) throws -> State {
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

    // MARK: - Writes

    /// The code of a request refused because PostgreSQL could not be reached.

    /// The channel each committed write is announced on (`NOTIFY`, with the library's id), so the
    /// other processes answer their parked pulls.
    public static let channel = "chronicle_pushes"

    /// Orders one write (see `LibraryUpstream`), with the same answers and refusals as a server with
    /// its own file, across every process sharing the database. Serialization failures and
    /// deadlocks are tried again; PostgreSQL unreachable is a 503 with a Retry-After, and nothing
    /// was written.
    public func order(_ replica: ServerLibrary, _ write: ((ServerLibrary.PushWrites) throws -> Int64?) throws -> Void) throws
        -> ServerLibrary.PushWrites {
        do {
            return try writing.withLock { count in
                count &+= 1
                return try pool.withConnection { pg in
                    var attempt = 0
                    while true {
                        do {
                            return try orderOnce(replica, write, pg)
                        } catch let error as PostgresError where error.isRetryable && attempt < 3 {
                            attempt += 1
                        }
                    }
                }
            }
        } catch let error as PostgresError where error.isUnavailable {
            throw counted(error)
        }
    }

    /// Holds the library's row (`FOR NO KEY UPDATE`, as a write does) in a transaction, catches
    /// the replica up to what PostgreSQL holds under it, and runs `body`: no server sharing the
    /// database orders a write to the library until `body` returns. What `body` writes through
    /// this process's pool (the files collection's deletes) runs in that transaction, on the same
    /// connection (`PostgresPool.withPinnedConnection`), and commits with it.
    public func whileOrderWaits<T>(_ replica: ServerLibrary, _ body: () throws -> T) throws -> T {
        do {
            return try writing.withLock { _ in
                try pool.withPinnedConnection { pg in
                    try pg.transaction { pg in
                        let state = try Self.readState(libraryID, pg, forUpdate: true)
                        try catchUp(replica, to: state, pg)
                        return try body()
                    }
                }
            }
        } catch let error as PostgresError where error.isUnavailable {
            throw counted(error)
        }
    }

    private func orderOnce(_ replica: ServerLibrary, _ write: ((ServerLibrary.PushWrites) throws -> Int64?) throws -> Void,
                           _ pg: PostgresConnection) throws -> ServerLibrary.PushWrites {
        try pg.execute("BEGIN")
        var open = true
        defer { if open { _ = try? pg.execute("ROLLBACK") } }
        let state = try Self.readState(libraryID, pg, forUpdate: true)
        try catchUp(replica, to: state, pg)
        var failure: (any Error)?
        var committed: ServerLibrary.PushWrites?
        do {
            try write { writes in
                do {
                    let wrote = !writes.accepted.isEmpty || !writes.rejected.isEmpty || writes.device != nil
                    let generation = wrote ? state.generation + 1 : state.generation
                    if wrote {
                        counters.withLock { $0.writes += 1 }
                        try self.write(writes, generation: generation, over: state, pg)
                        try pg.execute("SELECT pg_notify($1, $2)", [Self.channel, self.libraryID.lowercased])
                    }
                    try pg.execute("COMMIT")
                    open = false
                    committed = writes
                    return generation
                } catch {
                    failure = error
                    throw error
                }
            }
        } catch {
            // PostgreSQL has the write, and the replica catches up on it: it stands.
            if let committed { return committed }
            throw failure ?? error
        }
        guard let committed else {
            throw ChronicleError(.invariantViolated, "A write to library \(libraryID.lowercased) ended without committing.")
        }
        return committed
    }

    private func write(_ writes: ServerLibrary.PushWrites, generation: Int64, over state: State, _ pg: PostgresConnection) throws {
        let key = libraryID.lowercased
        let stamp = String(generation)
        try Self.insertLog(writes.accepted[...], library: key, pg)
        for row in writes.rejected { try Self.insertRejected(row, library: key, generation: generation, pg) }
        if let device = writes.device {
            try Self.recordDevice(device.id, device.lastDeviceSeq, library: key, generation: generation, pg)
        }
        let last = writes.accepted.last
        let moved = try pg.execute("""
            UPDATE chronicle_libraries SET head = $2, head_time = $3, generation = $4
            WHERE library_id = $1 AND head = $5 AND generation = $6
            """, [key, String(last?.serverSeq ?? state.head), String(last?.serverTime ?? state.headTime), stamp,
                  String(state.head), String(state.generation)])
        guard moved.affected == 1 else {
            throw ChronicleError(.invariantViolated, "Library \(key) moved in PostgreSQL while its row was locked.")
        }
    }
}

extension PostgresLibrary {
    /// Appends confirmed `ops` (with their serverSeq and serverTime) to library `key`'s log, a
    /// thousand rows a statement.
    static func insertLog(_ ops: ArraySlice<Op>, library key: String, _ pg: PostgresConnection) throws {
        for chunk in Array(ops).chunks(of: 1_000) {
            var parameters: [String?] = []
            parameters.reserveCapacity(chunk.count * 12)
            var rows: [String] = []
            for op in chunk {
                let base = parameters.count
                rows.append("(" + (1...12).map { "$\(base + $0)" }.joined(separator: ", ") + ")")
                parameters += [key, String(op.serverSeq!), op.opID.lowercased, op.deviceID.lowercased, String(op.deviceSeq), op.type,
                               String(op.version), op.entityID.lowercased, CanonicalJSON.encode(op.payload), String(op.deviceTime),
                               String(op.baseSeq), String(op.serverTime!)]
            }
            try pg.execute("INSERT INTO chronicle_log(library_id, \(logColumns)) VALUES " + rows.joined(separator: ", "), parameters)
        }
    }

    /// Keeps a sealed segment's frame after the sealed prefix (the insert trigger checks that it
    /// continues it, chained to `previousDigest`).
    static func insertSegment(_ frame: [UInt8], first: Int64, last: Int64, digest: String, previousDigest: String, bodyBytes: Int,
                              library key: String, _ pg: PostgresConnection) throws {
        try pg.execute("""
            INSERT INTO chronicle_segments(library_id, first_seq, last_seq, op_count, frame, digest, previous_digest, body_bytes, created_at)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, (extract(epoch FROM clock_timestamp()) * 1000)::bigint)
            """, values: [.text(key), .text(String(first)), .text(String(last)), .text(String(last - first + 1)),
                          .bytes(frame), .text(digest), .text(previousDigest), .text(String(bodyBytes))])
    }

    /// Keeps a snapshot's frame at `seq` (one already there is kept as it is).
    static func insertSnapshot(_ frame: [UInt8], at seq: Int64, stateDigest: String, library key: String, _ pg: PostgresConnection) throws {
        let body = try LZ4Frame.decompress(frame, maxBytes: SnapshotCodec.Limits().maxDecodedBytes)
        try pg.execute("""
            INSERT INTO chronicle_snapshots(library_id, seq, frame, state_digest, body_bytes, created_at)
            VALUES ($1, $2, $3, $4, $5, (extract(epoch FROM clock_timestamp()) * 1000)::bigint) ON CONFLICT (library_id, seq) DO NOTHING
            """, values: [.text(key), .text(String(seq)), .bytes(frame), .text(stateDigest), .text(String(body.count))])
    }

    static func insertRejected(_ row: ServerLibrary.RejectedOp, library key: String, generation: Int64, _ pg: PostgresConnection) throws {
        try pg.execute("""
            INSERT INTO chronicle_rejected_ops(library_id, op_id, device_id, device_seq, type, entity_id, code, message, rejected_at, generation)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
            """, [key, row.opID, row.deviceID, String(row.deviceSeq), row.type, row.entityID, row.code, row.message,
                  String(row.rejectedAt), String(generation)])
    }

    static func recordDevice(_ device: String, _ lastDeviceSeq: Int64, library key: String, generation: Int64, _ pg: PostgresConnection) throws {
        try pg.execute("""
            INSERT INTO chronicle_devices(library_id, device_id, last_device_seq, generation) VALUES ($1, $2, $3, $4)
            ON CONFLICT (library_id, device_id) DO UPDATE SET last_device_seq = excluded.last_device_seq, generation = excluded.generation
            """, [key, device, String(lastDeviceSeq), String(generation)])
    }

    /// Keeps the ids of ops whose history is no longer in PostgreSQL (`chronicle_dropped_ops`), a
    /// thousand a statement.
    static func insertDropped(_ ops: [ServerLibrary.DroppedOp], library key: String, _ pg: PostgresConnection) throws {
        for chunk in ops.chunks(of: 1_000) {
            var parameters: [String?] = []
            var rows: [String] = []
            for op in chunk {
                let at = parameters.count
                rows.append("($1, $\(at + 2), $\(at + 3), $\(at + 4))")
                parameters += [op.opID.lowercased(), String(op.serverSeq), op.deviceID.lowercased()]
            }
            try pg.execute("INSERT INTO chronicle_dropped_ops(library_id, op_id, server_seq, device_id) VALUES " + rows.joined(separator: ", "),
                           [key] + parameters)
        }
    }
}

extension Array {
    func chunks(of size: Int) -> [ArraySlice<Element>] {
        stride(from: 0, to: count, by: size).map { self[$0..<Swift.min($0 + size, count)] }
    }
}
