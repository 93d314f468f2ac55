import ChronicleCore
import ChronicleStore
import Foundation
import ChronicleServerStore

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

/// Users, their libraries and registered devices: in `<data>/server.sqlite`
/// (`Schemas/store/server-v1.md`), or in the PostgreSQL database servers on several machines
/// share (`AccountsStorage`). Passwords are kept as scrypt hashes and tokens as SHA-256 hashes:
/// the storage never holds a secret a thief could replay.
public final class Accounts: Sendable {
    public let storage: any AccountsStorage
    /// Where the accounts are, for messages: the file's path, or the database.
    public var path: String { storage.label }
    let clock: any ChronicleClock
    /// token hash → identity; tokens are checked on every request.
    let tokenCache = Locked(TokenCache())

    struct TokenCache {
        /// The storage's `changeCount` the entries were read under: another process's change drops them.
        var storageCount = Int64.min
        /// Moves on each change of this process's own: a row read before it is not cached after it.
        var epoch: Int64 = 0
        var entries: [String: CachedToken] = [:]
    }

    var t: AccountsTables { storage.tables }

    public convenience init(dataDirectory: String, clock: any ChronicleClock = SystemClock()) throws {
        try PrivateFiles.directory(dataDirectory)
        try self.init(path: (dataDirectory as NSString).appendingPathComponent("server.sqlite"), clock: clock)
    }

    /// The accounts file at `path` (created if missing): a data directory's `server.sqlite`, or a
    /// salvage's new copy of it.
    convenience init(path: String, clock: any ChronicleClock = SystemClock()) throws {
        self.init(storage: try SQLiteAccountsStorage(path: path), clock: clock)
    }

    /// The accounts kept in `storage`.
    public init(storage: any AccountsStorage, clock: any ChronicleClock = SystemClock()) {
        self.storage = storage
        self.clock = clock
    }

    /// Drops the cached tokens after a change of this process's own (a revocation, a device signing
    /// in again): all of them, since the access tokens a device holds are cached apart from its
    /// device token (`Accounts+Sessions.swift`).
    func dropTokenCache() {
        tokenCache.withLock { cache in
            cache.epoch += 1
            cache.entries.removeAll()
        }
    }

    /// The most tokens cached: access tokens are new every hour, so the cache starts over past this.
    static let tokenCacheEntriesMax = 100_000

    /// What a device is answered while the accounts cannot be read or reached: 503 with a
    /// Retry-After (a damaged file, an unreachable database); devices keep what they hold and try again.
    func unavailable(_ error: any Error, _ what: String) -> ProtocolError {
        if let error = error as? ProtocolError { return error }
        if let answer = storage.unavailable(error) { return answer }
        return ProtocolError.internalFailure(what, error)
    }

    /// An id read from the file; one that does not parse is damage.
    func id(_ text: String, _ what: String) throws -> UUID {
        guard let id = UUID(text: text) else { throw SQLiteAccountsStorage.damaged(path, "\(what) '\(text)' is not an id") }
        return id
    }

    /// A user read from columns 0–2 of `row` (name, library_id, schema_name).
    func userRecord(_ row: AccountsRow) throws -> UserRecord {
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
        return try storage.transaction { sql in
            if try sql.exists("SELECT 1 FROM \(t.users) WHERE name = ?1", [.text(name)]) {
                throw ChronicleError(.entityExists, "A user named '\(name)' already exists.")
            }
            if try sql.exists("SELECT 1 FROM \(t.users) WHERE library_id = ?1", [.text(libraryID.lowercased)]) {
                throw ChronicleError(.entityExists, "Library \(libraryID.lowercased) already belongs to a user.")
            }
            if try sql.exists("SELECT 1 FROM \(t.deletions) WHERE library_id = ?1", [.text(libraryID.lowercased)]) {
                throw ChronicleError(.libraryBeingDeleted, "Library \(libraryID.lowercased) is being deleted: its file goes as soon as the running server lets go of it (`chronicle server users` lists it until then). Give the user a new library, or wait for it to go.")
            }
            try sql.execute("INSERT INTO \(t.users)(name, password_hash, library_id, schema_name, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
                            [.text(name), .text(hash), .text(libraryID.lowercased), .text(schema.name), .integer(clock.nowMilliseconds())])
            return UserRecord(name: name, libraryID: libraryID, schemaName: schema.name)
        }
    }

    public func user(_ name: String) throws -> UserRecord? {
        try storage.read { sql in
            try sql.rows("SELECT name, library_id, schema_name FROM \(t.users) WHERE name = ?1", [.text(name)]).first.map(userRecord)
        }
    }

    /// Every library and the schema it uses.
    public func libraries() throws -> [UserRecord] {
        try storage.read { sql in
            try sql.rows("SELECT name, library_id, schema_name FROM \(t.users) ORDER BY name").map(userRecord)
        }
    }

    /// Registers (or re-registers) a device for a user and returns a new bearer token;
    /// the device's previous token stops working.
    public func registerDevice(user name: String, password: String, deviceID: UUID) throws(ProtocolError) -> (token: String, user: UserRecord) {
        let found: (UserRecord, String)?
        do {
            found = try storage.read { sql in
                try sql.rows("SELECT name, library_id, schema_name, password_hash FROM \(t.users) WHERE name = ?1", [.text(name)]).first.map { row in
                    (try userRecord(row), row.text(3))
                }
            }
        } catch {
            throw unavailable(error, "The server could not read its accounts")
        }
        // Same work whether or not the user exists, so timing does not tell names apart.
        let ok = Secrets.verifyPassword(password, against: found?.1 ?? Secrets.hashPassword("not a password"))
        guard let (user, _) = found, ok else {
            throw ProtocolError(401, .badCredentials, "That user name and password do not match.")
        }
        let token = Secrets.newToken()
        let hash = Secrets.tokenHash(token)
        let taken = ProtocolError(409, .deviceTaken, "Device \(deviceID.lowercased) is registered to another user.")
        do {
            let old = try storage.transaction { sql -> String? in
                let old = try sql.text("SELECT token_hash FROM \(t.devices) WHERE device_id = ?1", [.text(deviceID.lowercased)])
                // Only a registration of the same user is replaced, also when another server registers
                // the device at the same moment: a token never names another user's library.
                let changed = try sql.execute("""
                    INSERT INTO \(t.devices)(device_id, user_name, library_id, token_hash, created_at) VALUES (?1, ?2, ?3, ?4, ?5)
                    ON CONFLICT(device_id) DO UPDATE SET token_hash = excluded.token_hash WHERE \(t.devices).user_name = excluded.user_name
                    """, [.text(deviceID.lowercased), .text(user.name), .text(user.libraryID.lowercased), .text(hash),
                          .integer(clock.nowMilliseconds())])
                guard changed == 1 else { throw taken }
                return old
            }
            if old != nil { dropTokenCache() }
        } catch {
            throw unavailable(error, "The server could not record the device")
        }
        return (token, user)
    }

    /// The device a bearer token belongs to, or nil; 503 (`accounts_damaged`, or
    /// `server_store_unavailable` for a database out of reach), not a 401, which would tell the
    /// device it was signed out, where the accounts cannot be read. The token is a device token
    /// (`chr_…`, from `registerDevice`) or an access token (`chra_…`, from `openSession`); an
    /// access token past its expiry is a 401 `token_expired`.
    public func authenticate(_ token: String) throws(ProtocolError) -> DeviceIdentity? {
        if token.hasPrefix(Self.accessTokenPrefix) { return try authenticateAccess(token) }
        guard token.hasPrefix("chr_"), token.utf8.count == 68 else { return nil }
        let hash = Secrets.tokenHash(token)
        return try cachedToken(hash) { sql in
            try sql.rows("SELECT device_id, library_id, user_name FROM \(t.devices) WHERE token_hash = ?1", [.text(hash)]).first.map { row in
                CachedToken(identity: try identity(row), expiresAt: nil)
            }
        }?.identity
    }

    /// A checked token: whose it is, and until when it is good (nil: until it is revoked).
    struct CachedToken {
        var identity: DeviceIdentity
        var expiresAt: Int64?
    }

    /// A device row's identity: its `device_id`, `library_id` and `user_name`, in that order.
    func identity(_ row: AccountsRow) throws -> DeviceIdentity {
        DeviceIdentity(deviceID: try id(row.text(0), "a device id"), libraryID: try id(row.text(1), "device \(row.text(0))'s library id"),
                       user: row.text(2))
    }

    /// The token cached under `key` (its hash), or the one `lookup` reads, cached.
    func cachedToken(_ key: String, _ lookup: (any AccountsSQL) throws -> CachedToken?) throws(ProtocolError) -> CachedToken? {
        do {
            // A token revoked by another process (`chronicle server revoke`, another server) stops
            // working at once, not at the next restart: the storage's change count moves, and the
            // cache goes. A row is cached only under the count and epoch it was read in, so one read
            // while the cache was dropped is not put back after it.
            let count = try storage.changeCount()
            let (cached, epoch) = tokenCache.withLock { cache -> (CachedToken?, Int64) in
                if cache.storageCount != count { cache.storageCount = count; cache.entries.removeAll() }
                return (cache.entries[key], cache.epoch)
            }
            if let cached { return cached }
            let found = try storage.read(lookup)
            if let found {
                tokenCache.withLock { cache in
                    guard cache.storageCount == count, cache.epoch == epoch else { return }
                    if cache.entries.count >= Self.tokenCacheEntriesMax { cache.entries.removeAll() }
                    cache.entries[key] = found
                }
            }
            return found
        } catch {
            throw unavailable(error, "The server could not read its accounts")
        }
    }
}

extension AccountsStorage {
    /// `copy(from:)` of the storage `accounts` keeps its users and registrations in.
    @discardableResult
    public func copy(from accounts: Accounts) throws -> (users: Int, devices: Int) {
        try copy(from: accounts.storage)
    }
}
