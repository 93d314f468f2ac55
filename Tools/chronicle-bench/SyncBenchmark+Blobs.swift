import ChronicleCore
import ChronicleServer
import ChronicleStore
import ChronicleSync
import CSQLite
import Foundation

extension SyncBenchmark {
    // MARK: - 6. Files (blobs)

    /// A file of `bytes` added on device A (`addBlob(file:)`), uploaded by A's `syncOnce()` over
    /// HTTP, fetched by device B (`fetchBlob`), each beside raw SQLite doing the same SQL work with
    /// no HTTP and no engine: the upload's chunk read from A's table and, per chunk, the server's
    /// transaction (its row read, the chunk inserted, its count moved, committed with FULL sync),
    /// then its read-back and SHA-256; the fetch's range read from the server's table and B's
    /// transaction per chunk, then B's read-back and SHA-256.
    struct BlobResult {
        var bytes: Int
        var addSeconds: Double
        var uploadSeconds: Double
        var fetchSeconds: Double
        var baselineUploadSeconds: Double
        var baselineFetchSeconds: Double
        var matches: Bool
        /// From the server's log: time inside the HTTP server for the PUTs and for the ranged GETs.
        var serverPutSeconds: Double
        var serverGetSeconds: Double

        func mbPerSecond(_ seconds: Double) -> Double { Double(bytes) / 1_048_576 / seconds }
    }

    func measureBlobs() throws -> BlobResult {
        let bytes = sizes.pushOps >= 100_000 ? 64 << 20 : 16 << 20
        let root = directory + "/sync-blobs"
        try? FileManager.default.removeItem(atPath: root)
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        defer { if !keep { try? FileManager.default.removeItem(atPath: root) } }
        var random = SplitMix64(seed: seed ^ 0xB10B)
        var content = [UInt8](repeating: 0, count: bytes)
        content.withUnsafeMutableBytes { raw in
            let words = raw.bindMemory(to: UInt64.self)
            for index in words.indices { words[index] = random.next() }
        }
        let file = root + "/file.bin"
        try Data(content).write(to: URL(fileURLWithPath: file))
        let expected = BlobRef.of(content)

        let rig = try SyncRig(directory: root + "/server", logged: true, maintenance: MaintenancePolicy())
        defer { rig.stop() }
        let libraryID = try rig.addLibrary("blobs")
        var ids = SplitMix64(seed: seed ^ 0xB10C)
        let a = try rig.device(user: "blobs", libraryID: libraryID, path: root + "/a.chronicle", deviceID: ids.uuid(), seed: seed ^ 0xB10D)
        let b = try rig.device(user: "blobs", libraryID: libraryID, path: root + "/b.chronicle", deviceID: ids.uuid(), seed: seed ^ 0xB10E)

        progress("sync blobs: a \(bytes >> 20) MiB file added on A, uploaded over HTTP, fetched by B…")
        var t0 = nowNanoseconds()
        let ref = try a.store.addBlob(file: file)
        let addSeconds = Double(nowNanoseconds() - t0) / 1e9
        t0 = nowNanoseconds()
        let engineA = a.engine
        let report = try runBlocking { await engineA.syncOnce() }
        let uploadSeconds = Double(nowNanoseconds() - t0) / 1e9
        let serverPutSeconds = rig.logLines().filter { $0.event == "request" && $0.method == "PUT" }.reduce(0) { $0 + $1.milliseconds } / 1000
        guard report.blobsUploaded == 1, report.blobBytesSent == Int64(bytes) else {
            throw BenchError("sync blobs: the upload ended with \(report.blobsUploaded) files, \(report.blobBytesSent) bytes sent (\(report.blobError ?? "no error"))")
        }
        t0 = nowNanoseconds()
        let engineB = b.engine
        _ = try runBlocking { try await engineB.fetchBlob(ref) }
        let fetchSeconds = Double(nowNanoseconds() - t0) / 1e9
        let serverGetSeconds = rig.logLines().filter { $0.event == "request" && $0.method == "GET" && $0.path?.contains("/blobs/") == true }
            .reduce(0) { $0 + $1.milliseconds } / 1000
        let fetched = try b.store.blob(ref)
        let matches = ref == expected && fetched.map(BlobRef.of) == expected

        progress("sync blobs: the baseline, raw SQLite doing the same SQL work…")
        let (baselineUpload, baselineFetch) = try blobBaseline(content, in: root)
        return BlobResult(bytes: bytes, addSeconds: addSeconds, uploadSeconds: uploadSeconds, fetchSeconds: fetchSeconds,
                          baselineUploadSeconds: baselineUpload, baselineFetchSeconds: baselineFetch, matches: matches,
                          serverPutSeconds: serverPutSeconds, serverGetSeconds: serverGetSeconds)
    }

    /// The upload's and the fetch's SQL with no HTTP and no engine: seconds for each.
    private func blobBaseline(_ content: [UInt8], in root: String) throws -> (upload: Double, fetch: Double) {
        let ddl = """
            CREATE TABLE blobs (hash TEXT PRIMARY KEY NOT NULL, length INTEGER NOT NULL, received INTEGER NOT NULL,
                                complete INTEGER NOT NULL DEFAULT 0, created_at INTEGER NOT NULL, completed_at INTEGER);
            CREATE TABLE chunks (hash TEXT NOT NULL REFERENCES blobs(hash) ON DELETE CASCADE, offset INTEGER NOT NULL,
                                 data BLOB NOT NULL, PRIMARY KEY (hash, offset));
            """
        let hash = BlobRef.of(content).hex
        let chunk = BlobLimits.chunkBytes
        let length = Int64(content.count)
        /// One side's per-chunk transaction, and its read-back and digest at the end.
        func receive(into db: RawDatabase, read: (Int64) throws -> [UInt8]) throws {
            try db.run("INSERT INTO blobs(hash, length, received, created_at) VALUES (?1, ?2, 0, 0)", [.text(hash), .integer(length)])
            var offset: Int64 = 0
            while offset < length {
                // A transfer's worth of chunks read, then stored in one transaction.
                var pieces: [[UInt8]] = []
                var end = offset
                while end < length, end - offset < Int64(BlobLimits.transferBytes) {
                    let piece = try read(end)
                    pieces.append(piece)
                    end += Int64(piece.count)
                }
                try db.exec("BEGIN IMMEDIATE")
                _ = try db.scalarInt("SELECT received FROM blobs WHERE hash = ?1", [.text(hash)])
                var at = offset
                for piece in pieces {
                    try db.run(try db.prepare("INSERT INTO chunks(hash, offset, data) VALUES (?1, ?2, ?3)"), [.text(hash), .integer(at)],
                               blob: piece, at: 3)
                    at += Int64(piece.count)
                }
                try db.run("UPDATE blobs SET received = ?2 WHERE hash = ?1", [.text(hash), .integer(end)])
                try db.exec("COMMIT")
                offset = end
            }
            let hasher = SHA256Hasher()
            let select = try db.prepare("SELECT data FROM chunks WHERE hash = ?1 ORDER BY offset")
            try db.bind(select, [.text(hash)])
            while sqlite3_step(select) == SQLITE_ROW {
                hasher.update(UnsafeRawBufferPointer(start: sqlite3_column_blob(select, 0), count: Int(sqlite3_column_bytes(select, 0))))
            }
            sqlite3_reset(select)
            guard BlobRef(digest: hasher.finalize()).hex == hash else { throw BenchError("sync blobs: the baseline's bytes do not hash to the file's address") }
            try db.run("UPDATE blobs SET complete = 1 WHERE hash = ?1", [.text(hash)])
        }
        /// A chunk read from `db` as the sending side reads it.
        func reader(_ db: RawDatabase) throws -> (Int64) throws -> [UInt8] {
            let select = try db.prepare("SELECT data FROM chunks WHERE hash = ?1 AND offset = ?2")
            return { offset in
                try db.bind(select, [.text(hash), .integer(offset)])
                defer { sqlite3_reset(select) }
                guard sqlite3_step(select) == SQLITE_ROW else { throw BenchError("sync blobs: the baseline lost a chunk") }
                return [UInt8](UnsafeRawBufferPointer(start: sqlite3_column_blob(select, 0), count: Int(sqlite3_column_bytes(select, 0))))
            }
        }
        // The sender's table, filled untimed (as addBlob filled A's before the upload).
        let device = try RawDatabase(path: root + "/base-device.sqlite")
        try device.exec(ddl)
        try device.exec("BEGIN")
        try device.run("INSERT INTO blobs(hash, length, received, created_at) VALUES (?1, ?2, ?2, 0)", [.text(hash), .integer(length)])
        for offset in stride(from: 0, to: content.count, by: chunk) {
            try device.run(try device.prepare("INSERT INTO chunks(hash, offset, data) VALUES (?1, ?2, ?3)"), [.text(hash), .integer(Int64(offset))],
                           blob: Array(content[offset..<min(content.count, offset + chunk)]), at: 3)
        }
        try device.exec("COMMIT")
        let server = try RawDatabase(path: root + "/base-server.sqlite")
        try server.exec(ddl)
        var t0 = nowNanoseconds()
        try receive(into: server, read: try reader(device))
        let upload = Double(nowNanoseconds() - t0) / 1e9
        let other = try RawDatabase(path: root + "/base-other.sqlite")
        try other.exec(ddl)
        t0 = nowNanoseconds()
        try receive(into: other, read: try reader(server))
        let fetch = Double(nowNanoseconds() - t0) / 1e9
        return (upload, fetch)
    }
}
