import ChronicleCore
import ChronicleStore
import Foundation

/// One row an accounts query returned, each column as text (nil: NULL).
public struct AccountsRow: Sendable {
    public var columns: [String?]
    public init(_ columns: [String?]) { self.columns = columns }

    public func text(_ index: Int) -> String { columns[index] ?? "" }
    public func int(_ index: Int) -> Int64 { columns[index].flatMap { Int64($0) } ?? 0 }
}

/// The statements `Accounts` runs inside one `AccountsStorage.read` or `transaction`. Arguments
/// bind to `?1`, `?2`…; the SQL is the part SQLite and PostgreSQL share (`ON CONFLICT`, no
/// `OR IGNORE`), with table names from `AccountsTables`.
public protocol AccountsSQL {
    func rows(_ sql: String, _ arguments: [Value]) throws -> [AccountsRow]
    /// Runs a statement; returns how many rows it changed.
    @discardableResult func execute(_ sql: String, _ arguments: [Value]) throws -> Int
}

extension AccountsSQL {
    package func rows(_ sql: String) throws -> [AccountsRow] { try rows(sql, []) }
    package func exists(_ sql: String, _ arguments: [Value]) throws -> Bool { try !rows(sql, arguments).isEmpty }
    package func text(_ sql: String, _ arguments: [Value]) throws -> String? { try rows(sql, arguments).first?.columns.first ?? nil }
}

/// The names of the accounts' tables where they are kept.
public struct AccountsTables: Sendable {
    public var users: String
    public var devices: String
    public var deletions: String
    public var meta: String
    /// Access tokens given (`Accounts+Sessions.swift`).
    public var sessions: String

    /// `server.sqlite`'s (`Schemas/store/server-v1.md`).
    public static let sqlite = AccountsTables(users: "users", devices: "devices", deletions: "library_deletions", meta: "chronicle_meta",
                                              sessions: "device_sessions")

    public init(users: String, devices: String, deletions: String, meta: String, sessions: String) {
        (self.users, self.devices, self.deletions, self.meta, self.sessions) = (users, devices, deletions, meta, sessions)
    }
}

/// Where users, their libraries and devices' registrations are kept: a data directory's
/// `server.sqlite` (`SQLiteAccountsStorage`), or the PostgreSQL database that servers on several
/// machines share (`ChroniclePostgres.PostgresAccountsStorage`).
public protocol AccountsStorage: Sendable {
    /// Where they are, for messages: the file's path, or the database.
    var label: String { get }
    var tables: AccountsTables { get }
    /// Runs `body`'s statements one by one, each seeing what was committed before it.
    @discardableResult func read<T>(_ body: (any AccountsSQL) throws -> T) throws -> T
    /// Runs `body` in one transaction: committed if it returns, rolled back if it throws.
    @discardableResult func transaction<T>(_ body: (any AccountsSQL) throws -> T) throws -> T
    /// `transaction`, for writes that revoke nothing (an access token given, old ones deleted):
    /// other processes need not drop their token caches for them.
    @discardableResult func quietTransaction<T>(_ body: (any AccountsSQL) throws -> T) throws -> T
    /// A number that changes once another process may have changed a device's registration: the
    /// token cache is dropped when it does. Commits of this process's own `Accounts` need not
    /// change it (they drop the cache themselves). Called on every request: cheap, no query.
    func changeCount() throws -> Int64
    /// What a check of the storage itself finds wrong (SQLite's integrity and foreign-key checks).
    func integrityProblems() throws -> [String]
    /// The answer for a device while the storage fails with `error`, where it is not a 500: a
    /// damaged file, an unreachable database. Nil: the error says nothing of the kind.
    func unavailable(_ error: any Error) -> ProtocolError?
}

extension AccountsStorage {
    public func quietTransaction<T>(_ body: (any AccountsSQL) throws -> T) throws -> T { try transaction(body) }

    /// Copies the users, device registrations and pending deletions of `storage` into this
    /// storage, in one transaction: a data directory's `server.sqlite` into PostgreSQL (`serve
    /// --postgres`, `server move-to-postgres`), or PostgreSQL's into a backup's `server.sqlite`
    /// (`server backup --postgres`). Rows already here are kept as they are, so copying twice
    /// (two servers starting at once) changes nothing. Returns how many users and registrations
    /// were new.
    @discardableResult
    public func copy(from storage: any AccountsStorage) throws -> (users: Int, devices: Int) {
        let source = storage.tables
        let (users, devices, deletions) = try storage.read { sql in
            (try sql.rows("SELECT name, password_hash, library_id, schema_name, created_at FROM \(source.users)", []),
             try sql.rows("SELECT device_id, user_name, library_id, token_hash, created_at FROM \(source.devices)", []),
             try sql.rows("SELECT library_id, requested_at FROM \(source.deletions)", []))
        }
        return try transaction { sql in
            var copied = (users: 0, devices: 0)
            for row in users {
                copied.users += try sql.execute("""
                    INSERT INTO \(tables.users)(name, password_hash, library_id, schema_name, created_at) VALUES (?1, ?2, ?3, ?4, ?5)
                    ON CONFLICT DO NOTHING
                    """, [.text(row.text(0)), .text(row.text(1)), .text(row.text(2)), .text(row.text(3)), .integer(row.int(4))])
            }
            for row in devices {
                copied.devices += try sql.execute("""
                    INSERT INTO \(tables.devices)(device_id, user_name, library_id, token_hash, created_at) VALUES (?1, ?2, ?3, ?4, ?5)
                    ON CONFLICT DO NOTHING
                    """, [.text(row.text(0)), .text(row.text(1)), .text(row.text(2)), .text(row.text(3)), .integer(row.int(4))])
            }
            for row in deletions {
                try sql.execute("INSERT INTO \(tables.deletions)(library_id, requested_at) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
                                [.text(row.text(0)), .integer(row.int(1))])
            }
            return copied
        }
    }
}

/// The accounts in a SQLite file, `<data>/server.sqlite` (`Schemas/store/server-v1.md`), on one
/// connection under a lock. Another process's commit (`chronicle server revoke`) changes the
/// file's `PRAGMA data_version`.
public final class SQLiteAccountsStorage: AccountsStorage {
    /// The code of a server whose accounts file cannot be read.

    /// The error for an accounts file SQLite cannot read, or whose rows do not parse: the
    /// operator salvages it (`chronicle server salvage --accounts`) or restores a backup.
    public static func damaged(_ path: String, _ detail: String) -> ChronicleError {
        let directory = (path as NSString).deletingLastPathComponent
        return ChronicleError(.storeDamaged, "The server's accounts file \(path) (users, their libraries, devices' tokens) is damaged: \(detail). "
                              + "Nothing more was written to it. Stop the server and run `chronicle server salvage --data \(directory) --accounts` "
                              + "to keep what can still be read, or restore the data directory from a backup (`chronicle server backup`).")
    }

    /// `error` as `damaged` where SQLite found the file damaged; otherwise as it is.
    package static func damagedOr(_ error: any Error, _ path: String) -> any Error {
        guard let sqlite = error as? SQLiteError, sqlite.isCorrupt else { return error }
        return damaged(path, "SQLite cannot read part of it (\(sqlite.message))")
    }

    public let path: String
    let db: Locked<Database>
    public var label: String { path }
    public var tables: AccountsTables { .sqlite }

    package static let formatVersion: Int64 = 1
    package static let statements = [
        "CREATE TABLE chronicle_meta (key TEXT PRIMARY KEY NOT NULL, value) WITHOUT ROWID",
        """
        CREATE TABLE users (
          name TEXT PRIMARY KEY NOT NULL,
          password_hash TEXT NOT NULL,
          library_id TEXT NOT NULL UNIQUE,
          schema_name TEXT NOT NULL,
          created_at INTEGER NOT NULL
        ) WITHOUT ROWID
        """,
        """
        CREATE TABLE devices (
          device_id TEXT PRIMARY KEY NOT NULL,
          user_name TEXT NOT NULL REFERENCES users(name),
          library_id TEXT NOT NULL,
          token_hash TEXT NOT NULL UNIQUE,
          created_at INTEGER NOT NULL
        ) WITHOUT ROWID
        """,
    ] + deletionStatements

    /// Libraries whose file is to be deleted once no request holds it (`Accounts+Deletions.swift`).
    /// Added to format 1 as it stands: a build from before never reads the table, and needs
    /// nothing from it (it never opens a library no user owns), so the file stays readable by it.
    static let deletionStatements = [
        """
        CREATE TABLE library_deletions (
          library_id TEXT PRIMARY KEY NOT NULL,
          requested_at INTEGER NOT NULL
        ) WITHOUT ROWID
        """,
    ]

    /// Access tokens given (`Accounts+Sessions.swift`): their SHA-256, never the token. Added within
    /// format 1 as `library_deletions` was: a build from before gives no access tokens, and never
    /// reads the table.
    static let sessionStatements = [
        """
        CREATE TABLE device_sessions (
          token_hash TEXT PRIMARY KEY NOT NULL,
          device_id TEXT NOT NULL,
          device_token_hash TEXT NOT NULL,
          expires_at INTEGER NOT NULL
        ) WITHOUT ROWID
        """,
        "CREATE INDEX device_sessions_by_device ON device_sessions(device_id, expires_at)",
        "CREATE INDEX device_sessions_by_expiry ON device_sessions(expires_at)",
    ]

    /// The accounts file at `path`, made if missing; one of a newer format is refused untouched.
    public init(path: String) throws {
        self.path = path
        do {
            let database = try Database(path: path)
            if try database.scalarInt("SELECT count(*) FROM sqlite_master WHERE name = 'chronicle_meta'") == 0 {
                try database.transaction { db in
                    for statement in Self.statements + Self.sessionStatements { try db.execute(statement) }
                    try db.execute("INSERT INTO chronicle_meta(key, value) VALUES ('format_version', ?1), ('kind', 'server')",
                                   [.integer(Self.formatVersion)])
                }
            } else if let format = try database.scalarInt("SELECT value FROM chronicle_meta WHERE key = 'format_version'"),
                      format > Self.formatVersion {
                throw ChronicleError(.futureStoreVersion, "\(path) uses server format v\(format), but this build reads up to v\(Self.formatVersion). Update Chronicle; the file was left untouched.")
            } else {
                // Tables added within format 1, made where missing.
                for (table, statements) in [("library_deletions", Self.deletionStatements), ("device_sessions", Self.sessionStatements)] {
                    let missing = "SELECT count(*) FROM sqlite_master WHERE name = '\(table)'"
                    guard try database.scalarInt(missing) == 0 else { continue }
                    try database.transaction { db in
                        if try db.scalarInt(missing) == 0 { for statement in statements { try db.execute(statement) } }
                    }
                }
            }
            db = Locked(database)
        } catch {
            throw SQLiteAccountsStorage.damagedOr(error, path)
        }
    }

    private struct Session: AccountsSQL {
        let db: Database
        func rows(_ sql: String, _ arguments: [Value]) throws -> [AccountsRow] {
            try db.query(sql, arguments) { row in AccountsRow((0..<row.columnCount).map { row.optionalText($0) }) }
        }
        func execute(_ sql: String, _ arguments: [Value]) throws -> Int {
            try db.execute(sql, arguments)
            return db.changes
        }
    }

    /// Runs `body` on the connection, under its lock; SQLite finding the file damaged is `SQLiteAccountsStorage.damaged`.
    private func locked<T>(_ body: (Database) throws -> T) throws -> T {
        do {
            return try db.withLock { try body($0) }
        } catch {
            throw SQLiteAccountsStorage.damagedOr(error, path)
        }
    }

    public func read<T>(_ body: (any AccountsSQL) throws -> T) throws -> T {
        try locked { try body(Session(db: $0)) }
    }

    public func transaction<T>(_ body: (any AccountsSQL) throws -> T) throws -> T {
        try locked { db in try db.transaction { try body(Session(db: $0)) } }
    }

    public func changeCount() throws -> Int64 {
        try locked { db in try db.scalarInt("PRAGMA data_version") ?? 0 }
    }

    public func integrityProblems() throws -> [String] {
        try read { sql in
            try sql.rows("PRAGMA integrity_check(20)").map { $0.text(0) }.filter { $0 != "ok" }
                + sql.rows("PRAGMA foreign_key_check").map { "a row of \($0.text(0)) names a row of \($0.text(2)) that is missing" }
        }
    }

    public func unavailable(_ error: any Error) -> ProtocolError? {
        guard let error = error as? ChronicleError, error.code == .storeDamaged else { return nil }
        return ProtocolError(503, ProtocolError.Code.accountsDamaged,
                             "The server's accounts (users, devices, tokens) cannot be read: its file is damaged. Nothing was written. "
                             + "The server's operator salvages them (`chronicle server salvage --accounts`) or restores a backup; try again later.",
                             retryAfterSeconds: 300)
    }
}
