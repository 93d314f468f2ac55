import ChronicleCore
import ChronicleStore
import Foundation
import ChronicleServerStore

/// A consistent copy of a server's data directory, taken while the server runs
/// (`chronicle server backup`).
///
/// Each file (`server.sqlite`, then `libraries/<id>.sqlite`, then `blobs/<id>.sqlite`) is copied with SQLite's
/// `VACUUM INTO` on a connection of its own: one read transaction, so the copy is that file
/// as of one moment, and the server's writers never wait for it (WAL). Each copy is written
/// beside its final name, checked with `PRAGMA quick_check`, flushed to disk and then renamed,
/// so the destination never holds a half-written file under a real name. The destination is a
/// data directory `chronicle serve --data` starts on.
///
/// Files are copied one after another, not at one instant: a library pushed to during the
/// backup is copied as of when its turn came. A server restored from a backup has lost what
/// came after it; devices that synced since see `cursor_ahead` (409, with the library's head),
/// go back to what the server holds and push their own ops it lost again
/// (`DeviceStore.rewind(toAgreedSeq:)`).
///
/// ```swift
/// let report = try ServerBackup.run(dataDirectory: "/var/lib/chronicle", to: "/backups/2026-12-02")
/// print(report.libraries, report.bytes)
/// ```
public enum ServerBackup {
    /// What a backup copied: libraries, their files, and the accounts.
    public struct Report: Sendable {
        /// Library files copied (besides `server.sqlite`).
        public var libraries = 0
        /// Libraries' blob files copied (`blobs/<id>.sqlite`).
        public var blobFiles = 0
        /// Bytes written, all files.
        public var bytes: Int64 = 0
        public var seconds = 0.0
    }

    /// Copies `dataDirectory` into `destination`, which must not exist or be empty.
    /// `progress(done, total)` counts files.
    public static func run(dataDirectory: String, to destination: String,
                           progress: ((Int64, Int64) -> Void)? = nil) throws -> Report {
        let start = DispatchTime.now().uptimeNanoseconds
        let files = FileManager.default
        let source = URL(fileURLWithPath: dataDirectory).standardizedFileURL
        let target = URL(fileURLWithPath: destination).standardizedFileURL
        guard files.fileExists(atPath: source.appendingPathComponent("server.sqlite").path) else {
            throw ChronicleError(.storeMissing, "\(dataDirectory) is not a Chronicle server's data directory (it has no server.sqlite).")
        }
        guard target.path != source.path, !target.path.hasPrefix(source.path + "/") else {
            throw ChronicleError(.usage, "The backup must go outside the data directory it copies (\(destination)).")
        }
        if files.fileExists(atPath: target.path) {
            let entries = (try? files.contentsOfDirectory(atPath: target.path)) ?? ["?"]
            guard entries.isEmpty else {
                throw ChronicleError(.storeExists, "\(destination) already exists and is not empty; a backup never writes over anything. Choose a new directory.")
            }
        }
        // A backup holds what the data directory holds: as private as it (`PrivateFiles`).
        try PrivateFiles.directory(target.path)
        try PrivateFiles.directory(target.appendingPathComponent("libraries").path)

        let libraries = ((try? files.contentsOfDirectory(atPath: source.appendingPathComponent("libraries").path)) ?? [])
            .filter { $0.hasSuffix(".sqlite") }.sorted()
        // Each library's blobs (`ServerBlobFiles`), copied the same way.
        let blobs = ((try? files.contentsOfDirectory(atPath: source.appendingPathComponent("blobs").path)) ?? [])
            .filter { $0.hasSuffix(".sqlite") }.sorted()
        if !blobs.isEmpty { try PrivateFiles.directory(target.appendingPathComponent("blobs").path) }
        let names = ["server.sqlite"] + libraries.map { "libraries/" + $0 } + blobs.map { "blobs/" + $0 }
        var report = Report()
        progress?(0, Int64(names.count))
        for (done, name) in names.enumerated() {
            let path = source.appendingPathComponent(name).path
            do {
                let library = name.hasPrefix("libraries/")
                report.bytes += try copy(path, to: target.appendingPathComponent(name).path, newIncarnation: library)
                if library { report.libraries += 1 }
                if name.hasPrefix("blobs/") { report.blobFiles += 1 }
            } catch where name != "server.sqlite" && !files.fileExists(atPath: path) {
                // Deleted since the directory was listed (`server delete-library` beside the running
                // server): nothing to copy, as if the backup had started a moment later.
            }
            progress?(Int64(done + 1), Int64(names.count))
        }
        report.seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        return report
    }

    /// One file: `VACUUM INTO` a partial name, check it, flush it, rename it. Returns its size.
    /// `newIncarnation`: the copy of a library takes an incarnation of its own
    /// (`ServerLibrary.incarnation`), so that devices can tell a server restored from it.
    public static func copy(_ path: String, to destination: String, newIncarnation: Bool = false) throws -> Int64 {
        let partial = destination + ".partial"
        try? FileManager.default.removeItem(atPath: partial)
        do {
            var options = Database.Options()
            options.readOnly = true
            try Database(path: path, options: options).vacuum(into: partial)
            if newIncarnation {
                // Its own connection, closed (and its WAL checkpointed) before the check.
                try Database(path: partial).execute("INSERT OR REPLACE INTO chronicle_meta(key, value) VALUES (?1, ?2)",
                                                    [.text(ServerLibrary.incarnationKey), .text(UUID().lowercased)])
            }
            // The check's connection is closed before the rename (it is a temporary).
            let check = try Database(path: partial, options: options).query("PRAGMA quick_check") { $0.text(0) }
            for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: partial + suffix) }
            guard check == ["ok"] else {
                throw ChronicleError(.invariantViolated, "The copy of \(path) failed its check: \(check.prefix(3).joined(separator: "; ")).")
            }
            guard let handle = FileHandle(forUpdatingAtPath: partial) else {
                throw ChronicleError(.database, "Cannot open \(partial) to flush it to disk.")
            }
            try handle.synchronize()
            try handle.close()
            try FileManager.default.moveItem(atPath: partial, toPath: destination)
        } catch let error as SQLiteError where error.isDiskFull {
            try? FileManager.default.removeItem(atPath: partial)
            throw ChronicleError(.diskFull, "The disk holding the backup is full; \(destination) was not written. Free some space and back up to a new directory.")
        } catch {
            try? FileManager.default.removeItem(atPath: partial)
            throw error
        }
        return ((try? FileManager.default.attributesOfItem(atPath: destination)[.size]) as? Int64) ?? 0
    }
}
