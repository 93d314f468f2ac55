import ChronicleCore
import ChronicleStore
import Foundation
import ChronicleServerStore

/// Users, their libraries and devices' registrations in the PostgreSQL database that servers on
/// several machines share (from format 2, `Schemas/store/server-postgres-v2.md`), so that no server
/// keeps a file another one needs.
///
/// Each server caches the tokens it has checked. A transaction that changes a registration
/// (a revocation, a user removed, a device signing in again) sends `NOTIFY chronicle_accounts`
/// before it commits; every server `LISTEN`s on a connection of its own and drops its cache
/// when one comes. While that connection is down, nothing is cached: each token is read anew.
///
/// ```swift
/// let storage = try PostgresAccountsStorage(conninfo: "host=127.0.0.1 dbname=chronicle")
/// let accounts = Accounts(storage: storage)
/// try accounts.addUser("ada", password: "a long password", schema: .readItLater)
/// ```
public final class PostgresAccountsStorage: AccountsStorage {
    public static let channel = "chronicle_accounts"
    public let pool: PostgresPool
    private let listener: PostgresListener
    /// Moves with each notification, and with each check while the listener is not listening.
    private let changes = Locked<Int64>(0)

    public let tables = AccountsTables(users: "chronicle_users", devices: "chronicle_registrations",
                                       deletions: "chronicle_library_deletions", meta: "chronicle_meta",
                                       sessions: "chronicle_device_sessions")

    /// Connects, makes or upgrades the tables (`PostgresServerStore.setUp`), and starts listening.
    /// `listening` false (a command that checks no tokens): nothing is cached, no thread is started.
    public init(conninfo: String, poolSize: Int = 4, listening: Bool = true,
                statementTimeoutMilliseconds: Int? = PostgresServerStore.defaultStatementTimeoutMilliseconds) throws {
        pool = PostgresPool(conninfo, size: poolSize, statementTimeoutMilliseconds: statementTimeoutMilliseconds)
        try pool.withConnection { pg in try PostgresServerStore.setUp(pg) }
        let changes = self.changes
        listener = PostgresListener(conninfo: conninfo, channel: Self.channel) { _ in
            changes.withLock { $0 += 1 }
        }
        started = listening
        if listening { listener.start() }
    }

    private let started: Bool
    deinit { if started { listener.stop() } }

    public var label: String { PostgresServerStore.label(pool.conninfo) }

    private final class Session: AccountsSQL {
        let pg: PostgresConnection
        var wrote = false
        init(_ pg: PostgresConnection) { self.pg = pg }

        func rows(_ sql: String, _ arguments: [Value]) throws -> [AccountsRow] {
            let result = try run(sql, arguments)
            return (0..<result.count).map { row in AccountsRow((0..<result.columns).map { result.text(row, $0) }) }
        }

        func execute(_ sql: String, _ arguments: [Value]) throws -> Int {
            let changed = try run(sql, arguments).affected
            if changed > 0 { wrote = true }
            return changed
        }

        private func run(_ sql: String, _ arguments: [Value]) throws -> PostgresRows {
            do {
                return try pg.execute(PostgresAccountsStorage.numbered(sql), arguments.map(PostgresAccountsStorage.parameter))
            } catch {
                // Two servers adding the same user (or one device) at once: the second is told, as a lone server would.
                if error.sqlState == "23505" { throw ChronicleError(.entityExists, "That already exists: \(error.message).") }
                throw error
            }
        }

        /// Tells every server's listener that registrations may have changed, in the transaction.
        func notifyIfWritten() throws {
            if wrote { try pg.execute("SELECT pg_notify($1, '')", [PostgresAccountsStorage.channel]) }
        }
    }

    /// `?N` (SQLite's numbered parameters, as `Accounts` writes them) as `$N`.
    static func numbered(_ sql: String) -> String {
        sql.replacingOccurrences(of: #"\?([0-9]+)"#, with: "\\$$1", options: .regularExpression)
    }

    static func parameter(_ value: Value) -> String? {
        switch value {
        case .null: nil
        case .bool(let b): b ? "1" : "0"
        case .integer(let i): String(i)
        case .real(let d): String(d)
        case .text(let s): s
        }
    }

    public func read<T>(_ body: (any AccountsSQL) throws -> T) throws -> T {
        try pool.withConnection { pg in
            let session = Session(pg)
            let value = try body(session)
            try session.notifyIfWritten()
            return value
        }
    }

    public func transaction<T>(_ body: (any AccountsSQL) throws -> T) throws -> T {
        try pool.withConnection { pg in
            try pg.transaction { pg in
                let session = Session(pg)
                let value = try body(session)
                try session.notifyIfWritten()
                return value
            }
        }
    }

    /// No `NOTIFY`: an access token given revokes nothing, and every server's cache stays.
    public func quietTransaction<T>(_ body: (any AccountsSQL) throws -> T) throws -> T {
        try pool.withConnection { pg in try pg.transaction { pg in try body(Session(pg)) } }
    }

    public func changeCount() throws -> Int64 {
        changes.withLock { count in
            if !listener.isListening { count += 1 }
            return count
        }
    }

    /// PostgreSQL checks its own pages; the rows hold together by their constraints.
    public func integrityProblems() throws -> [String] {
        try read { sql in _ = try sql.rows("SELECT 1", []) }
        return []
    }

    public func unavailable(_ error: any Error) -> ProtocolError? {
        guard let error = error as? PostgresError, error.isUnavailable else { return nil }
        return PostgresLibrary.unavailable(error)
    }

    /// Every library PostgreSQL orders (made on first use), with its schema.
    public func libraries() throws -> [(id: UUID, schemaName: String)] {
        try pool.withConnection { pg in
            let rows = try pg.execute("SELECT library_id, schema_name FROM chronicle_libraries ORDER BY library_id")
            var found: [(id: UUID, schemaName: String)] = []
            for row in 0..<rows.count {
                if let id = UUID(text: try rows.string(row, 0)) { found.append((id, try rows.string(row, 1))) }
            }
            return found
        }
    }
}
