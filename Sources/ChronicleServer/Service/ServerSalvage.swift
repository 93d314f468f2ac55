import ChronicleCore
import ChronicleStore
import Foundation
import ChronicleServerStore

/// `chronicle server salvage`: keeps what can still be read of a user's damaged library file
/// (one a running server answers `library_damaged`, 503, for), with the server stopped
/// (`ServerLibrary.salvage`).
///
/// ```swift
/// let report = try ServerSalvage.run(dataDirectory: "/var/lib/chronicle", user: "ada")
/// print(report.headKept, report.damagedPath)
/// ```
public enum ServerSalvage {
    /// Salvages `user`'s library in `dataDirectory`; refused (`data_directory_in_use`) while a
    /// server runs on the directory, which holds the file open and would go on writing to the
    /// damaged one.
    public static func run(dataDirectory: String, user name: String, dryRun: Bool = false,
                           progress: ((String) -> Void)? = nil) throws -> LibrarySalvageReport {
        try withUser(name, in: dataDirectory, purpose: "chronicle server salvage \(name)") { user in
            guard let schema = Schema.named(user.schemaName) else {
                throw ChronicleError(.usage, "\(name)'s library uses schema '\(user.schemaName)', which this build does not include.")
            }
            let path = Accounts.libraryPath(dataDirectory, user.libraryID)
            return try ServerLibrary.salvage(at: path, libraryID: user.libraryID, schema: schema, dryRun: dryRun, progress: progress)
        }
    }

    /// Runs `body` with user `name` of the server's data directory at `dataDirectory`, holding the
    /// directory's lock (`data_directory_in_use` while a server runs on it).
    private static func withUser<T>(_ name: String, in dataDirectory: String, purpose: String, _ body: (UserRecord) throws -> T) throws -> T {
        guard FileManager.default.fileExists(atPath: (dataDirectory as NSString).appendingPathComponent("server.sqlite")) else {
            throw ChronicleError(.storeMissing, "\(dataDirectory) is not a Chronicle server's data directory (it has no server.sqlite).")
        }
        let lock = try DataDirectoryLock(dataDirectory: dataDirectory, purpose: purpose)
        defer { withExtendedLifetime(lock) {} }
        guard let user = try Accounts(dataDirectory: dataDirectory).user(name) else {
            throw ChronicleError(.unknownEntity, "No user named '\(name)'.")
        }
        return try body(user)
    }

    /// Salvages `user`'s files file (`blobs/<id>.sqlite`, answered `blob_store_damaged`) in
    /// `dataDirectory` (`ServerBlobFiles.salvage`); refused while a server runs on the directory.
    /// Unless `dryRun`, the library's file then takes a new incarnation, as a restored one does:
    /// each device compares its history with the server's, asks about every file it holds whole
    /// and sends the ones the salvage could not keep.
    public static func runFiles(dataDirectory: String, user name: String, dryRun: Bool = false,
                                progress: ((String) -> Void)? = nil) throws -> BlobsSalvageReport {
        try withUser(name, in: dataDirectory, purpose: "chronicle server salvage \(name) --files") { user in
            let report = try ServerBlobFiles.salvage(library: user.libraryID, dataDirectory: dataDirectory, dryRun: dryRun, progress: progress)
            let libraryPath = Accounts.libraryPath(dataDirectory, user.libraryID)
            if !dryRun, FileManager.default.fileExists(atPath: libraryPath) {
                try Database(path: libraryPath).execute("INSERT OR REPLACE INTO chronicle_meta(key, value) VALUES (?1, ?2)",
                                                        [.text(ServerLibrary.incarnationKey), .text(UUID().lowercased)])
            }
            return report
        }
    }

    /// Salvages the accounts file (`server.sqlite`: users, devices, tokens) of `dataDirectory`
    /// (`Accounts.salvage`); refused while a server runs on the directory.
    public static func runAccounts(dataDirectory: String, dryRun: Bool = false) throws -> AccountsSalvageReport {
        let lock = try DataDirectoryLock(dataDirectory: dataDirectory, purpose: "chronicle server salvage --accounts")
        defer { withExtendedLifetime(lock) {} }
        return try Accounts.salvage(dataDirectory: dataDirectory, dryRun: dryRun)
    }
}
