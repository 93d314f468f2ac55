import ChronicleCore
import ChronicleStore
import Foundation
import ChronicleServerStore

/// Deleting a library's file, also beside a running server. The operator's command asks for it
/// in the accounts file (`library_deletions`), in the same transaction that removes the user
/// where it does both; whoever holds the data directory then deletes the file: the command
/// itself when no server runs, or the running server once no request holds the library
/// (`SyncService.runLibraryDeletions`). Until the file is gone the request stays, so a server
/// stopped half way finishes when it starts again, and no user can be given the library.
///
/// ```swift
/// try accounts.removeUser("ada", deletingLibrary: true)
/// // or, for a file no user owns: try accounts.requestLibraryDeletion(id, dataDirectory: dir)
/// try accounts.pendingLibraryDeletions()            // [id] until the server has deleted it
/// ```
extension Accounts {
    /// Asks for the file of `library`, which no user owns, to be deleted. Refused for a library a
    /// user owns (remove the user first) and for one with no file in `dataDirectory`.
    public func requestLibraryDeletion(_ library: UUID, dataDirectory: String) throws {
        guard FileManager.default.fileExists(atPath: Self.libraryPath(dataDirectory, library)) else {
            throw ChronicleError(.unknownEntity, "There is no library \(library.lowercased) in \(dataDirectory); `chronicle server users --data \(dataDirectory)` lists them.")
        }
        try requestLibraryDeletion(library, owners: "`chronicle server remove-user --data \(dataDirectory)")
    }

    /// Asks for `library`, which no user owns, to be deleted, wherever its log is (the caller has
    /// checked it exists). `owners`: the start of the command that removes its owner instead.
    public func requestLibraryDeletion(_ library: UUID, owners: String) throws {
        try storage.transaction { sql in
            if let owner = try sql.text("SELECT name FROM \(t.users) WHERE library_id = ?1", [.text(library.lowercased)]) {
                throw ChronicleError(.invalidValue, "Library \(library.lowercased) belongs to user \(owner); \(owners) \(owner) --delete-library` removes them and deletes it.")
            }
            try sql.execute("INSERT INTO \(t.deletions)(library_id, requested_at) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
                            [.text(library.lowercased), .integer(clock.nowMilliseconds())])
        }
    }

    /// Libraries whose deletion was asked for and whose file is not known to be gone yet.
    public func pendingLibraryDeletions() throws -> [UUID] {
        try storage.read { sql in
            try sql.rows("SELECT library_id FROM \(t.deletions) ORDER BY requested_at, library_id").map { row in
                try id(row.text(0), "a library to delete")
            }
        }
    }

    /// Records that `library`'s file is gone: the request ends, and the id may be given out again.
    public func libraryDeleted(_ library: UUID) throws {
        try storage.read { sql in
            try sql.execute("DELETE FROM \(t.deletions) WHERE library_id = ?1", [.text(library.lowercased)])
        }
    }

    /// Where a library's file lives in a data directory.
    public static func libraryPath(_ dataDirectory: String, _ library: UUID) -> String {
        (dataDirectory as NSString).appendingPathComponent("libraries/\(library.lowercased).sqlite")
    }

    /// Deletes a library's files: its blobs, its write-ahead log, shared memory and any copy a salvage set
    /// aside (`<file>.damaged-<time>`, which holds the same person's data) first, the database
    /// last, so that a crash in between never leaves a log beside a file it does not belong to (a
    /// new library made under the same name would replay it). No process may hold the library
    /// open. Returns whether there was anything to delete.
    @discardableResult
    public static func deleteLibraryFiles(dataDirectory: String, library: UUID) throws -> Bool {
        // Its blobs first (`blobs/<id>.sqlite`): a crash in between leaves the library, still asked
        // for, not files of a library that is gone.
        let blobs = ServerBlobFiles.path(of: library, in: dataDirectory)
        let hadBlobs = FileManager.default.fileExists(atPath: blobs)
        do {
            try ServerBlobFiles(dataDirectory: dataDirectory).deleteLibrary(library)
        } catch {
            throw ChronicleError(.database, "Cannot delete \(blobs): \(error.localizedDescription)")
        }
        let path = libraryPath(dataDirectory, library)
        let directory = (path as NSString).deletingLastPathComponent
        let name = (path as NSString).lastPathComponent
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).filter { $0.hasPrefix(name) }
        // Everything beside the database first (its log, shared memory, set-aside copies), the database last.
        let ordered = names.filter { $0 != name }.sorted() + names.filter { $0 == name }
        for entry in ordered {
            let file = (directory as NSString).appendingPathComponent(entry)
            do {
                try FileManager.default.removeItem(atPath: file)
            } catch {
                throw ChronicleError(.database, "Cannot delete \(file): \(error.localizedDescription)")
            }
        }
        return !ordered.isEmpty || hadBlobs
    }

    /// The meta key that says where the libraries of this data directory are ordered, if not in its files.
    static let orderedInKey = "libraries_ordered_in"

    /// The meta key set once this data directory's users and devices were copied to PostgreSQL.
    static let accountsMovedKey = "accounts_moved_to"

    /// "postgresql" once `chronicle serve --postgres` has served this data directory; nil: in its files.
    public func librariesOrderedIn() throws -> String? { try meta(Self.orderedInKey) }

    /// Records that the libraries are ordered in `store` ("postgresql") from now on.
    public func setLibrariesOrderedIn(_ store: String) throws { try setMeta(Self.orderedInKey, store) }

    /// "postgresql" once the users and devices of this file were copied there (`chronicle serve
    /// --postgres`, since format 2 of its tables): the file is kept as it was, and no longer used.
    public func accountsMovedTo() throws -> String? { try meta(Self.accountsMovedKey) }

    public func setAccountsMoved(to store: String) throws { try setMeta(Self.accountsMovedKey, store) }

    func meta(_ key: String) throws -> String? {
        try storage.read { sql in try sql.text("SELECT value FROM \(t.meta) WHERE key = ?1", [.text(key)]) }
    }

    func setMeta(_ key: String, _ value: String) throws {
        try storage.read { sql in
            try sql.execute("INSERT INTO \(t.meta)(key, value) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                            [.text(key), .text(value)])
        }
    }

    /// Refuses `what` on a data directory whose libraries are ordered in PostgreSQL: it reads or
    /// writes library files there, and those are only a server's replicas.
    public func refuseIfOrderedElsewhere(_ what: String) throws {
        guard let store = try librariesOrderedIn() else { return }
        throw ChronicleError(.librariesInPostgreSQL, "The libraries of this data directory are ordered in \(store == "postgresql" ? "PostgreSQL" : store) (`chronicle serve --postgres`); \(what) works on library files and is not available for them. Use `chronicle server ACTION --postgres CONNINFO` (backup writes a lone server's data directory from PostgreSQL), or `chronicle serve --postgres` for everything a running server does.")
    }
}
