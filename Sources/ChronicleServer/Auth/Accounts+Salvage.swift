import ChronicleCore
import ChronicleStore
import Foundation
import ChronicleServerStore

/// What `Accounts.salvage` kept of a damaged accounts file (`server.sqlite`).
public struct AccountsSalvageReport: Sendable {
    /// A library file in the data directory that no kept user owns.
    public struct Unowned: Sendable, Equatable {
        public var libraryID: UUID
        /// The schema its file names; nil where its file cannot say.
        public var schemaName: String?
        /// The user its devices were registered to, where such a registration was read but the
        /// user's own row was not: the name to give the library back under. Those registrations
        /// were dropped with the user, so its devices sign in again.
        public var formerUser: String?
    }

    /// `chronicle_meta`, `users` and `devices` as they were copied.
    public var tables: [SalvageReport.Table]
    public var usersKept: Int
    public var devicesKept: Int
    /// Rows read but not kept: an id that does not parse, a user name that is not one, a device
    /// registered to a user who was not kept or to another library than that user's.
    public var rowsDropped: Int
    /// Library files no kept user owns: the operator gives each back to its user with
    /// `chronicle server add-user --data DIR NAME --library ID` (a new password).
    public var unowned: [Unowned]
    /// Where the damaged file (and its WAL) now are; empty after a dry run.
    public var damagedPath: String
    public var seconds: Double

    /// Nothing was lost: every row was read and kept, and every library has its user.
    public var lostNothing: Bool {
        tables.allSatisfy { !$0.incomplete } && rowsDropped == 0 && unowned.isEmpty
    }
}

extension Accounts {
    /// The characters of user names (`isValidUserName`), in byte order: a damaged `users`
    /// table is copied by ranges of names split on them.
    static let nameAlphabet = Array("-.0123456789_abcdefghijklmnopqrstuvwxyz".utf8)

    /// Keeps what can still be read of a damaged accounts file (`<data>/server.sqlite`: users,
    /// their libraries, devices' registrations and token hashes), in a new one, with the server
    /// stopped. Rows SQLite cannot read are lost: a device whose registration was lost is
    /// answered 401 and signs in again (its store and queued changes are kept); a library whose
    /// user was lost stays on disk untouched and is listed (`unowned`), for the operator to give
    /// back with `chronicle server add-user --library ID`. The new file must pass SQLite's
    /// integrity and foreign-key checks and open as an accounts file before the damaged one (with
    /// its WAL) is renamed `server.sqlite.damaged-<time>`. `dryRun`: everything but that last step.
    public static func salvage(dataDirectory: String, dryRun: Bool = false) throws -> AccountsSalvageReport {
        let start = DispatchTime.now().uptimeNanoseconds
        let path = (dataDirectory as NSString).appendingPathComponent("server.sqlite")
        var report = AccountsSalvageReport(tables: [], usersKept: 0, devicesKept: 0, rowsDropped: 0, unowned: [],
                                           damagedPath: "", seconds: 0)
        var formerUsers: [UUID: String] = [:]
        report.damagedPath = try SalvageCopy.salvage(
            path, missing: "\(dataDirectory) is not a Chronicle server's data directory (it has no server.sqlite).",
            notSQLite: "\(path) is not a SQLite database, so not a server's accounts file; there is nothing to salvage.",
            dryRun: dryRun) { salvaged in
            try copyAccounts(from: path, into: salvaged, report: &report, formerUsers: &formerUsers)
            let copy = try Accounts(path: salvaged)
            let kept = Set(try copy.libraries().map(\.libraryID))
            report.usersKept = kept.count
            report.unowned = libraryFiles(in: dataDirectory).filter { !kept.contains($0) }.map { id in
                AccountsSalvageReport.Unowned(libraryID: id, schemaName: schemaName(ofLibraryIn: dataDirectory, id),
                                              formerUser: formerUsers[id])
            }
        }
        report.seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        return report
    }

    /// Copies the accounts' tables into a new file at `salvaged`, drops rows that do not hold
    /// together, and checks what is left.
    private static func copyAccounts(from path: String, into salvaged: String, report: inout AccountsSalvageReport,
                                     formerUsers: inout [UUID: String]) throws {
        let (out, objects) = try SalvageCopy.open(path, into: salvaged) { what, error in
            ChronicleError(.storeDamaged, "\(path) is damaged beyond salvage: \(what) (\(error.message)). It was left as it was. "
                           + "Restore the data directory from a backup (`chronicle server backup`).")
        }
        defer { try? out.execute("DETACH DATABASE damaged") }
        let tables = Set(objects.filter { $0.type == "table" }.map(\.name))
        guard tables.isSuperset(of: ["chronicle_meta", "users", "devices"]) else {
            throw ChronicleError(.notAChronicleStore, "\(path) is not a server's accounts file (it has no chronicle_meta, users or devices table).")
        }
        // Rows are checked once copied (below), not one by one as they go in.
        try out.execute("PRAGMA foreign_keys = OFF")
        for statement in SQLiteAccountsStorage.statements { try out.execute(statement) }
        report.tables.append(try SalvageCopy.copyWhole("chronicle_meta", in: out))
        report.tables.append(try SalvageCopy.copyWhole("users", in: out, alphabet: nameAlphabet))
        report.tables.append(try SalvageCopy.copyWhole("devices", in: out))
        if let kind = try out.scalarText("SELECT value FROM chronicle_meta WHERE key = 'kind'"), kind != "server" {
            throw ChronicleError(.notAChronicleStore, "\(path) is not a server's accounts file (its kind is '\(kind)').")
        }
        if let format = try out.scalarInt("SELECT value FROM chronicle_meta WHERE key = 'format_version'"), format > SQLiteAccountsStorage.formatVersion {
            throw ChronicleError(.futureStoreVersion, "\(path) uses server format v\(format), but this build reads up to v\(SQLiteAccountsStorage.formatVersion). Update Chronicle; the file was left untouched.")
        }
        // What could not be read of the metadata is what every accounts file of this format holds.
        try out.execute("INSERT OR IGNORE INTO chronicle_meta(key, value) VALUES ('format_version', ?1), ('kind', 'server')",
                        [.integer(SQLiteAccountsStorage.formatVersion)])

        let users = try out.query("SELECT name, library_id FROM users") { ($0.text(0), $0.text(1)) }
        for (name, library) in users where !isValidUserName(name) || UUID(text: library)?.lowercased != library {
            try out.execute("DELETE FROM users WHERE name = ?1", [.text(name)])
            report.rowsDropped += 1
        }
        let owners = Dictionary(try out.query("SELECT name, library_id FROM users") { ($0.text(0), $0.text(1)) },
                                uniquingKeysWith: { a, _ in a })
        let devices = try out.query("SELECT device_id, user_name, library_id, token_hash FROM devices") {
            ($0.text(0), $0.text(1), $0.text(2), $0.text(3))
        }
        for (device, user, library, token) in devices {
            let sound = UUID(text: device)?.lowercased == device && token.utf8.count == 64
                && token.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
            if sound, owners[user] == library { continue }
            if owners[user] == nil, isValidUserName(user), let id = UUID(text: library), id.lowercased == library {
                formerUsers[id] = user
            }
            try out.execute("DELETE FROM devices WHERE device_id = ?1", [.text(device)])
            report.rowsDropped += 1
        }
        report.devicesKept = Int(try out.scalarInt("SELECT count(*) FROM devices") ?? 0)
        // Deletions asked for and not finished stay asked for (a file made before them has none);
        // one for a library a kept user owns, or with an id that does not parse, is dropped.
        if tables.contains("library_deletions") {
            report.tables.append(try SalvageCopy.copyWhole("library_deletions", in: out))
            let asked = try out.query("SELECT library_id FROM library_deletions") { $0.text(0) }
            let owned = Set(owners.values)
            for library in asked where UUID(text: library)?.lowercased != library || owned.contains(library) {
                try out.execute("DELETE FROM library_deletions WHERE library_id = ?1", [.text(library)])
                report.rowsDropped += 1
            }
        }
        let integrity = try out.scalarText("PRAGMA main.integrity_check") ?? ""
        let orphans = try out.query("PRAGMA main.foreign_key_check") { $0.text(0) }
        guard integrity == "ok", orphans.isEmpty else {
            throw ChronicleError(.invariantViolated, "The salvaged accounts did not pass their checks (integrity: \(integrity); rows without their user: \(orphans.count)); \(path) was left as it was, the attempt is at \(salvaged).")
        }
    }

    /// The ids of the library files in the data directory (`libraries/<id>.sqlite`).
    public static func libraryFiles(in dataDirectory: String) -> [UUID] {
        let directory = (dataDirectory as NSString).appendingPathComponent("libraries")
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.compactMap { name -> UUID? in
            guard name.hasSuffix(".sqlite"), let id = UUID(text: String(name.dropLast(7))), id.lowercased + ".sqlite" == name else { return nil }
            return id
        }.sorted { $0.lowercased < $1.lowercased }
    }

    /// The schema a library file names, or nil where it cannot be read.
    public static func schemaName(ofLibraryIn dataDirectory: String, _ id: UUID) -> String? {
        libraryMeta(in: dataDirectory, id)?["schema_name"]
    }

    /// A library file's metadata as text (kind, library id, schema), or nil where it cannot be read.
    private static func libraryMeta(in dataDirectory: String, _ id: UUID) -> [String: String]? {
        var options = Database.Options()
        options.readOnly = true
        options.create = false
        let path = libraryPath(dataDirectory, id)
        guard FileManager.default.fileExists(atPath: path), let db = try? Database(path: path, options: options),
              let rows = try? db.query("SELECT key, value FROM chronicle_meta", [], { ($0.text(0), $0.text(1)) }) else { return nil }
        return Dictionary(rows, uniquingKeysWith: { a, _ in a })
    }

    /// Refuses to give library `id` to a new user (`add-user --library`) unless its file is in the
    /// data directory, is that library's, uses `schema`, and no user owns it.
    public func checkLibraryToGiveBack(_ id: UUID, schema: Schema, dataDirectory: String) throws {
        if let owner = try libraries().first(where: { $0.libraryID == id }) {
            throw ChronicleError(.entityExists, "Library \(id.lowercased) already belongs to user \(owner.name).")
        }
        let file = "libraries/\(id.lowercased).sqlite"
        guard FileManager.default.fileExists(atPath: (dataDirectory as NSString).appendingPathComponent(file)) else {
            throw ChronicleError(.unknownEntity, "\(dataDirectory) has no library \(id.lowercased) (no \(file)); without --library, add-user makes a new one.")
        }
        guard let meta = Self.libraryMeta(in: dataDirectory, id), meta["kind"] == "server-library", meta["library_id"] == id.lowercased else {
            throw ChronicleError(.notAChronicleStore, "\(file) cannot be read as library \(id.lowercased)'s file; salvage it first (`chronicle server salvage`) once it has a user, or restore a backup.")
        }
        guard meta["schema_name"] == schema.name else {
            throw ChronicleError(.schemaMismatch, "Library \(id.lowercased) uses schema '\(meta["schema_name"] ?? "?")', not '\(schema.name)'; add --schema \(meta["schema_name"] ?? "?").")
        }
    }
}

extension Accounts {
    /// Whether SQLite reads every page of the accounts file and its rows hold together
    /// (`integrity_check`, then `foreign_key_check`: each device's user exists). Read only; beside
    /// a running server. `server verify --all` runs it before the libraries.
    public func verify() -> VerifyCheck {
        let name = "the accounts file can be read"
        do {
            let problems = try storage.integrityProblems()
            guard problems.isEmpty else {
                return VerifyCheck(name: name, passed: false, detail: SQLiteAccountsStorage.damaged(path, problems.prefix(3).joined(separator: "; ")).message)
            }
            let records = try libraries()
            // A deletion asked for a library a user owns: neither command asks for one, and the
            // server refuses it (`library_delete_refused`), so only a hand-made row could.
            let owned = Set(records.map(\.libraryID))
            let clashing = try pendingLibraryDeletions().filter(owned.contains)
            guard clashing.isEmpty else {
                let names = records.filter { clashing.contains($0.libraryID) }.map { "\($0.libraryID.lowercased) (user \($0.name))" }
                return VerifyCheck(name: name, passed: false,
                                   detail: "A deletion is asked for of \(names.joined(separator: ", ")), which a user owns; the server refuses it and logs library_delete_refused. Remove the user with `chronicle server remove-user --delete-library` if the library is to go.")
            }
            let users = records.count
            return VerifyCheck(name: name, passed: true, detail: users == 1 ? "1 user" : "\(users) users")
        } catch {
            let detail = (SQLiteAccountsStorage.damagedOr(error, path) as? ChronicleError)?.message ?? "\(error)"
            return VerifyCheck(name: name, passed: false, detail: detail)
        }
    }
}
