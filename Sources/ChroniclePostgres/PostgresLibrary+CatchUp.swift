import ChronicleCore
import ChronicleStore
import Foundation
import ChronicleServerStore

// Catching the local replica up with the order kept in PostgreSQL.
extension PostgresLibrary {
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
    func catchUp(_ replica: ServerLibrary, to state: State, _ pg: PostgresConnection) throws {
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
    func replicateRest(_ ops: [Op], into replica: ServerLibrary, after known: Int64, upTo generation: Int64,
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

    func op(_ rows: PostgresRows, _ row: Int) throws -> Op {
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
}
