import ChronicleCore
import ChronicleStore
import Foundation

/// One library whose order lives in PostgreSQL, served by this process through its replica
/// (see `PostgresServerStore`).
///
/// A push locks the library's row in PostgreSQL (`FOR UPDATE`), catches the replica up with
/// what other processes committed, answers the batch on the replica exactly as a server with
/// its own file does, writes what it decided to PostgreSQL and commits there, and only then
/// commits the replica. A process that dies between the two commits leaves a replica behind
/// PostgreSQL, never ahead: the next push or pull catches it up.
public final class PostgresLibrary: Sendable {
    public let libraryID: UUID
    /// This process's copy: the log pulls read and the projection verdicts read.
    public let replica: ServerLibrary
    let pool: PostgresPool
    /// Orders this process's catch-ups and pushes on the replica.
    private let writing = Locked<Void>(())

    /// What PostgreSQL holds for the library: its head, and a generation that moves with every
    /// push that wrote something.
    struct State {
        var head: Int64
        var headTime: Int64
        var generation: Int64
        var incarnation: UUID
    }

    /// Answered by every process alike: PostgreSQL's, which each replica takes when it is made.
    public var incarnation: UUID { replica.incarnation }

    private init(libraryID: UUID, replica: ServerLibrary, pool: PostgresPool) {
        self.libraryID = libraryID
        self.replica = replica
        self.pool = pool
    }

    static func open(_ id: UUID, store: PostgresServerStore) throws -> PostgresLibrary {
        let key = id.lowercased
        let (state, opAtReplicaHead): (State, (Int64) throws -> String?) = try store.pool.withConnection { pg in
            try pg.execute("""
                INSERT INTO chronicle_libraries(library_id, incarnation, schema_name, created_at) VALUES ($1, $2, $3, $4)
                ON CONFLICT (library_id) DO NOTHING
                """, [key, UUID().lowercased, store.schema.name, String(store.clock.nowMilliseconds())])
            let state = try readState(id, pg, forUpdate: false)
            let pool = store.pool
            return (state, { seq in
                try pool.withConnection { pg in
                    try pg.execute("SELECT op_id FROM chronicle_log WHERE library_id = $1 AND server_seq = $2", [key, String(seq)]).text(0, 0)
                }
            })
        }
        let path = store.replicaPath(id)
        func make() throws -> ServerLibrary {
            try ServerLibrary.openOrCreate(at: path, libraryID: id, schema: store.schema, clock: store.clock, incarnation: state.incarnation)
        }
        // A replica of another history (another database, or this one restored from a backup) is
        // made anew; so is one that cannot be read.
        var replica = try? make()
        if let existing = replica {
            let head = existing.head
            let same = existing.incarnation == state.incarnation && head <= state.head
                && (try? existing.replicaGeneration()).map { $0 <= state.generation } == true
                && (head == 0 || (try? existing.pull(after: head - 1, limit: 1).ops.first?.opID.lowercased) == (try? opAtReplicaHead(head)))
            if !same { replica = nil }
        }
        if replica == nil {
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
            replica = try make()
        }
        let library = PostgresLibrary(libraryID: id, replica: replica!, pool: store.pool)
        try library.catchUp()
        return library
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

    /// Brings the replica up to what PostgreSQL holds now.
    public func catchUp() throws {
        try writing.withLock { _ in
            try pool.withConnection { pg in try catchUp(to: try Self.readState(libraryID, pg, forUpdate: false), pg) }
        }
    }

    /// Ops are read by seq after the replica's head; refused ops and devices by the generation
    /// that wrote them, after the one the replica records.
    private func catchUp(to state: State, _ pg: PostgresConnection) throws {
        let known = try replica.replicaGeneration()
        if known == state.generation { return }
        var head = replica.head
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
            else { try replicateRest(ops, after: known, upTo: state.generation, pg) }
        }
        if replica.head == state.head, try replica.replicaGeneration() != state.generation {
            try replicateRest([], after: known, upTo: state.generation, pg)
        }
    }

    /// The last batch of a catch-up: its ops with the refused ops and devices of the generations caught up.
    private func replicateRest(_ ops: [Op], after known: Int64, upTo generation: Int64, _ pg: PostgresConnection) throws {
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
    static let logColumns = "server_seq, op_id, device_id, device_seq, type, version, entity_id, payload, device_time, base_seq, server_time"

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

    // MARK: - Push, pull, verdicts

    /// Orders a device's batch, with the same answers and refusals as `ServerLibrary.push`, across
    /// every process sharing the database. PostgreSQL unreachable is a 503 with a Retry-After:
    /// nothing was written, and the device sends the batch again.
    public func push(_ ops: [Op], from device: UUID) throws(ProtocolError) -> PushResponse {
        do {
            return try writing.withLock { _ in
                try pool.withConnection { pg in
                    var attempt = 0
                    while true {
                        do {
                            return try pushOnce(ops, from: device, pg)
                        } catch let error as PostgresError where error.isRetryable && attempt < 3 {
                            attempt += 1
                        }
                    }
                }
            }
        } catch let error as ProtocolError {
            throw error
        } catch let error as PostgresError where error.isConnectionFailure {
            throw ProtocolError(503, Self.unavailableCode, "The server cannot reach its database (\(error.message)); nothing was written. Try again shortly.",
                                retryAfterSeconds: 2)
        } catch {
            throw ProtocolError.serverStore("The server could not write the batch", library: libraryID, error)
        }
    }

    /// The code of a request refused because PostgreSQL could not be reached.
    public static let unavailableCode = "server_store_unavailable"

    private func pushOnce(_ ops: [Op], from device: UUID, _ pg: PostgresConnection) throws -> PushResponse {
        try pg.execute("BEGIN")
        var open = true
        defer { if open { _ = try? pg.execute("ROLLBACK") } }
        let state = try Self.readState(libraryID, pg, forUpdate: true)
        try catchUp(to: state, pg)
        var failure: (any Error)?
        var committed: PushResponse?
        do {
            return try replica.push(ops, from: device) { writes in
                do {
                    let wrote = !writes.accepted.isEmpty || !writes.rejected.isEmpty || writes.device != nil
                    let generation = wrote ? state.generation + 1 : state.generation
                    if wrote { try self.write(writes, generation: generation, over: state, pg) }
                    try pg.execute("COMMIT")
                    open = false
                    committed = writes.response
                    return generation
                } catch {
                    failure = error
                    throw error
                }
            }
        } catch {
            // PostgreSQL has the batch, and the replica will catch up on it: the answer stands.
            if let committed { return committed }
            throw failure ?? error
        }
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

    /// Confirmed ops after `cursor`, as `ServerLibrary.pull` gives them, after catching up.
    public func pull(after cursor: Int64, limit: Int, alignToSegments: Bool = false) throws
        -> (ops: [Op], head: Int64, encoded: SegmentBytes?, afterOpID: UUID?) {
        try catchUp()
        return try replica.pull(after: cursor, limit: limit, alignToSegments: alignToSegments)
    }

    /// The server's state of one entity, after catching up.
    public func verdict(_ entity: UUID) throws -> Verdict {
        try catchUp()
        return try replica.verdict(entity)
    }

    /// PostgreSQL's head for the library.
    public func head() throws -> Int64 {
        try pool.withConnection { pg in try Self.readState(libraryID, pg, forUpdate: false).head }
    }
}

extension Array {
    func chunks(of size: Int) -> [ArraySlice<Element>] {
        stride(from: 0, to: count, by: size).map { self[$0..<Swift.min($0 + size, count)] }
    }
}
