import ChronicleCore
import Foundation

/// One blob this store knows of (`DeviceStore.blobs()`).
public struct BlobInfo: Sendable, Equatable {
    /// Where the blob's bytes are: queued here, uploaded, or fetched (whole or in part).
    public enum State: String, Sendable {
        /// Added here; the server does not hold all of it yet.
        case queued
        /// Added here, and the server holds it.
        case uploaded
        /// Added here; the server refused it (`refusal` says why) and it is not sent again.
        case refused
        /// Being fetched from the server: `received` bytes so far.
        case fetching
        /// Fetched from the server, whole.
        case fetched
    }

    public var ref: BlobRef
    public var length: Int64
    /// Bytes held here.
    public var received: Int64
    /// Bytes the server said it holds (blobs added here).
    public var uploaded: Int64
    public var state: State
    public var mediaType: String?
    /// Milliseconds since 1970 (this device's clock).
    public var addedAt: Int64
    public var refusal: String?

    /// Every byte is here: it can be read.
    public var isHeld: Bool { state != .fetching }
}

/// Blobs (`BlobRef`): large files kept in the store beside the log, in chunks. Those added here
/// wait in their own queue for the engine to upload them, apart from the outbox, and those
/// other devices added are fetched when asked for. An op names one by its address
/// (`ref.description` in a field such as `blob_ref`).
///
/// ```swift
/// let ref = try store.addBlob(file: "/tmp/photo.jpg", mediaType: "image/jpeg")
/// try store.write(.create(photo, type: "photo.attach", fields: ["job_id": .text(job), "blob_ref": .text(ref.description)]))
/// ```
extension DeviceStore {
    static let blobColumns = "hash, length, received, uploaded, state, media_type, added_at, refusal"

    static func blobInfo(_ row: Row) throws -> BlobInfo {
        guard let ref = BlobRef(row.text(0)), let state = BlobInfo.State(rawValue: row.text(4)) else {
            throw ChronicleError(.invariantViolated, "chronicle_blobs holds a row that is not a blob ('\(row.text(0).prefix(80))', \(row.text(4))).")
        }
        return BlobInfo(ref: ref, length: row.int(1), received: row.int(2), uploaded: row.int(3), state: state,
                        mediaType: row.optionalText(5), addedAt: row.int(6), refusal: row.optionalText(7))
    }

    /// One blob's row, if the store knows of it.
    static func blobInfo(_ ref: BlobRef, in db: Database) throws -> BlobInfo? {
        try db.query("SELECT \(blobColumns) FROM chronicle_blobs WHERE hash = ?1", [.text(ref.hex)], blobInfo).first
    }

    /// Adds `bytes` as a blob to upload and returns its address; adding the same bytes again changes nothing.
    @discardableResult
    public func addBlob(_ bytes: [UInt8], mediaType: String? = nil) throws -> BlobRef {
        let ref = BlobRef.of(bytes)
        try addBlob(ref, length: Int64(bytes.count), mediaType: mediaType) { append in
            var offset = 0
            repeat {
                let end = min(bytes.count, offset + BlobLimits.chunkBytes)
                try append(Array(bytes[offset..<end]))
                offset = end
            } while offset < bytes.count
        }
        return ref
    }

    /// Adds the file at `path` as a blob to upload and returns its address. The file is read
    /// twice, a chunk at a time (its address first, then its bytes): it never sits in memory whole.
    @discardableResult
    public func addBlob(file path: String, mediaType: String? = nil) throws -> BlobRef {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue,
              let handle = FileHandle(forReadingAtPath: path) else {
            throw ChronicleError(.fileUnreadable, "Cannot read \(path): it does not exist or is not readable.")
        }
        defer { try? handle.close() }
        let hasher = SHA256Hasher()
        var length: Int64 = 0
        while let data = try handle.read(upToCount: BlobLimits.chunkBytes), !data.isEmpty {
            data.withUnsafeBytes { hasher.update($0) }
            length += Int64(data.count)
        }
        guard length <= BlobLimits.blobBytesMax else {
            throw ChronicleError(.invalidValue, "\(path) has \(length) bytes; a blob holds at most \(BlobLimits.blobBytesMax).")
        }
        let ref = BlobRef(digest: hasher.finalize())
        try handle.seek(toOffset: 0)
        try addBlob(ref, length: length, mediaType: mediaType) { append in
            var total: Int64 = 0
            repeat {
                let data = try handle.read(upToCount: BlobLimits.chunkBytes) ?? Data()
                total += Int64(data.count)
                guard total <= length else { break }
                try append([UInt8](data))
                if data.isEmpty { break }
            } while total < length
            guard total == length else {
                throw ChronicleError(.fileUnreadable, "\(path) changed while it was read (\(length) bytes, then \(total)); nothing was added.")
            }
        }
        return ref
    }

    /// `chunks` hands over the blob's bytes in order (at least one chunk, maybe empty).
    private func addBlob(_ ref: BlobRef, length: Int64, mediaType: String?,
                         chunks: ((([UInt8]) throws -> Void)) throws -> Void) throws {
        guard length <= BlobLimits.blobBytesMax else {
            throw ChronicleError(.invalidValue, "A blob holds at most \(BlobLimits.blobBytesMax) bytes, not \(length).")
        }
        let now = clock.nowMilliseconds()
        try writeTransaction { db in
            if let held = try Self.blobInfo(ref, in: db) {
                // Held whole already (added, or fetched): nothing changes.
                if held.isHeld { return }
                // Part of it was being fetched: the bytes are here now, and it is sent like a new one.
                try db.execute("DELETE FROM chronicle_blobs WHERE hash = ?1", [.text(ref.hex)])
            }
            try db.execute("""
                INSERT INTO chronicle_blobs(hash, length, received, state, media_type, added_at) VALUES (?1, ?2, ?2, 'queued', ?3, ?4)
                """, [.text(ref.hex), .integer(length), mediaType.map(Value.text) ?? .null, .integer(now)])
            var offset: Int64 = 0
            try chunks { bytes in
                try BlobChunkRows.insert(ref.hex, offset: offset, bytes, in: db)
                offset += Int64(bytes.count)
            }
        }
    }

    /// Every blob this store knows of, oldest first.
    public func blobs() throws -> [BlobInfo] {
        try read { db in try db.query("SELECT \(Self.blobColumns) FROM chronicle_blobs ORDER BY added_at, hash", [], Self.blobInfo) }
    }

    /// One blob, if this store knows of it.
    public func blobInfo(_ ref: BlobRef) throws -> BlobInfo? {
        try read { db in try Self.blobInfo(ref, in: db) }
    }

    /// Blobs added here that the server does not hold yet, in the order they were added.
    public func queuedBlobs() throws -> [BlobInfo] {
        try read { db in
            try db.query("SELECT \(Self.blobColumns) FROM chronicle_blobs WHERE state = 'queued' ORDER BY added_at, hash", [], Self.blobInfo)
        }
    }

    /// Up to `count` bytes of a blob held here, from `offset` (fewer at its end); nil where this
    /// store does not hold those bytes.
    public func blobBytes(_ ref: BlobRef, offset: Int64, count: Int) throws -> [UInt8]? {
        try read { db in try Self.blobBytes(ref, offset: offset, count: count, in: db) }
    }

    static func blobBytes(_ ref: BlobRef, offset: Int64, count: Int, in db: Database) throws -> [UInt8]? {
        guard let received = try db.scalarInt("SELECT received FROM chronicle_blobs WHERE hash = ?1", [.text(ref.hex)]),
              offset >= 0, offset <= received else { return nil }
        return try BlobChunkRows.read(ref.hex, from: offset, to: min(received, offset + Int64(max(0, count))), in: db)
    }

    /// The whole blob, if it is held here (small ones: `writeBlob(_:to:)` streams large ones to a file).
    public func blob(_ ref: BlobRef) throws -> [UInt8]? {
        try read { db in
            guard let info = try Self.blobInfo(ref, in: db),
                  info.isHeld else { return nil }
            return try Self.blobBytes(ref, offset: 0, count: Int(info.length), in: db)
        }
    }

    /// Writes a blob held here to a file at `path`, a chunk at a time; false where it is not held here.
    public func writeBlob(_ ref: BlobRef, to path: String) throws -> Bool {
        try read { db in
            guard let info = try Self.blobInfo(ref, in: db),
                  info.isHeld else { return false }
            guard FileManager.default.createFile(atPath: path, contents: nil), let out = FileHandle(forWritingAtPath: path) else {
                throw ChronicleError(.fileUnreadable, "Cannot write \(path).")
            }
            defer { try? out.close() }
            try db.statement("SELECT data FROM chronicle_blob_chunks WHERE hash = ?1 ORDER BY offset").forEach([.text(ref.hex)]) { row in
                try row.withBytes(0) { data in try out.write(contentsOf: Data(data)) }
            }
            return true
        }
    }

    /// Records what the server said it holds of a blob added here; once it holds all of it, the
    /// blob leaves the queue.
    public func recordBlobUploaded(_ ref: BlobRef, serverHolds received: Int64, complete: Bool) throws {
        let now = clock.nowMilliseconds()
        try writeTransaction { db in
            try db.execute("""
                UPDATE chronicle_blobs SET uploaded = min(length, max(0, ?2)),
                  state = CASE WHEN ?3 THEN 'uploaded' ELSE state END, done_at = CASE WHEN ?3 THEN ?4 ELSE done_at END
                WHERE hash = ?1 AND state = 'queued'
                """, [.text(ref.hex), .integer(received), .bool(complete), .integer(now)])
        }
    }

    /// Records that the server refused a blob added here (too large, say): it leaves the queue, and
    /// `blobs()` says why.
    public func recordBlobRefused(_ ref: BlobRef, reason: String) throws {
        let now = clock.nowMilliseconds()
        try writeTransaction { db in
            try db.execute("UPDATE chronicle_blobs SET state = 'refused', refusal = ?2, done_at = ?3 WHERE hash = ?1 AND state = 'queued'",
                           [.text(ref.hex), .text(reason), .integer(now)])
        }
    }

    /// Appends a range fetched from the server to a blob being fetched (made on the first one, which
    /// starts at 0). The last range completes it once its bytes hash to its address; otherwise what
    /// was fetched is dropped and the fetch starts again. Returns the bytes now held.
    @discardableResult
    public func appendFetchedBlob(_ ref: BlobRef, length: Int64, offset: Int64, bytes: [UInt8]) throws -> Int64 {
        let now = clock.nowMilliseconds()
        return try writeTransaction { db in
            let held = try Self.blobInfo(ref, in: db)
            if let held, held.isHeld { return held.length }
            let received = held?.received ?? 0
            guard held == nil || held?.length == length, offset == received, offset + Int64(bytes.count) <= length else {
                throw ChronicleError(.invalidValue, "A fetched range of \(ref) (\(bytes.count) bytes at \(offset) of \(length)) does not continue the \(received) bytes held.")
            }
            if held == nil {
                try db.execute("""
                    INSERT INTO chronicle_blobs(hash, length, received, state, added_at) VALUES (?1, ?2, 0, 'fetching', ?3)
                    """, [.text(ref.hex), .integer(length), .integer(now)])
            }
            try BlobChunkRows.insert(ref.hex, offset: offset, bytes, in: db)
            let total = offset + Int64(bytes.count)
            guard total == length else {
                try db.execute("UPDATE chronicle_blobs SET received = ?2 WHERE hash = ?1", [.text(ref.hex), .integer(total)])
                return total
            }
            guard try BlobChunkRows.digest(ref.hex, in: db) == ref else {
                try db.execute("DELETE FROM chronicle_blobs WHERE hash = ?1", [.text(ref.hex)])
                return 0
            }
            try db.execute("UPDATE chronicle_blobs SET received = ?2, state = 'fetched', done_at = ?3 WHERE hash = ?1",
                           [.text(ref.hex), .integer(total), .integer(now)])
            return total
        }
    }

    /// `verify`'s check of the files: each one's chunks follow one another from 0 to what is held,
    /// and those held whole hash to their address.
    func verifyBlobs() throws -> VerifyCheck {
        var problems: [String] = []
        var held = 0
        var bytes: Int64 = 0
        try read { db in
            for info in try db.query("SELECT \(Self.blobColumns) FROM chronicle_blobs ORDER BY hash", [], Self.blobInfo) {
                if let problem = try BlobChunkRows.problem(info.ref.hex, received: info.received, whole: info.isHeld, in: db) {
                    problems.append(problem)
                }
                held += 1
                bytes += info.received
            }
        }
        return VerifyCheck(name: "files (blobs) whole and matching their addresses", passed: problems.isEmpty,
                           detail: problems.isEmpty ? "\(held) file\(held == 1 ? "" : "s"), \(bytes) bytes" : problems.prefix(5).joined(separator: "; "))
    }

    /// The files this store holds that no row has named for `period` (ms) and more (`BlobNames`).
    /// Each time is compared on the clock it came from: the file's arrival here with this
    /// device's own clock, which recorded it; a row's delete with the server's time of it
    /// (`deleted_at`) against the newest server time this store holds, since this device's
    /// clock may be years off the server's. A row whose delete is still queued names its files
    /// (its confirmed copy does). What `dropUnnamedBlobs` deletes.
    public func unnamedBlobs(unnamedFor period: Int64) throws -> [BlobInfo] {
        let now = clock.nowMilliseconds()
        return try read { db in try Self.unnamedBlobs(Self.unnamedHorizons(period, now: now, in: db), projection: projection, in: db) }
    }

    /// Before when a file must have arrived (this device's clock), and a row been deleted (the
    /// server's), to count as unnamed for `period`. Saturating: a period past the clocks' range
    /// names every file.
    static func unnamedHorizons(_ period: Int64, now: Int64, in db: Database) throws -> (heldBefore: Int64, deletedBefore: Int64) {
        let serverNow = try newestServerTime(in: db) ?? 0
        let (held, heldOverflow) = now.subtractingReportingOverflow(period)
        let (deleted, deletedOverflow) = serverNow.subtractingReportingOverflow(period)
        return (heldOverflow ? Int64.min : held, deletedOverflow ? Int64.min : deleted)
    }

    static func unnamedBlobs(_ horizons: (heldBefore: Int64, deletedBefore: Int64), projection: ProjectionSchema,
                             in db: Database) throws -> [BlobInfo] {
        let old = try db.query("SELECT \(blobColumns) FROM chronicle_blobs WHERE added_at < ?1 ORDER BY added_at, hash",
                               [.integer(horizons.heldBefore)], blobInfo)
        if old.isEmpty { return [] }
        let named = try BlobNames.named(in: db, projection: projection, deletedBefore: horizons.deletedBefore, pendingName: true)
        return old.filter { !named.contains($0.ref.hex) }
    }

    /// Deletes the files `unnamedBlobs(unnamedFor:)` lists, in one transaction (a write naming
    /// one meanwhile waits, and keeps it); returns how many and the bytes they held here. With
    /// `givesSpaceBack`, the file is rewritten afterwards (`VACUUM`) where any was deleted.
    /// `chronicle compact` runs it for files unnamed for 30 days (`--unnamed-file-days`).
    @discardableResult
    public func dropUnnamedBlobs(unnamedFor period: Int64, givesSpaceBack: Bool = false) throws -> (blobs: Int, bytes: Int64) {
        let now = clock.nowMilliseconds()
        let dropped: (blobs: Int, bytes: Int64) = try writeTransaction { db in
            let doomed = try Self.unnamedBlobs(Self.unnamedHorizons(period, now: now, in: db), projection: projection, in: db)
            let delete = try db.statement("DELETE FROM chronicle_blobs WHERE hash = ?1")
            for info in doomed { try delete.execute([.text(info.ref.hex)]) }
            return (doomed.count, doomed.reduce(0) { $0 + $1.received })
        }
        if givesSpaceBack && dropped.blobs > 0 { try vacuum() }
        return dropped
    }

    /// Blobs added here still queued, and their bytes not yet on the server.
    public func blobUploadBacklog() throws -> (count: Int, bytes: Int64) {
        try read { db in
            try db.query("SELECT count(*), coalesce(sum(length - uploaded), 0) FROM chronicle_blobs WHERE state = 'queued'") {
                (Int($0.int(0)), $0.int(1))
            }.first ?? (0, 0)
        }
    }
}
