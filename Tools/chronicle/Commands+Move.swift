import ChronicleCore
import ChroniclePostgres
import ChronicleServer
import ChronicleStore
import Foundation
import ChronicleServerStore

extension Command {
    /// `chronicle server move-to-postgres --data DIR --postgres CONNINFO`: a lone server's
    /// libraries and accounts copied into PostgreSQL, for servers on several machines to take over.
    ///
    /// Needs DIR to itself (no server running on it: what it took after the copy would be lost).
    /// Each library goes in one transaction (`PostgresServerStore.importLibrary`) and is then read
    /// back into a scratch replica, whose digest must be the file's, and checked there as
    /// `server verify --postgres` checks it. Users and devices' registrations go last, so that
    /// no server on PostgreSQL serves a library before it is whole; then DIR is marked as moved
    /// (a lone `serve --data DIR` refuses it from then on, and `serve --postgres --data DIR`
    /// serves it). Interrupted, it is run again: libraries already there with the same history
    /// are left as they are. The library files stay in DIR, no longer used (one of an older format
    /// is brought up to this build's first, as a server opening it would).
    static func moveToPostgres(data: String, conninfo: String, dryRun: Bool, _ ctx: Context) throws -> Int32 {
        guard FileManager.default.fileExists(atPath: (data as NSString).appendingPathComponent("server.sqlite")) else {
            throw ChronicleError(.storeMissing, "\(data) has no server.sqlite: it is not a lone server's data directory (`chronicle serve --data DIR` makes one).")
        }
        let lock = try DataDirectoryLock(dataDirectory: data, purpose: "chronicle server move-to-postgres")
        defer { withExtendedLifetime(lock) {} }
        let local = try Accounts(dataDirectory: data)
        if try local.librariesOrderedIn() != nil {
            throw ChronicleError(.librariesInPostgreSQL, "The libraries of \(data) are ordered in PostgreSQL already (moved before, or served by `chronicle serve --postgres`); there is nothing to move. Serve them with `chronicle serve --postgres CONNINFO --data \(data)`.")
        }

        // What moves: every library file not awaiting deletion, owned or not, with its schema.
        let owners = Dictionary(try local.libraries().map { ($0.libraryID, $0) }, uniquingKeysWith: { first, _ in first })
        let deleting = Set(try local.pendingLibraryDeletions())
        var targets: [(id: UUID, owner: String?, schema: Schema)] = []
        for id in Accounts.libraryFiles(in: data) where !deleting.contains(id) {
            let name = owners[id]?.schemaName ?? Accounts.schemaName(ofLibraryIn: data, id)
            guard let name, let schema = Schema.named(name) else {
                throw ChronicleError(.invalidSchema, "The library file \(Accounts.libraryPath(data, id)) \(name.map { "uses schema '\($0)', which this build does not include" } ?? "cannot be read (check it with `chronicle server verify`, or salvage it)"); nothing was moved.")
            }
            targets.append((id, owners[id]?.name, schema))
        }

        let storage = try AccountsPlace.postgresStorage(conninfo, listening: false)
        try refuseAccountConflicts(local, in: storage)
        if dryRun {
            return try describeMove(data: data, targets: targets, local: local, deleting: deleting.count, ctx)
        }

        let scratch = (NSTemporaryDirectory() as NSString).appendingPathComponent("chronicle-move-\(UUID().lowercased)")
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let store = try AccountsPlace.postgresStore(conninfo, replicas: scratch, poolSize: 2)
        var results: [[String: Any]] = []
        for (index, target) in targets.enumerated() {
            let who = target.owner.map { "\($0)'s library" } ?? "library \(target.id.lowercased) (no user owns it)"
            do {
                results.append(try moveLibrary(target, who: who, data: data, store: store, position: (index, targets.count), ctx))
            } catch {
                // A file SQLite cannot read is a damaged store (exit 4), as the server answers it (library_damaged).
                let code = (error as? ChronicleError)?.code ?? ((error as? SQLiteError)?.isCorrupt == true ? .storeDamaged : .database)
                let message = (error as? ChronicleError)?.message ?? (error as? ProtocolError)?.message
                    ?? ((error as? SQLiteError)?.isCorrupt == true ? "the file cannot be read as a library (\(error))." : "\(error)")
                let before = index == 0 ? "No library is in PostgreSQL yet" : "The \(index) before it are in PostgreSQL"
                throw ChronicleError(code, "Moving \(who) (\(Accounts.libraryPath(data, target.id))): \(message) \(before); the users and devices were not moved, so no server there serves any of them. Put it right (`chronicle server verify --data \(data) --all`, or `server salvage`) and run the move again: it leaves the libraries already there as they are.")
            }
        }

        // The libraries' files (blobs), each complete one read back through PostgreSQL's checks.
        var blobsMoved = (blobs: 0, bytes: Int64(0))
        let localBlobs = ServerBlobFiles(dataDirectory: data), sharedBlobs = PostgresBlobStorage(pool: store.pool)
        for library in ServerBlobFiles.libraries(in: data) where !deleting.contains(library) {
            let copied = try sharedBlobs.copyBlobs(of: library, from: localBlobs)
            blobsMoved.blobs += copied.blobs
            blobsMoved.bytes += copied.bytes
        }

        // Accounts last: from here on, servers on PostgreSQL serve these users.
        let copied = try storage.copy(from: local)
        try local.setLibrariesOrderedIn("postgresql")
        try local.setAccountsMoved(to: "postgresql")
        if ctx.output.json {
            ctx.output.emit(["libraries": results, "users": copied.users, "devices": copied.devices, "skipped_being_deleted": deleting.count,
                             "blobs": blobsMoved.blobs, "blob_bytes": blobsMoved.bytes] as [String: Any])
        } else {
            ctx.output.line("Moved \(targets.count) librar\(targets.count == 1 ? "y" : "ies"), \(copied.users) users and \(copied.devices) device registrations to PostgreSQL"
                            + (blobsMoved.blobs > 0 ? ", with \(blobsMoved.blobs) file\(blobsMoved.blobs == 1 ? "" : "s") (\(blobsMoved.bytes) bytes)" : "")
                            + (deleting.isEmpty ? "." : "; \(deleting.count) awaiting deletion were left out."))
            ctx.output.line("Devices keep their tokens and go on from their cursors. Serve it with `chronicle serve --postgres CONNINFO --data \(data)` (a lone `serve --data \(data)` now refuses it); the library files stay in \(data)/libraries, no longer used.")
        }
        return ExitCode.success
    }

    /// One library of `moveToPostgres`: imported, read back and checked; its line printed.
    static func moveLibrary(_ target: (id: UUID, owner: String?, schema: Schema), who: String, data: String, store: PostgresServerStore,
                            position: (index: Int, count: Int), _ ctx: Context) throws -> [String: Any] {
        let source = try ServerLibrary.openOrCreate(at: Accounts.libraryPath(data, target.id), libraryID: target.id, schema: target.schema)
        let header = try source.exportHeader()
        let bar = ProgressBar("Moving \(position.index + 1)/\(position.count)")
        let started = DispatchTime.now().uptimeNanoseconds
        let outcome = try store.importLibrary(source) { bar.update($0, $1) }
        bar.finish()
        // Read back as a server would, and checked there.
        let replica = try store.library(target.id, schema: target.schema)
        let digest = try source.digest()
        guard replica.localHead == header.head, try replica.digest() == digest else {
            throw ChronicleError(.digestMismatch, "\(who) read back from PostgreSQL holds another state than its file (head \(replica.localHead) of \(header.head)).")
        }
        let failed = try store.checks(of: target.id).filter { !$0.passed }
        guard failed.isEmpty else {
            throw ChronicleError(.invariantViolated, "\(who) in PostgreSQL fails its checks (\(failed.map { "\($0.name): \($0.detail)" }.joined(separator: "; "))).")
        }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        var result: [String: Any] = ["library_id": target.id.lowercased, "user": target.owner as Any? ?? NSNull(), "head": header.head,
                                     "sealed_through": header.sealedThrough, "history_base": header.historyBase, "digest": digest,
                                     "seconds": seconds]
        switch outcome {
        case .copied(let ops, let dropped):
            result["outcome"] = "copied"
            result["ops"] = ops
            result["dropped_op_ids"] = dropped
            if !ctx.output.json {
                ctx.output.line("Moved \(who): \(ops) ops (sealed through seq \(header.sealedThrough))"
                                + (header.historyBase > 0 ? ", history from seq \(header.historyBase) (the snapshot there and \(dropped) op ids before it)" : "")
                                + String(format: " in %.2f s; read back, digest matches.", seconds))
            }
        case .alreadyThere:
            result["outcome"] = "already_there"
            if !ctx.output.json { ctx.output.line("\(who) was in PostgreSQL already with the same history (head \(header.head)); digest matches.") }
        }
        return result
    }

    /// Refuses, before anything is written, a user name PostgreSQL has for another library, and a
    /// device registered there to another user or library.
    static func refuseAccountConflicts(_ local: Accounts, in storage: PostgresAccountsStorage) throws {
        let source = local.storage.tables, target = storage.tables
        let (users, devices) = try local.storage.read { sql in
            (try sql.rows("SELECT name, library_id FROM \(source.users)", []),
             try sql.rows("SELECT device_id, user_name, library_id FROM \(source.devices)", []))
        }
        let (theirUsers, theirDevices) = try storage.read { sql in
            (try sql.rows("SELECT name, library_id FROM \(target.users)", []),
             try sql.rows("SELECT device_id, user_name, library_id FROM \(target.devices)", []))
        }
        let userLibrary = Dictionary(theirUsers.map { ($0.text(0), $0.text(1)) }, uniquingKeysWith: { first, _ in first })
        let clashes = users.filter { row in userLibrary[row.text(0)].map { $0 != row.text(1) } ?? false }.map { $0.text(0) }
        if !clashes.isEmpty {
            throw ChronicleError(.storeExists, "PostgreSQL already has users named \(clashes.sorted().map { "'\($0)'" }.joined(separator: ", ")) with other libraries; nothing was moved. Rename or remove them there first.")
        }
        let deviceOwner = Dictionary(theirDevices.map { ($0.text(0), $0.text(1) + " " + $0.text(2)) }, uniquingKeysWith: { first, _ in first })
        let taken = devices.filter { row in deviceOwner[row.text(0)].map { $0 != row.text(1) + " " + row.text(2) } ?? false }.map { $0.text(0) }
        if !taken.isEmpty {
            throw ChronicleError(.storeExists, "PostgreSQL already registers devices \(taken.sorted().joined(separator: ", ")) to other users; nothing was moved.")
        }
    }

    /// `--dry-run`: what would move, changing nothing.
    static func describeMove(data: String, targets: [(id: UUID, owner: String?, schema: Schema)], local: Accounts, deleting: Int,
                             _ ctx: Context) throws -> Int32 {
        var rows: [[String]] = []
        var json: [[String: Any]] = []
        for target in targets {
            // Read only: a library file of an older format is not brought up to date by a dry run.
            var options = Database.Options()
            options.readOnly = true
            let db = try Database(path: Accounts.libraryPath(data, target.id), options: options)
            let logged = try db.scalarInt("SELECT max(server_seq) FROM chronicle_log") ?? 0
            let segments = (try? db.scalarInt("SELECT max(last_seq) FROM chronicle_segments")) ?? nil
            let base = (try? db.scalarInt("SELECT value FROM chronicle_meta WHERE key = 'history_base_seq'")) ?? nil
            let sealed = max(segments ?? 0, base ?? 0)
            let head = max(logged, sealed)
            rows.append([target.owner ?? "(no one)", target.id.lowercased, String(head), String(sealed), String(base ?? 0)])
            json.append(["library_id": target.id.lowercased, "user": target.owner as Any? ?? NSNull(), "head": head,
                         "sealed_through": sealed, "history_base": base ?? 0])
        }
        let users = try local.libraries().count
        if ctx.output.json {
            ctx.output.emit(["libraries": json, "users": users, "skipped_being_deleted": deleting, "dry_run": true] as [String: Any])
        } else {
            if !rows.isEmpty { ctx.output.table(["USER", "LIBRARY", "HEAD", "SEALED", "HISTORY FROM"], rows) }
            ctx.output.line("Would move \(targets.count) librar\(targets.count == 1 ? "y" : "ies") and \(users) users with their devices' registrations"
                            + (deleting > 0 ? " (\(deleting) awaiting deletion left out)" : "") + ". (dry run: nothing was changed)")
        }
        return ExitCode.success
    }
}

extension Command {
    /// `chronicle server backup --postgres CONNINFO --to DEST`: PostgreSQL's accounts and every
    /// library it orders, written as a lone server's data directory, beside the running servers.
    ///
    /// The accounts first, then each library read into a scratch replica (caught up from its
    /// segments and log, as a server makes one) and copied as `server backup --data` copies a
    /// file: `VACUUM INTO` beside its name, given an incarnation of its own (devices that synced
    /// after the backup can tell a restored server), checked, flushed, renamed. Each library is as
    /// of its turn. `chronicle serve --data DEST` runs on the copy; `server move-to-postgres`
    /// puts it into a PostgreSQL database again.
    static func backupPostgres(conninfo: String, to destination: String, _ ctx: Context) throws -> Int32 {
        let started = DispatchTime.now().uptimeNanoseconds
        let files = FileManager.default
        var isDirectory: ObjCBool = false
        if files.fileExists(atPath: destination, isDirectory: &isDirectory) {
            guard isDirectory.boolValue, ((try? files.contentsOfDirectory(atPath: destination)) ?? ["?"]).isEmpty else {
                throw ChronicleError(.storeExists, "\(destination) already exists and is not an empty directory; a backup never writes over anything. Choose a new directory.")
            }
        }
        let scratch = (NSTemporaryDirectory() as NSString).appendingPathComponent("chronicle-backup-\(UUID().lowercased)")
        defer { try? files.removeItem(atPath: scratch) }
        let storage = try AccountsPlace.postgresStorage(conninfo, listening: false)
        let store = try AccountsPlace.postgresStore(conninfo, replicas: scratch + "/libraries", poolSize: 2)
        try files.createDirectory(atPath: destination + "/libraries", withIntermediateDirectories: true)

        // The accounts, into a server.sqlite of their own, then copied in as every file is.
        let accounts = try Accounts(dataDirectory: scratch)
        let copied = try accounts.storage.copy(from: Accounts(storage: storage))
        var bytes = try ServerBackup.copy(scratch + "/server.sqlite", to: destination + "/server.sqlite")

        let libraries = try storage.libraries()
        let bar = ProgressBar("Backing up", unit: "libraries")
        var done = 0, blobs = 0
        for library in libraries {
            bar.update(Int64(done), Int64(libraries.count))
            guard let schema = Schema.named(library.schemaName) else {
                throw ChronicleError(.invalidSchema, "Library \(library.id.lowercased) uses schema '\(library.schemaName)', which this build does not include; the backup in \(destination) is incomplete.")
            }
            let replica = try store.library(library.id, schema: schema)   // made and caught up from PostgreSQL
            bytes += try ServerBackup.copy(replica.path, to: Accounts.libraryPath(destination, library.id), newIncarnation: true)
            // Its files, into the backup's blobs file for it.
            let files = try ServerBlobFiles(dataDirectory: destination).copyBlobs(of: library.id, from: PostgresBlobStorage(pool: store.pool))
            blobs += files.blobs
            bytes += files.bytes
            done += 1
        }
        bar.finish()
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        if ctx.output.json {
            ctx.output.emit(["destination": destination, "libraries": done, "users": copied.users, "devices": copied.devices,
                             "blobs": blobs, "bytes": bytes, "seconds": seconds])
        } else {
            ctx.output.line("Backed up \(copied.users) users, \(copied.devices) device registrations and \(done) librar\(done == 1 ? "y" : "ies") "
                            + (blobs > 0 ? "with \(blobs) file\(blobs == 1 ? "" : "s") " : "")
                            + "from PostgreSQL (\(bytes) bytes) to \(destination) in \(String(format: "%.2f", seconds)) s, as a lone server's data directory. "
                            + "Run a server on it with `chronicle serve --data \(destination)`, or put it into a PostgreSQL database with "
                            + "`chronicle server move-to-postgres --data \(destination) --postgres CONNINFO`.")
        }
        return ExitCode.success
    }
}
