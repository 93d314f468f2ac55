import ChronicleCore
import ChronicleStore
import Foundation
import ChronicleServerStore

/// One device registered to a user (`chronicle login`), as `chronicle server devices` lists it.
public struct DeviceRecord: Sendable, Equatable {
    public var deviceID: UUID
    public var user: String
    public var libraryID: UUID
    /// When it last signed in (ms since 1970): a new sign-in replaces its token.
    public var registeredAt: Int64
}

/// The operator's side of devices and passwords: a lost phone's token revoked, a password
/// changed. Each works beside a running server, whose token checks see the change at once
/// (`authenticate` drops its cache when another process commits to the file).
///
/// ```swift
/// let accounts = try Accounts(dataDirectory: "/var/lib/chronicle")
/// for device in try accounts.devices(of: "ada") { print(device.deviceID) }
/// try accounts.revokeDevice(lost)                   // its next request is answered 401
/// try accounts.setPassword("ada", password: "a new long password")
/// ```
extension Accounts {
    /// The devices registered to `user`, most recently signed in first.
    public func devices(of user: String) throws -> [DeviceRecord] {
        try storage.read { sql in
            guard try sql.exists("SELECT 1 FROM \(t.users) WHERE name = ?1", [.text(user)]) else {
                throw ChronicleError(.unknownEntity, "No user named '\(user)'.")
            }
            return try sql.rows("""
                SELECT device_id, user_name, library_id, created_at FROM \(t.devices) WHERE user_name = ?1 ORDER BY created_at DESC, device_id
                """, [.text(user)]).map(deviceRecord)
        }
    }

    /// Removes `device`'s registration: its token stops working, and its next request is
    /// answered 401 (the device signs in again with `chronicle login`; its store and queued
    /// changes are kept, and nothing it synced is undone). Returns what was removed.
    @discardableResult
    public func revokeDevice(_ device: UUID) throws -> DeviceRecord {
        defer { dropTokenCache() }
        return try storage.transaction { sql in
            guard let record = try sql.rows("SELECT device_id, user_name, library_id, created_at FROM \(t.devices) WHERE device_id = ?1",
                                            [.text(device.lowercased)]).first.map(deviceRecord) else {
                throw ChronicleError(.unknownEntity, "No device \(device.lowercased) is registered; `chronicle server devices NAME` lists a user's.")
            }
            try sql.execute("DELETE FROM \(t.devices) WHERE device_id = ?1", [.text(device.lowercased)])
            return record
        }
    }

    /// Removes every device registration of `user` (each signs in again); returns them.
    @discardableResult
    public func revokeDevices(of user: String) throws -> [DeviceRecord] {
        defer { dropTokenCache() }
        return try storage.transaction { sql in
            guard try sql.exists("SELECT 1 FROM \(t.users) WHERE name = ?1", [.text(user)]) else {
                throw ChronicleError(.unknownEntity, "No user named '\(user)'.")
            }
            let records = try sql.rows("SELECT device_id, user_name, library_id, created_at FROM \(t.devices) WHERE user_name = ?1 ORDER BY device_id",
                                       [.text(user)]).map(deviceRecord)
            try sql.execute("DELETE FROM \(t.devices) WHERE user_name = ?1", [.text(user)])
            return records
        }
    }

    /// Replaces `user`'s password (at least 8 characters). Devices already signed in keep
    /// their tokens; revoke them too where the old password may be known to someone else.
    public func setPassword(_ user: String, password: String) throws {
        guard password.utf8.count >= 8 else {
            throw ChronicleError(.invalidValue, "A password needs at least 8 characters.")
        }
        let hash = Secrets.hashPassword(password)
        try storage.transaction { sql in
            guard try sql.execute("UPDATE \(t.users) SET password_hash = ?1 WHERE name = ?2", [.text(hash), .text(user)]) == 1 else {
                throw ChronicleError(.unknownEntity, "No user named '\(user)'.")
            }
        }
    }

    /// Removes `user` and every device registration of theirs, in one transaction: their tokens
    /// stop working at once (also on a running server) and their password signs in no more.
    /// Their library is left where it is, owned by no one (`unownedLibraries`), to be given back
    /// (`add-user --library`) or deleted (`requestLibraryDeletion`); with `deletingLibrary`, its
    /// deletion is asked for in the same transaction.
    /// Returns the removed user and how many devices were signed out.
    @discardableResult
    public func removeUser(_ user: String, deletingLibrary: Bool = false) throws -> (user: UserRecord, devices: Int) {
        defer { dropTokenCache() }
        return try storage.transaction { sql in
            guard let record = try sql.rows("SELECT name, library_id, schema_name FROM \(t.users) WHERE name = ?1", [.text(user)]).first.map(userRecord) else {
                throw ChronicleError(.unknownEntity, "No user named '\(user)'.")
            }
            let devices = try sql.execute("DELETE FROM \(t.devices) WHERE user_name = ?1", [.text(user)])
            try sql.execute("DELETE FROM \(t.users) WHERE name = ?1", [.text(user)])
            if deletingLibrary {
                try sql.execute("INSERT INTO \(t.deletions)(library_id, requested_at) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
                                [.text(record.libraryID.lowercased), .integer(clock.nowMilliseconds())])
            }
            return (record, devices)
        }
    }

    /// Library files in `dataDirectory` that no user owns (a user removed, or lost with a damaged
    /// accounts file), by id.
    public func unownedLibraries(in dataDirectory: String) throws -> [UUID] {
        let owned = Set(try libraries().map(\.libraryID))
        return Self.libraryFiles(in: dataDirectory).filter { !owned.contains($0) }
    }

    /// A device read from columns 0–3 of `row` (device_id, user_name, library_id, created_at).
    private func deviceRecord(_ row: AccountsRow) throws -> DeviceRecord {
        DeviceRecord(deviceID: try id(row.text(0), "a device id"), user: row.text(1),
                     libraryID: try id(row.text(2), "device \(row.text(0))'s library id"), registeredAt: row.int(3))
    }
}
