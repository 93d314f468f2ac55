import ChronicleCore
import ChronicleStore
import Foundation

/// One library whose order lives in PostgreSQL: the upstream its replica in this process
/// follows (see `PostgresServerStore`).
///
/// A write (a push, a server op) locks the library's row in PostgreSQL (`FOR UPDATE`), catches
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

    /// What PostgreSQL holds for the library: its head, and a generation that moves with every
    /// write.
    struct State {
        var head: Int64
        var headTime: Int64
        var generation: Int64
        var incarnation: UUID
    }

    /// The store's counters (`/metrics`), shared by its libraries.
    let counters: Locked<PostgresCounters>

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

    /// The op id PostgreSQL holds at `seq`.
    func opID(at seq: Int64) throws -> String? {
        try pool.withConnection { pg in
            try pg.execute("SELECT op_id FROM chronicle_log WHERE library_id = $1 AND server_seq = $2", [libraryID.lowercased, String(seq)]).text(0, 0)
        }
    }

    static func readState(_ id: UUID, _ pg: PostgresConnection, forUpdate: Bool) throws -> State {
        let rows = try pg.execute("SELECT head, head_time, generation, incarnation FROM chronicle_libraries WHERE library_id = $1"
                                  + (forUpdate ? " FOR UPDATE" : ""), [id.lowercased])
        guard rows.count == 1 else {
            throw ProtocolError(404, "unknown_library", "The server has no library \(id.lowercased).")
        }
        guard let incarnation = UUID(text: try rows.string(0, 3)) else {
            throw ChronicleError(.invariantViolated, "Library \(id.lowercased) has a malformed incarnation in PostgreSQL.")
        }
        return State(head: try rows.int(0, 0), headTime: try rows.int(0, 1), generation: try rows.int(0, 2), incarnation: incarnation)
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
        ProtocolError(503, unavailableCode, "The server cannot reach its database (\(error.message)); nothing was written. Try again shortly.",
                      retryAfterSeconds: 2)
    }

    /// Ops are read by seq after the replica's head; refused ops and devices by the generation
    /// that wrote them, after the one the replica records.
    private func catchUp(_ replica: ServerLibrary, to state: State, _ pg: PostgresConnection) throws {
        let known = try replica.replicaGeneration()
        if known == state.generation { return }
        var head = replica.localHead
        let startHead = head
        defer { counters.withLock { $0.catchUps += 1; $0.opsCaughtUp += Int(replica.localHead - startHead) } }
        guard known < state.generation, head <= state.head else {
            throw ChronicleError(.invariantViolated, "This server's replica of library \(libraryID.lowercased) is ahead of PostgreSQL (seq \(head), generation \(known); PostgreSQL: seq \(state.head), generation \(state.generation)). Restart the server to make the replica anew.")
        }
        let key = libraryID.lowercased
        while head < state.head {
            let rows = try pg.execute("""
                SELECT \(Self.logColumns) FROM chronicle_log
                WHERE library_id = $1 AND server_seq > $2 AND server_seq <= $3 ORDER BY server_seq LIMIT \(Self.catchUpBatch)
                """, [key, String(head), String(state.head)])
            guard rows.count > 0 else {
                throw ChronicleError(.invariantViolated, "PostgreSQL's log of library \(key) has no op after seq \(head), though its head is \(state.head).")
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
    static let logColumns = DeviceStore.logColumns

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

    // MARK: - Writes

    /// The code of a request refused because PostgreSQL could not be reached.
    public static let unavailableCode = "server_store_unavailable"

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
        for chunk in writes.accepted.chunks(of: 1_000) {
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
            try pg.execute("INSERT INTO chronicle_log(library_id, \(Self.logColumns)) VALUES " + rows.joined(separator: ", "), parameters)
        }
        for row in writes.rejected {
            try pg.execute("""
                INSERT INTO chronicle_rejected_ops(library_id, op_id, device_id, device_seq, type, entity_id, code, message, rejected_at, generation)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
                """, [key, row.opID, row.deviceID, String(row.deviceSeq), row.type, row.entityID, row.code, row.message,
                      String(row.rejectedAt), stamp])
        }
        if let device = writes.device {
            try pg.execute("""
                INSERT INTO chronicle_devices(library_id, device_id, last_device_seq, generation) VALUES ($1, $2, $3, $4)
                ON CONFLICT (library_id, device_id) DO UPDATE SET last_device_seq = excluded.last_device_seq, generation = excluded.generation
                """, [key, device.id, String(device.lastDeviceSeq), stamp])
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

extension Array {
    func chunks(of size: Int) -> [ArraySlice<Element>] {
        stride(from: 0, to: count, by: size).map { self[$0..<Swift.min($0 + size, count)] }
    }
}
