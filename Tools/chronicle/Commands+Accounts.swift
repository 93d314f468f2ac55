import ChronicleCore
import ChronicleServer
import Foundation

/// `chronicle server devices | revoke | passwd`: the operator's side of a user's devices and
/// password, beside a running server (its token checks see a revocation at once).
extension Command {
    /// `chronicle server devices --data DIR NAME`.
    static func listDevices(data: String, user: String, _ ctx: Context) throws -> Int32 {
        let devices = try Accounts(dataDirectory: data).devices(of: user)
        if ctx.output.json {
            ctx.output.emit(devices.map { ["device_id": $0.deviceID.lowercased, "user": $0.user, "library_id": $0.libraryID.lowercased,
                                           "registered_at": $0.registeredAt] })
        } else if devices.isEmpty {
            ctx.output.line("\(user) has no device signed in.")
        } else {
            ctx.output.table(["DEVICE", "SIGNED IN"], devices.map { [$0.deviceID.lowercased, Output.time($0.registeredAt)] })
        }
        return ExitCode.success
    }

    /// `chronicle server revoke --data DIR (DEVICE | --all NAME)`.
    static func revokeDevices(data: String, device: UUID?, allOf user: String?, _ ctx: Context) throws -> Int32 {
        let accounts = try Accounts(dataDirectory: data)
        let revoked = try device.map { [try accounts.revokeDevice($0)] } ?? accounts.revokeDevices(of: user ?? "")
        if ctx.output.json {
            ctx.output.emit(["revoked": revoked.map { ["device_id": $0.deviceID.lowercased, "user": $0.user] }])
        } else if revoked.isEmpty {
            ctx.output.line("\(user ?? "") had no device signed in; nothing changed.")
        } else {
            for record in revoked {
                ctx.output.line("Revoked device \(record.deviceID.lowercased) of \(record.user): its token no longer works. "
                                + "It keeps its store and queued changes, and syncs again after `chronicle login`.")
            }
        }
        return ExitCode.success
    }

    /// `chronicle server passwd --data DIR NAME [--revoke-devices]` (the new password from stdin).
    static func changePassword(data: String, user: String, revokeDevices: Bool, _ ctx: Context) throws -> Int32 {
        let accounts = try Accounts(dataDirectory: data)
        guard try accounts.user(user) != nil else { throw ChronicleError(.unknownEntity, "No user named '\(user)'.") }
        let password = try readPassword()
        try accounts.setPassword(user, password: password)
        let revoked = revokeDevices ? try accounts.revokeDevices(of: user) : []
        if ctx.output.json {
            ctx.output.emit(["user": user, "devices_revoked": revoked.count])
        } else {
            ctx.output.line("Changed \(user)'s password. " + (revokeDevices
                ? "Revoked \(revoked.count) device\(revoked.count == 1 ? "" : "s"); each signs in again with the new one."
                : "Devices already signed in keep working (--revoke-devices signs them out)."))
        }
        return ExitCode.success
    }
}

extension Command {
    /// `chronicle server remove-user --data DIR NAME [--delete-library]`.
    static func removeUser(data: String, user: String, deleteLibrary: Bool, _ ctx: Context) throws -> Int32 {
        // The file can only go while no server has it open: the data directory's lock says so.
        let lock = deleteLibrary ? try DataDirectoryLock(dataDirectory: data, purpose: "chronicle server remove-user \(user) --delete-library") : nil
        defer { withExtendedLifetime(lock) {} }
        let accounts = try Accounts(dataDirectory: data)
        let (record, devices) = try accounts.removeUser(user)
        let file = (data as NSString).appendingPathComponent("libraries/\(record.libraryID.lowercased).sqlite")
        var deleted = false
        if deleteLibrary {
            for suffix in ["", "-wal", "-shm"] where FileManager.default.fileExists(atPath: file + suffix) {
                try FileManager.default.removeItem(atPath: file + suffix)
                deleted = true
            }
        }
        if ctx.output.json {
            ctx.output.emit(["user": record.name, "library_id": record.libraryID.lowercased, "devices_signed_out": devices,
                             "library_file": file, "library_deleted": deleted])
        } else if deleteLibrary {
            ctx.output.line("Removed user \(record.name): \(devices) device\(devices == 1 ? "" : "s") signed out, "
                            + (deleted ? "library \(record.libraryID.lowercased) deleted." : "and no library file was there."))
        } else {
            ctx.output.line("Removed user \(record.name): \(devices) device\(devices == 1 ? "" : "s") signed out. "
                            + "Their library stays in \(file), owned by no one: delete it with the server stopped "
                            + "(`chronicle server remove-user` with --delete-library does both), or give it back with "
                            + "`chronicle server add-user --data \(data) NAME --library \(record.libraryID.lowercased) --schema \(record.schemaName)`.")
        }
        return ExitCode.success
    }
}
