import ChronicleCore
import ChroniclePostgres
import ChronicleServer
import Foundation

/// `chronicle server devices | revoke | passwd`: the operator's side of a user's devices and
/// password, beside a running server (its token checks see a revocation at once).
extension Command {
    /// `chronicle server devices (--data DIR | --postgres CONNINFO) NAME`.
    static func listDevices(_ accounts: Accounts, user: String, _ ctx: Context) throws -> Int32 {
        let devices = try accounts.devices(of: user)
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

    /// `chronicle server revoke (--data DIR | --postgres CONNINFO) (DEVICE | --all NAME)`.
    static func revokeDevices(_ accounts: Accounts, device: UUID?, allOf user: String?, _ ctx: Context) throws -> Int32 {
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

    /// `chronicle server passwd (--data DIR | --postgres CONNINFO) NAME [--revoke-devices]` (the new password from stdin).
    static func changePassword(_ accounts: Accounts, user: String, revokeDevices: Bool, _ ctx: Context) throws -> Int32 {
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
    /// What became of a library whose deletion was asked for.
    struct LibraryDeletion {
        var file: String
        /// Gone: deleted by this command (no server held the directory) or by the running server.
        var deleted = false
        /// Deleted by the running server, within the wait.
        var byServer = false
        /// There was a file to delete.
        var existed = false
        /// Left to the next `serve --postgres`: the library is ordered in PostgreSQL and no server runs.
        var inPostgreSQL = false
    }

    /// The data directory's lock when no server holds it; nil while one does (`data_directory_in_use`).
    static func lockUnlessServed(_ data: String, purpose: String) throws -> DataDirectoryLock? {
        do {
            return try DataDirectoryLock(dataDirectory: data, purpose: purpose)
        } catch let error as ChronicleError where error.code == .dataDirectoryInUse {
            return nil
        }
    }

    /// Ends a deletion asked for in the accounts file: with the directory's lock, this process
    /// deletes the file itself; otherwise the running server does once no request holds the
    /// library, and this waits up to `wait` seconds to say whether it has.
    static func finishDeletion(of library: UUID, data: String, accounts: Accounts, lock: DataDirectoryLock?, wait: Double) throws -> LibraryDeletion {
        var result = LibraryDeletion(file: Accounts.libraryPath(data, library))
        // Libraries ordered in PostgreSQL are deleted there by a server (`serve --postgres`), never here.
        if lock != nil, try accounts.librariesOrderedIn() != nil {
            result.inPostgreSQL = true
            return result
        }
        if lock != nil {
            result.existed = try Accounts.deleteLibraryFiles(dataDirectory: data, library: library)
            try accounts.libraryDeleted(library)
            result.deleted = true
            return result
        }
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(max(0, wait) * 1e9)
        while true {
            if try !accounts.pendingLibraryDeletions().contains(library) {
                result.deleted = true
                result.byServer = true
                return result
            }
            if DispatchTime.now().uptimeNanoseconds >= deadline { return result }
            usleep(100_000)
        }
    }

    /// The sentence for a deletion's outcome.
    static func deletionSentence(_ deletion: LibraryDeletion, library: UUID, data: String) -> String {
        if deletion.byServer { return "the running server deleted library \(library.lowercased)." }
        if deletion.inPostgreSQL {
            return "library \(library.lowercased) is marked for deletion: no server runs on \(data), and the next `chronicle serve --postgres` "
                + "deletes it from PostgreSQL."
        }
        if deletion.deleted {
            return deletion.existed ? "library \(library.lowercased) deleted." : "and no library file was there."
        }
        return "library \(library.lowercased) is marked for deletion: the server running on \(data) deletes its file as soon as "
            + "no request holds it (`chronicle server users` lists it until then; if no server runs, the next `chronicle serve` does)."
    }

    /// `chronicle server remove-user --data DIR NAME [--delete-library [--wait S]]`.
    static func removeUser(data: String, user: String, deleteLibrary: Bool, wait: Double, _ ctx: Context) throws -> Int32 {
        // Without a server on DIR this process deletes the file; beside one, the server does.
        let lock = deleteLibrary ? try lockUnlessServed(data, purpose: "chronicle server remove-user \(user) --delete-library") : nil
        defer { withExtendedLifetime(lock) {} }
        let accounts = try AccountsPlace.directory(data).open(for: "remove-user")
        let (record, devices) = try accounts.removeUser(user, deletingLibrary: deleteLibrary)
        let file = Accounts.libraryPath(data, record.libraryID)
        let deletion = deleteLibrary ? try finishDeletion(of: record.libraryID, data: data, accounts: accounts, lock: lock, wait: wait) : nil
        let signedOut = "\(devices) device\(devices == 1 ? "" : "s") signed out"
        if ctx.output.json {
            ctx.output.emit(["user": record.name, "library_id": record.libraryID.lowercased, "devices_signed_out": devices,
                             "library_file": file, "library_deleted": (deletion?.deleted ?? false) && (deletion?.existed ?? true),
                             "library_deletion_pending": deletion.map { !$0.deleted } ?? false])
        } else if let deletion {
            ctx.output.line("Removed user \(record.name): \(signedOut)" + (deletion.deleted && !deletion.byServer ? ", " : "; ")
                            + deletionSentence(deletion, library: record.libraryID, data: data))
        } else {
            ctx.output.line("Removed user \(record.name): \(signedOut). "
                            + "Their library stays in \(file), owned by no one: delete it with `chronicle server delete-library --data \(data) "
                            + "\(record.libraryID.lowercased)`, or give it back with "
                            + "`chronicle server add-user --data \(data) NAME --library \(record.libraryID.lowercased) --schema \(record.schemaName)`.")
        }
        return ExitCode.success
    }

    /// `chronicle server delete-library --data DIR ID [--wait S]`: a library no user owns.
    static func deleteLibrary(data: String, library: UUID, wait: Double, _ ctx: Context) throws -> Int32 {
        let lock = try lockUnlessServed(data, purpose: "chronicle server delete-library \(library.lowercased)")
        defer { withExtendedLifetime(lock) {} }
        let accounts = try AccountsPlace.directory(data).open(for: "delete-library")
        // Asked for again (a run before left it pending, no server took it) is fine: it is asked for once.
        if try !accounts.pendingLibraryDeletions().contains(library) {
            try accounts.requestLibraryDeletion(library, dataDirectory: data)
        }
        let deletion = try finishDeletion(of: library, data: data, accounts: accounts, lock: lock, wait: wait)
        if ctx.output.json {
            ctx.output.emit(["library_id": library.lowercased, "library_file": deletion.file,
                             "library_deleted": deletion.deleted, "library_deletion_pending": !deletion.deleted])
        } else {
            let sentence = deletionSentence(deletion, library: library, data: data)
            ctx.output.line(sentence.prefix(1).uppercased() + sentence.dropFirst())
        }
        return ExitCode.success
    }
}

/// The account actions on PostgreSQL (`--postgres CONNINFO`), where servers on several machines
/// keep users, devices and libraries.
extension Command {
    /// Refuses to give library `id` to a new user unless PostgreSQL orders it, with `schema`, and
    /// no user owns it.
    static func checkLibraryToGiveBack(_ id: UUID, schema: Schema, in storage: PostgresAccountsStorage, _ accounts: Accounts) throws {
        if let owner = try accounts.libraries().first(where: { $0.libraryID == id }) {
            throw ChronicleError(.entityExists, "Library \(id.lowercased) already belongs to user \(owner.name).")
        }
        guard let found = try storage.libraries().first(where: { $0.id == id }) else {
            throw ChronicleError(.unknownEntity, "PostgreSQL has no library \(id.lowercased) (`chronicle server users --postgres` lists those no user owns); without --library, add-user makes a new one.")
        }
        guard found.schemaName == schema.name else {
            throw ChronicleError(.schemaMismatch, "Library \(id.lowercased) uses schema '\(found.schemaName)', not '\(schema.name)'; add --schema \(found.schemaName).")
        }
    }

    /// Deletes library `id` from PostgreSQL (asked for first, so that a command stopped half way is
    /// finished by a server): no user owns it, so no device can reach it meanwhile. Running
    /// servers drop their replicas of it when they start again.
    static func deleteFromPostgres(_ id: UUID, _ accounts: Accounts) throws -> Bool {
        guard let storage = accounts.storage as? PostgresAccountsStorage else { return false }
        let existed = try PostgresServerStore.deleteLibrary(id, pool: storage.pool)
        try accounts.libraryDeleted(id)
        return existed
    }

    /// `chronicle server remove-user --postgres CONNINFO NAME [--delete-library]`.
    static func removeUser(_ accounts: Accounts, user: String, deleteLibrary: Bool, _ ctx: Context) throws -> Int32 {
        let (record, devices) = try accounts.removeUser(user, deletingLibrary: deleteLibrary)
        let existed = deleteLibrary ? try deleteFromPostgres(record.libraryID, accounts) : false
        let signedOut = "\(devices) device\(devices == 1 ? "" : "s") signed out"
        if ctx.output.json {
            ctx.output.emit(["user": record.name, "library_id": record.libraryID.lowercased, "devices_signed_out": devices,
                             "library_deleted": deleteLibrary && existed, "library_deletion_pending": false])
        } else if deleteLibrary {
            ctx.output.line("Removed user \(record.name): \(signedOut); " + (existed
                ? "library \(record.libraryID.lowercased) deleted from PostgreSQL."
                : "library \(record.libraryID.lowercased) had nothing in PostgreSQL (it never synced)."))
        } else {
            ctx.output.line("Removed user \(record.name): \(signedOut). Their library stays in PostgreSQL, owned by no one: delete it with "
                            + "`chronicle server delete-library --postgres CONNINFO \(record.libraryID.lowercased)`, or give it back with "
                            + "`chronicle server add-user --postgres CONNINFO NAME --library \(record.libraryID.lowercased) --schema \(record.schemaName)`.")
        }
        return ExitCode.success
    }

    /// `chronicle server delete-library --postgres CONNINFO ID`: a library no user owns.
    static func deleteLibrary(_ accounts: Accounts, library: UUID, _ ctx: Context) throws -> Int32 {
        guard let storage = accounts.storage as? PostgresAccountsStorage else { return ExitCode.usage }
        let pending = try accounts.pendingLibraryDeletions().contains(library)
        let known = try storage.libraries().contains { $0.id == library }
        guard pending || known else {
            throw ChronicleError(.unknownEntity, "PostgreSQL has no library \(library.lowercased); `chronicle server users --postgres` lists them.")
        }
        if !pending { try accounts.requestLibraryDeletion(library, owners: "`chronicle server remove-user --postgres CONNINFO") }
        let existed = try deleteFromPostgres(library, accounts)
        if ctx.output.json {
            ctx.output.emit(["library_id": library.lowercased, "library_deleted": existed, "library_deletion_pending": false])
        } else {
            ctx.output.line(existed ? "Library \(library.lowercased) deleted from PostgreSQL." : "Library \(library.lowercased) was already gone from PostgreSQL.")
        }
        return ExitCode.success
    }
}
