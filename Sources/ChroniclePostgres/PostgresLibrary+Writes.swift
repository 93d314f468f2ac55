import ChronicleCore
import ChronicleStore
import Foundation
import ChronicleServerStore

// Writes ordered in PostgreSQL first, then applied to the replica.
extension PostgresLibrary {
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

    func orderOnce(_ replica: ServerLibrary, _ write: ((ServerLibrary.PushWrites) throws -> Int64?) throws -> Void,
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

    func write(_ writes: ServerLibrary.PushWrites, generation: Int64, over state: State, _ pg: PostgresConnection) throws {
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
