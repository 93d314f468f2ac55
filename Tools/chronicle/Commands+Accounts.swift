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
