import ChronicleCore
import ChronicleStore
import Foundation

/// Who a bearer token belongs to.
public struct DeviceIdentity: Sendable, Equatable {
    public var deviceID: UUID
    public var libraryID: UUID
    public var user: String
}

/// A user and the library they own.
public struct UserRecord: Sendable, Equatable {
    public var name: String
    public var libraryID: UUID
    public var schemaName: String
}

/// Users, their libraries and registered devices, in `<data>/server.sqlite`
/// (`Schemas/store/server-v1.md`). Passwords are kept as scrypt hashes and
/// tokens as SHA-256 hashes: the file never holds a secret a thief could replay.
public final class Accounts: Sendable {
    public let path: String
    let db: Locked<Database>
    let clock: any ChronicleClock
    /// token hash → identity; tokens are checked on every request.
    let tokenCache: Locked<[String: DeviceIdentity]>
    /// The file's `PRAGMA data_version` when `tokenCache` was last known good: it changes when
    /// another process (`chronicle server revoke`) commits to the file, and the cache is dropped.
    private let cachedVersion = Locked<Int64>(-1)

    static let formatVersion: Int64 = 1
    static let statements = [
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

    public convenience init(dataDirectory: String, clock: any ChronicleClock = SystemClock()) throws {
        try FileManager.default.createDirectory(atPath: dataDirectory, withIntermediateDirectories: true)
        try self.init(path: (dataDirectory as NSString).appendingPathComponent("server.sqlite"), clock: clock)
    }

    /// The accounts file at `path` (created if missing): a data directory's `server.sqlite`, or a
    /// salvage's new copy of it.
    init(path: String, clock: any ChronicleClock = SystemClock()) throws {
        self.path = path
        do {
            let database = try Database(path: path)
            if try database.scalarInt("SELECT count(*) FROM sqlite_master WHERE name = 'chronicle_meta'") == 0 {
                try database.transaction { db in
                    for statement in Self.statements { try db.execute(statement) }
                    try db.execute("INSERT INTO chronicle_meta(key, value) VALUES ('format_version', ?1), ('kind', 'server')",
                                   [.integer(Self.formatVersion)])
                }
            } else if let format = try database.scalarInt("SELECT value FROM chronicle_meta WHERE key = 'format_version'"),
                      format > Self.formatVersion {
                throw ChronicleError(.futureStoreVersion, "\(path) uses server format v\(format), but this build reads up to v\(Self.formatVersion). Update Chronicle; the file was left untouched.")
            } else if try database.scalarInt("SELECT count(*) FROM sqlite_master WHERE name = 'library_deletions'") == 0 {
                try database.transaction { db in
                    if try db.scalarInt("SELECT count(*) FROM sqlite_master WHERE name = 'library_deletions'") == 0 {
                        for statement in Self.deletionStatements { try db.execute(statement) }
                    }
                }
            }
            db = Locked(database)
        } catch {
            throw Self.damagedOr(error, path)
        }
        self.clock = clock
        tokenCache = Locked([:])
    }

    /// The code of a server whose accounts file cannot be read.
    public static let damagedCode = "accounts_damaged"

    /// The error for an accounts file SQLite cannot read, or whose rows do not parse: the
    /// operator salvages it (`chronicle server salvage --accounts`) or restores a backup.
    public static func damaged(_ path: String, _ detail: String) -> ChronicleError {
        let directory = (path as NSString).deletingLastPathComponent
        return ChronicleError(.storeDamaged, "The server's accounts file \(path) (users, their libraries, devices' tokens) is damaged: \(detail). "
                              + "Nothing more was written to it. Stop the server and run `chronicle server salvage --data \(directory) --accounts` "
                              + "to keep what can still be read, or restore the data directory from a backup (`chronicle server backup`).")
    }

    /// `error` as `damaged` where SQLite found the file damaged; otherwise as it is.
    static func damagedOr(_ error: any Error, _ path: String) -> any Error {
        guard let sqlite = error as? SQLiteError, sqlite.isCorrupt else { return error }
        return damaged(path, "SQLite cannot read part of it (\(sqlite.message))")
    }

    /// What a device is answered while the accounts cannot be read: 503 with a Retry-After, as
    /// for a damaged library; devices keep what they hold and try again.
    static func unavailable(_ error: any Error, _ what: String) -> ProtocolError {
        if let error = error as? ChronicleError, error.code == .storeDamaged {
            return ProtocolError(503, damagedCode,
                                 "The server's accounts (users, devices, tokens) cannot be read: its file is damaged. Nothing was written. "
                                 + "The server's operator salvages them (`chronicle server salvage --accounts`) or restores a backup; try again later.",
                                 retryAfterSeconds: 300)
        }
        return ProtocolError(500, "server_store", "\(what): \(error)")
    }

    /// Runs `body` on the file; SQLite finding it damaged is `damaged`.
    func reading<T>(_ body: (Database) throws -> T) throws -> T {
        do {
            return try db.withLock { try body($0) }
        } catch {
            throw Self.damagedOr(error, path)
        }
    }

    /// An id read from the file; one that does not parse is damage.
    func id(_ text: String, _ what: String) throws -> UUID {
        guard let id = UUID(text: text) else { throw Self.damaged(path, "\(what) '\(text)' is not an id") }
        return id
    }

    /// A user read from columns 0–2 of `row` (name, library_id, schema_name).
    func userRecord(_ row: Row) throws -> UserRecord {
        UserRecord(name: row.text(0), libraryID: try id(row.text(1), "user \(row.text(0))'s library id"), schemaName: row.text(2))
    }

    /// Valid user names: 1–64 of a–z, 0–9, '.', '_', '-'.
    public static func isValidUserName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 64 && name.utf8.allSatisfy { c in
            (c >= 0x61 && c <= 0x7A) || (c >= 0x30 && c <= 0x39) || c == 0x2E || c == 0x5F || c == 0x2D
        }
    }

    /// Adds a user with a new, empty library.
    public func addUser(_ name: String, password: String, schema: Schema, libraryID: UUID? = nil) throws -> UserRecord {
        let libraryID = libraryID ?? SystemIDGenerator(clock: clock).makeUUID()
        guard Self.isValidUserName(name) else {
            throw ChronicleError(.invalidValue, "A user name is 1 to 64 characters of a-z, 0-9, '.', '_' and '-'; '\(name)' is not.")
        }
        guard password.utf8.count >= 8 else {
            throw ChronicleError(.invalidValue, "A password needs at least 8 characters.")
        }
        let hash = Secrets.hashPassword(password)
        return try reading { db in try db.transaction { db in
            if try db.scalarInt("SELECT 1 FROM users WHERE name = ?1", [.text(name)]) != nil {
                throw ChronicleError(.entityExists, "A user named '\(name)' already exists.")
            }
            if try db.scalarInt("SELECT 1 FROM library_deletions WHERE library_id = ?1", [.text(libraryID.lowercased)]) != nil {
                throw ChronicleError(.libraryBeingDeleted, "Library \(libraryID.lowercased) is being deleted: its file goes as soon as the running server lets go of it (`chronicle server users` lists it until then). Give the user a new library, or wait for it to go.")
            }
            try db.execute("INSERT INTO users(name, password_hash, library_id, schema_name, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
                           [.text(name), .text(hash), .text(libraryID.lowercased), .text(schema.name), .integer(clock.nowMilliseconds())])
            return UserRecord(name: name, libraryID: libraryID, schemaName: schema.name)
        } }
    }

    public func user(_ name: String) throws -> UserRecord? {
        try reading { db in
            try db.query("SELECT name, library_id, schema_name FROM users WHERE name = ?1", [.text(name)]) { row in
                try userRecord(row)
            }.first
        }
    }

    /// Every library and the schema it uses.
    public func libraries() throws -> [UserRecord] {
        try reading { db in
            try db.query("SELECT name, library_id, schema_name FROM users ORDER BY name") { row in
                try userRecord(row)
            }
        }
    }

    /// Registers (or re-registers) a device for a user and returns a new bearer token;
    /// the device's previous token stops working.
    public func registerDevice(user name: String, password: String, deviceID: UUID) throws(ProtocolError) -> (token: String, user: UserRecord) {
        let found: (UserRecord, String)?
        do {
            found = try reading { db in
                try db.query("SELECT name, library_id, schema_name, password_hash FROM users WHERE name = ?1", [.text(name)]) { row in
                    (try userRecord(row), row.text(3))
                }.first
            }
        } catch {
            throw Self.unavailable(error, "The server could not read its accounts")
        }
        // Same work whether or not the user exists, so timing does not tell names apart.
        let ok = Secrets.verifyPassword(password, against: found?.1 ?? Secrets.hashPassword("not a password"))
        guard let (user, _) = found, ok else {
            throw ProtocolError(401, "bad_credentials", "That user name and password do not match.")
        }
        let token = Secrets.newToken()
        let hash = Secrets.tokenHash(token)
        do {
            try reading { db in
                try db.transaction { db in
                    if let owner = try db.scalarText("SELECT user_name FROM devices WHERE device_id = ?1", [.text(deviceID.lowercased)]),
                       owner != user.name {
                        throw ProtocolError(409, "device_taken", "Device \(deviceID.lowercased) is registered to another user.")
                    }
                    let old = try db.scalarText("SELECT token_hash FROM devices WHERE device_id = ?1", [.text(deviceID.lowercased)])
                    try db.execute("""
                        INSERT INTO devices(device_id, user_name, library_id, token_hash, created_at) VALUES (?1, ?2, ?3, ?4, ?5)
                        ON CONFLICT(device_id) DO UPDATE SET token_hash = excluded.token_hash
                        """, [.text(deviceID.lowercased), .text(user.name), .text(user.libraryID.lowercased), .text(hash),
                              .integer(clock.nowMilliseconds())])
                    if let old { tokenCache.withLock { _ = $0.removeValue(forKey: old) } }
                }
            }
        } catch let error as ProtocolError {
            throw error
        } catch {
            throw Self.unavailable(error, "The server could not record the device")
        }
        return (token, user)
    }

    /// The device a bearer token belongs to, or nil; 503 `accounts_damaged` (not a 401, which
    /// would tell the device it was signed out) where the file cannot be read.
    public func authenticate(_ token: String) throws(ProtocolError) -> DeviceIdentity? {
        guard token.hasPrefix("chr_"), token.utf8.count == 68 else { return nil }
        let hash = Secrets.tokenHash(token)
        do {
            return try reading { db in
                // A token revoked by another process (`chronicle server revoke`) stops working at once,
                // not at the next restart: its commit changes the file's data_version. All under the
                // file's lock, so a row read before such a commit is cached under the version before it.
                let version = try db.scalarInt("PRAGMA data_version") ?? 0
                if cachedVersion.withLock({ cached in defer { cached = version }; return cached != version }) {
                    tokenCache.withLock { $0.removeAll() }
                }
                if let cached = tokenCache.withLock({ $0[hash] }) { return cached }
                let found = try db.query("SELECT device_id, library_id, user_name FROM devices WHERE token_hash = ?1", [.text(hash)]) { row in
                    DeviceIdentity(deviceID: try id(row.text(0), "a device id"), libraryID: try id(row.text(1), "device \(row.text(0))'s library id"),
                                   user: row.text(2))
                }.first
                if let found { tokenCache.withLock { $0[hash] = found } }
                return found
            }
        } catch {
            throw Self.unavailable(error, "The server could not read its accounts")
        }
    }
}
