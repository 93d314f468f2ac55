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
    let writing = Locked<Int>(0)

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
    let published = Locked<Int64>(0)
    /// Where PostgreSQL's history was last seen to begin: a replica whose history begins no later
    /// has nothing to drop there.
    let publishedBase = Locked<Int64>(0)

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
    func start(_ replica: ServerLibrary, at state: State, _ pg: PostgresConnection) throws {
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
