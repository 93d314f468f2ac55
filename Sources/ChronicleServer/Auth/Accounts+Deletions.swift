import ChronicleCore
import ChronicleStore
import Foundation

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
        try reading { db in
            try db.transaction { db in
                if let owner = try db.scalarText("SELECT name FROM users WHERE library_id = ?1", [.text(library.lowercased)]) {
                    throw ChronicleError(.invalidValue, "Library \(library.lowercased) belongs to user \(owner); `chronicle server remove-user --data \(dataDirectory) \(owner) --delete-library` removes them and deletes it.")
                }
                guard FileManager.default.fileExists(atPath: Self.libraryPath(dataDirectory, library)) else {
                    throw ChronicleError(.unknownEntity, "There is no library \(library.lowercased) in \(dataDirectory); `chronicle server users --data \(dataDirectory)` lists them.")
                }
                try db.execute("INSERT OR IGNORE INTO library_deletions(library_id, requested_at) VALUES (?1, ?2)",
                               [.text(library.lowercased), .integer(clock.nowMilliseconds())])
            }
        }
    }

    /// Libraries whose deletion was asked for and whose file is not known to be gone yet.
    public func pendingLibraryDeletions() throws -> [UUID] {
        try reading { db in
            try db.query("SELECT library_id FROM library_deletions ORDER BY requested_at, library_id") { row in
                try id(row.text(0), "a library to delete")
            }
        }
    }

    /// Records that `library`'s file is gone: the request ends, and the id may be given out again.
    public func libraryDeleted(_ library: UUID) throws {
        try reading { db in
            try db.execute("DELETE FROM library_deletions WHERE library_id = ?1", [.text(library.lowercased)])
        }
    }

    /// Where a library's file lives in a data directory.
    public static func libraryPath(_ dataDirectory: String, _ library: UUID) -> String {
        (dataDirectory as NSString).appendingPathComponent("libraries/\(library.lowercased).sqlite")
    }

    /// Deletes a library's files: its write-ahead log, shared memory and any copy a salvage set
    /// aside (`<file>.damaged-<time>`, which holds the same person's data) first, the database
    /// last, so that a crash in between never leaves a log beside a file it does not belong to (a
    /// new library made under the same name would replay it). No process may hold the library
    /// open. Returns whether there was anything to delete.
    @discardableResult
    public static func deleteLibraryFiles(dataDirectory: String, library: UUID) throws -> Bool {
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
        return !ordered.isEmpty
    }

    /// The meta key that says where the libraries of this data directory are ordered, if not in its files.
    static let orderedInKey = "libraries_ordered_in"

    /// "postgresql" once `chronicle serve --postgres` has served this data directory; nil: in its files.
    public func librariesOrderedIn() throws -> String? {
        try reading { db in try db.scalarText("SELECT value FROM chronicle_meta WHERE key = ?1", [.text(Self.orderedInKey)]) }
    }

    /// Records that the libraries are ordered in `store` ("postgresql") from now on.
    public func setLibrariesOrderedIn(_ store: String) throws {
        try reading { db in
            try db.execute("INSERT INTO chronicle_meta(key, value) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                           [.text(Self.orderedInKey), .text(store)])
        }
    }

    /// Refuses `what` on a data directory whose libraries are ordered in PostgreSQL: it reads or
    /// writes library files there, and those are only a server's replicas.
    public func refuseIfOrderedElsewhere(_ what: String) throws {
        guard let store = try librariesOrderedIn() else { return }
        throw ChronicleError(.librariesInPostgreSQL, "The libraries of this data directory are ordered in \(store == "postgresql" ? "PostgreSQL" : store) (`chronicle serve --postgres`); \(what) works on library files and is not available for them yet. Use PostgreSQL's own tools (pg_dump for backups), or `chronicle serve --postgres` for everything a running server does.")
    }
}
