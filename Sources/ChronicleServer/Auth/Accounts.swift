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
    private let db: Locked<Database>
    private let clock: any ChronicleClock
    /// token hash → identity; tokens are checked on every request.
    private let tokenCache: Locked<[String: DeviceIdentity]>

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
    ]

    public init(dataDirectory: String, clock: any ChronicleClock = SystemClock()) throws {
        try FileManager.default.createDirectory(atPath: dataDirectory, withIntermediateDirectories: true)
        path = (dataDirectory as NSString).appendingPathComponent("server.sqlite")
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
        }
        db = Locked(database)
        self.clock = clock
        tokenCache = Locked([:])
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
        return try db.withLock { db in
            if try db.scalarInt("SELECT 1 FROM users WHERE name = ?1", [.text(name)]) != nil {
                throw ChronicleError(.entityExists, "A user named '\(name)' already exists.")
            }
            try db.execute("INSERT INTO users(name, password_hash, library_id, schema_name, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
                           [.text(name), .text(hash), .text(libraryID.lowercased), .text(schema.name), .integer(clock.nowMilliseconds())])
            return UserRecord(name: name, libraryID: libraryID, schemaName: schema.name)
        }
    }

    public func user(_ name: String) throws -> UserRecord? {
        try db.withLock { db in
            try db.query("SELECT name, library_id, schema_name FROM users WHERE name = ?1", [.text(name)]) { row in
                UserRecord(name: row.text(0), libraryID: UUID(text: row.text(1))!, schemaName: row.text(2))
            }.first
        }
    }

    /// Every library and the schema it uses.
    public func libraries() throws -> [UserRecord] {
        try db.withLock { db in
            try db.query("SELECT name, library_id, schema_name FROM users ORDER BY name") { row in
                UserRecord(name: row.text(0), libraryID: UUID(text: row.text(1))!, schemaName: row.text(2))
            }
        }
    }

    /// Registers (or re-registers) a device for a user and returns a new bearer token;
    /// the device's previous token stops working.
    public func registerDevice(user name: String, password: String, deviceID: UUID) throws(ProtocolError) -> (token: String, user: UserRecord) {
        let found: (UserRecord, String)?
        do {
            found = try db.withLock { db in
                try db.query("SELECT name, library_id, schema_name, password_hash FROM users WHERE name = ?1", [.text(name)]) { row in
                    (UserRecord(name: row.text(0), libraryID: UUID(text: row.text(1))!, schemaName: row.text(2)), row.text(3))
                }.first
            }
        } catch {
            throw ProtocolError(500, "server_store", "The server could not read its accounts: \(error)")
        }
        // Same work whether or not the user exists, so timing does not tell names apart.
        let ok = Secrets.verifyPassword(password, against: found?.1 ?? Secrets.hashPassword("not a password"))
        guard let (user, _) = found, ok else {
            throw ProtocolError(401, "bad_credentials", "That user name and password do not match.")
        }
        let token = Secrets.newToken()
        let hash = Secrets.tokenHash(token)
        do {
            try db.withLock { db in
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
            throw ProtocolError(500, "server_store", "The server could not record the device: \(error)")
        }
        return (token, user)
    }

    /// The device a bearer token belongs to, or nil.
    public func authenticate(_ token: String) -> DeviceIdentity? {
        guard token.hasPrefix("chr_"), token.utf8.count == 68 else { return nil }
        let hash = Secrets.tokenHash(token)
        if let cached = tokenCache.withLock({ $0[hash] }) { return cached }
        let found = try? db.withLock { db in
            try db.query("SELECT device_id, library_id, user_name FROM devices WHERE token_hash = ?1", [.text(hash)]) { row in
                DeviceIdentity(deviceID: UUID(text: row.text(0))!, libraryID: UUID(text: row.text(1))!, user: row.text(2))
            }.first
        }
        guard let identity = found ?? nil else { return nil }
        tokenCache.withLock { $0[hash] = identity }
        return identity
    }
}
