import ChronicleCore
import ChronicleStore
import Foundation

/// What `ServerBlobFiles.salvage` kept of a damaged blobs file.
public struct BlobsSalvageReport: Sendable {
    /// `chronicle_blobs` and `chronicle_blob_chunks` as they were copied.
    public var tables: [SalvageReport.Table] = []
    /// Files kept whole: every chunk read, and their bytes hash to their address.
    public var filesKept = 0
    public var bytesKept: Int64 = 0
    /// Files kept as far as their chunks follow one another from the start: uploads under way,
    /// and complete files a chunk of which could not be read. An upload goes on from there.
    public var filesCutShort = 0
    /// Files dropped: none of their bytes from the start could be read, or their bytes no longer
    /// hash to their address. Their devices send them again (the library's new incarnation has
    /// every device ask the server about each file it holds).
    public var filesDropped = 0
    /// Where the damaged file (and its WAL) now are; empty after a dry run.
    public var damagedPath = ""
    public var seconds = 0.0

    public var lostNothing: Bool { filesCutShort == 0 && filesDropped == 0 && !tables.contains(where: \.incomplete) }
}

extension ServerBlobFiles {
    /// Keeps what can still be read of a library's damaged blobs file (answered with
    /// `blob_store_damaged`), in a new one put in its place: the two tables copied range by range
    /// around the pages SQLite cannot read, then each file checked. A file whose chunks all came
    /// through and hash to its address stays whole; one whose chunks stop early keeps the bytes
    /// up to the first gap, as an upload under way (its device sends the rest); one with nothing
    /// usable is dropped. The damaged file (with its WAL) is renamed to `<path>.damaged-<time>`.
    /// Run it with the server stopped (`ServerSalvage.runFiles` also gives the library's file a
    /// new incarnation, so that devices send what was lost again).
    ///
    /// `dryRun`: everything but the last step; the new file is deleted.
    public static func salvage(library: UUID, dataDirectory: String, dryRun: Bool = false,
                               progress: ((String) -> Void)? = nil) throws -> BlobsSalvageReport {
        let start = DispatchTime.now().uptimeNanoseconds
        let path = Self.path(of: library, in: dataDirectory)
        var report = BlobsSalvageReport()
        report.damagedPath = try SalvageCopy.salvage(
            path, missing: "Library \(library.lowercased) has no files file at \(path): no file was ever uploaded to it.",
            notSQLite: "\(path) is not a SQLite database, so not a blobs file; there is nothing to salvage.", dryRun: dryRun) { salvaged in
            let (out, objects) = try SalvageCopy.open(path, into: salvaged) { what, error in
                ChronicleError(.storeDamaged, "\(path) is damaged beyond salvage: \(what) (\(error.message)). It was left as it was. Restore it from a backup (`chronicle server backup`), or move it aside: devices send their files again once the library has a new incarnation.")
            }
            defer { try? out.execute("DETACH DATABASE damaged") }
            let tables = ["chronicle_blobs", "chronicle_blob_chunks"]
            guard tables.allSatisfy({ table in objects.contains { $0.type == "table" && $0.name == table } }) else {
                throw ChronicleError(.notAChronicleStore, "\(path) is not a blobs file (it has no chronicle_blobs or chronicle_blob_chunks table).")
            }
            try out.execute("PRAGMA foreign_keys = OFF")   // chunks may come through without their file's row
            for statement in statements { try out.execute(statement) }
            try out.execute("PRAGMA user_version = \(formatVersion)")
            // Where neither end of a table can be read, row ids are searched up to this: more than the rows the file can hold.
            let bound = max(65_536, (try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int64 ?? 0) / 512)
            for table in tables {
                progress?("Copying \(table)…")
                report.tables.append(try SalvageCopy.copyByRowID(table, in: out, indexes: ["sqlite_autoindex_\(table)_1"],
                                                                 bound: bound))
            }
            progress?("Checking each file against its address…")
            try out.transaction { db in try checkFiles(in: db, report: &report) }
            try out.execute("PRAGMA foreign_keys = ON")
            let problems = try out.query("PRAGMA main.integrity_check") { $0.text(0) }
                + (try out.query("PRAGMA main.foreign_key_check") { "a chunk of \($0.text(0)) without its file" })
            guard problems == ["ok"] else {
                throw ChronicleError(.invariantViolated, "The salvaged blobs file did not pass its checks (\(problems.prefix(3).joined(separator: "; "))); \(path) was left as it was, the attempt is at \(salvaged).")
            }
        }
        report.seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        return report
    }

    /// `chronicle server verify`'s check of a library's files file: SQLite's `integrity_check`,
    /// then each file's chunks following one another from 0 to what is held, and each complete
    /// file's bytes hashing to its address. nil where the library has no files file.
    public func verify(library: UUID, salvage: String) -> VerifyCheck? {
        let path = Self.path(of: library, in: dataDirectory)
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        let name = "files (blobs/\(library.lowercased).sqlite) whole and matching their addresses"
        do {
            var options = Database.Options()
            options.readOnly = true
            let db = try Database(path: path, options: options)
            let integrity = try db.query("PRAGMA integrity_check") { $0.text(0) }
            guard integrity == ["ok"] else {
                return VerifyCheck(name: name, passed: false, detail: "\(integrity.prefix(3).joined(separator: "; ")); run `\(salvage)` with the server stopped")
            }
            var problems: [String] = []
            var (count, bytes) = (0, Int64(0))
            try db.readTransaction { db in
                let files = try db.query("SELECT hash, length, received, complete FROM chronicle_blobs ORDER BY hash") {
                    (hash: $0.text(0), length: $0.int(1), received: $0.int(2), complete: $0.int(3) == 1)
                }
                for file in files {
                    if let problem = try BlobChunkRows.problem(file.hash, received: file.received, whole: file.complete, in: db) {
                        problems.append(problem)
                    }
                    count += 1
                    bytes += file.received
                }
            }
            return VerifyCheck(name: name, passed: problems.isEmpty,
                               detail: problems.isEmpty ? "\(count) file\(count == 1 ? "" : "s"), \(bytes) bytes"
                                   : problems.prefix(5).joined(separator: "; ") + "; run `\(salvage)` with the server stopped")
        } catch {
            return VerifyCheck(name: name, passed: false, detail: "\(error); run `\(salvage)` with the server stopped")
        }
    }

    /// Keeps each file's chunks from offset 0 up to the first gap, whole files only where they
    /// hash to their address; drops chunks of no file.
    private static func checkFiles(in db: Database, report: inout BlobsSalvageReport) throws {
        try db.execute("DELETE FROM chronicle_blob_chunks WHERE hash NOT IN (SELECT hash FROM chronicle_blobs)")
        let files = try db.query("SELECT hash, length, received, complete FROM chronicle_blobs ORDER BY hash") {
            (hash: $0.text(0), length: $0.int(1), received: $0.int(2), complete: $0.int(3) == 1)
        }
        for file in files {
            // Where the chunks stop following one another from 0.
            let held = min(try BlobChunkRows.extent(file.hash, in: db).contiguous, file.length)
            if file.complete, held == file.length, try BlobChunkRows.digest(file.hash, in: db).hex == file.hash {
                report.filesKept += 1
                report.bytesKept += held
                continue
            }
            let wasWhole = file.complete && held == file.length   // whole, but not the bytes of its address
            if held == 0 || wasWhole {
                try db.execute("DELETE FROM chronicle_blobs WHERE hash = ?1", [.text(file.hash)])
                try db.execute("DELETE FROM chronicle_blob_chunks WHERE hash = ?1", [.text(file.hash)])
                if file.complete || file.received > 0 { report.filesDropped += 1 }
                continue
            }
            try db.execute("DELETE FROM chronicle_blob_chunks WHERE hash = ?1 AND offset >= ?2", [.text(file.hash), .integer(held)])
            try db.execute("UPDATE chronicle_blobs SET received = ?2, complete = 0, completed_at = NULL WHERE hash = ?1",
                           [.text(file.hash), .integer(held)])
            if file.complete || held < file.received { report.filesCutShort += 1 }
            report.bytesKept += held
        }
    }
}
