import ChronicleCore
import ChronicleStore
import Foundation

/// Where a server keeps its libraries' blobs (`BlobRef`): uploaded chunk by chunk, each
/// continuing what is held, checked against the address once the last arrives, read in ranges.
/// `ServerBlobFiles` is the default (a SQLite file per library in the data directory); servers
/// sharing PostgreSQL keep them there (`PostgresBlobStorage`).
public protocol BlobStorage: Sendable {
    func status(library: UUID, blob: BlobRef) throws(ProtocolError) -> BlobStatus
    func put(library: UUID, blob: BlobRef, length: Int64, offset: Int64, bytes: [UInt8]) throws(ProtocolError) -> BlobStatus
    func range(library: UUID, blob: BlobRef, offset: Int64, count: Int) throws(ProtocolError) -> BlobRange
    /// Removes every blob of `library` (the library was deleted).
    func deleteLibrary(_ library: UUID) throws
    /// The complete blobs of `library`, by address.
    func complete(library: UUID) throws(ProtocolError) -> [BlobStatus]
    /// Deletes, in every library, uploads begun before `before` (ms since 1970) and never completed;
    /// returns how many. A device that comes back starts such a file again from offset 0.
    func dropAbandonedUploads(before: Int64) throws -> Int
    /// The libraries holding any blob.
    func libraries() throws -> [UUID]
    /// The complete blobs of `library` completed before `before` (ms since 1970): hex digest and length.
    func completed(library: UUID, before: Int64) throws -> [String: Int64]
    /// Deletes these blobs of `library` (hex digests); returns the bytes they held.
    func delete(library: UUID, blobs: [String]) throws -> Int64
    /// Gives back to the file system the space deletions left in `library`'s blobs, where that is
    /// worth a rewrite (nothing where the storage does so itself).
    func giveSpaceBack(library: UUID) throws
}

extension BlobStorage {
    public func giveSpaceBack(library: UUID) throws {}
}

extension BlobStorage {
    /// Copies every complete blob of `library` from `source` into this storage, a range at a time
    /// (a move into PostgreSQL, a backup out of it); blobs held whole here already are left as
    /// they are. Returns the blobs and bytes copied.
    @discardableResult
    public func copyBlobs(of library: UUID, from source: any BlobStorage) throws(ProtocolError) -> (blobs: Int, bytes: Int64) {
        var copied = (blobs: 0, bytes: Int64(0))
        for held in try source.complete(library: library) {
            guard let ref = BlobRef(held.blob), let length = held.length else { continue }
            var status = try status(library: library, blob: ref)
            if status.complete { continue }
            // A part left by an earlier run: the copy goes on from it.
            while !status.complete {
                let range = try source.range(library: library, blob: ref, offset: status.received, count: BlobLimits.chunkBytes)
                status = try put(library: library, blob: ref, length: length, offset: status.received, bytes: range.bytes)
                copied.bytes += Int64(range.bytes.count)
            }
            copied.blobs += 1
        }
        return copied
    }
}

/// The rules every `BlobStorage` applies, so both keep the same answers and codes.
public enum BlobRules {
    /// What a chunk does to what is held of its blob.
    public enum Decision: Equatable {
        /// Append it: it starts where what is held ends.
        case append
        /// Nothing to do: every byte of it is held already (a retried chunk, or a blob another
        /// device finished), and the answer is the status as it stands.
        case held
    }

    /// The checks that need nothing stored: the caps and the chunk's place in the blob. Every
    /// number here came from the request, so none is added before it is known small: `length`
    /// is within the cap and `count` within the chunk cap before `length - count` is taken.
    public static func check(length: Int64, offset: Int64, count: Int) throws(ProtocolError) {
        guard length >= 0 else { throw ProtocolError(400, .badBlobLength, "A blob's length is 0 or more; got \(length).") }
        guard length <= BlobLimits.blobBytesMax else {
            throw ProtocolError(413, .blobTooLarge, "A blob holds at most \(BlobLimits.blobBytesMax) bytes (expected ≤ \(BlobLimits.blobBytesMax), actual \(length)).")
        }
        guard count <= BlobLimits.chunkBytesMax else {
            throw ProtocolError(413, .chunkTooLarge, "A chunk holds at most \(BlobLimits.chunkBytesMax) bytes (expected ≤ \(BlobLimits.chunkBytesMax), actual \(count)); send the blob in smaller chunks.")
        }
        guard count >= 0, offset >= 0, offset <= length - Int64(count) else {
            throw ProtocolError(400, .chunkOutOfRange, "A chunk of \(count) bytes at offset \(offset) does not fit in a blob of \(length) bytes.")
        }
        guard count > 0 || length == 0 else {
            throw ProtocolError(400, .emptyChunk, "A chunk of a blob that is not empty carries at least one byte.")
        }
    }

    /// What to do with a chunk, given what is held of its blob (nil: nothing).
    public static func decide(held: BlobStatus?, blob: BlobRef, length: Int64, offset: Int64, count: Int) throws(ProtocolError) -> Decision {
        let heldLength = held?.length
        if let heldLength, heldLength != length {
            throw ProtocolError(409, .blobLengthMismatch, "This blob's upload began with a length of \(heldLength) bytes, not \(length); a blob's bytes, and so its length, follow from its address.")
        }
        let received = held?.received ?? 0
        // After `check`: offset and count lie within a blob's cap, so their sum cannot overflow.
        if held?.complete == true || (count > 0 && offset + Int64(count) <= received) { return .held }
        guard offset == received else {
            throw ProtocolError(409, .blobOffsetMismatch, "The server holds \(received) bytes of \(blob); send the next chunk from offset \(received), not \(offset).")
        }
        return .append
    }

    /// The refusal of a blob whose bytes do not hash to its address (the upload is discarded).
    public static func digestMismatch(_ blob: BlobRef, actual: BlobRef) -> ProtocolError {
        ProtocolError(422, .blobDigestMismatch, "The bytes received hash to \(actual), not \(blob); the upload was discarded: send it again from offset 0.")
    }

    public static func notFound(_ blob: BlobRef) -> ProtocolError {
        ProtocolError(404, .blobNotFound, "The server holds no blob \(blob) in this library; its device uploads it when it next syncs.")
    }

    public static func incomplete(_ blob: BlobRef, received: Int64, length: Int64) -> ProtocolError {
        ProtocolError(409, .blobIncomplete, "The server holds \(received) of the \(length) bytes of \(blob) so far; it can be downloaded once its upload is complete.")
    }

    /// The part of a complete blob of `length` bytes a range asks for, capped at `BlobLimits.rangeBytesMax`.
    public static func clamp(offset: Int64, count: Int, length: Int64) throws(ProtocolError) -> (offset: Int64, count: Int) {
        guard offset >= 0, count >= 0 else { throw ProtocolError(400, .badRange, "A range starts at 0 or more and asks for 0 or more bytes.") }
        guard offset < length || (offset == 0 && length == 0) else {
            throw ProtocolError(416, .rangeNotSatisfiable, "The blob has \(length) bytes; a range cannot start at \(offset).")
        }
        return (offset, Int(min(Int64(min(count, BlobLimits.rangeBytesMax)), length - offset)))
    }
}

/// Blobs in the data directory: `blobs/<library>.sqlite`, one file per library, made on its
/// first upload (`Schemas/store/server-blobs-v1.md`). Each chunk is a row; a blob is complete once
/// its chunks cover its length and hash to its address. Beside the library's own file, so an
/// upload never waits on the library's writer, nor a push on an upload.
public struct ServerBlobFiles: BlobStorage {
    public let dataDirectory: String
    /// `giveSpaceBack` rewrites a file only where at least this much of it is free (and more than a quarter).
    public var rewriteFreeBytesMin: Int64 = 64 << 20
    /// The code of the answers a damaged blobs file gives (503).
    /// The format of a blobs file (`PRAGMA user_version`); a later one is refused.
    public static let formatVersion: Int64 = 1

    /// The server's clock: uploads' times are compared with it (`dropAbandonedUploads`,
    /// `completed(library:before:)`), so they are read from it too.
    public let clock: any ChronicleClock

    public init(dataDirectory: String, clock: any ChronicleClock = SystemClock()) {
        self.dataDirectory = dataDirectory
        self.clock = clock
    }

    public static func path(of library: UUID, in dataDirectory: String) -> String {
        (dataDirectory as NSString).appendingPathComponent("blobs/\(library.lowercased).sqlite")
    }

    static let statements = [
        """
        CREATE TABLE IF NOT EXISTS chronicle_blobs (
          hash TEXT PRIMARY KEY NOT NULL CHECK (length(hash) = 64),
          length INTEGER NOT NULL CHECK (length >= 0),
          received INTEGER NOT NULL CHECK (received BETWEEN 0 AND length),
          complete INTEGER NOT NULL DEFAULT 0 CHECK (complete IN (0, 1) AND (complete = 0 OR received = length)),
          created_at INTEGER NOT NULL,
          completed_at INTEGER
        )
        """,
        """
        CREATE TABLE IF NOT EXISTS chronicle_blob_chunks (
          hash TEXT NOT NULL REFERENCES chronicle_blobs(hash) ON DELETE CASCADE,
          offset INTEGER NOT NULL CHECK (offset >= 0),
          data BLOB NOT NULL,
          PRIMARY KEY (hash, offset)
        )
        """,
    ]

    /// Opens library `library`'s blobs file; nil where it does not exist and `create` is false.
    func open(_ library: UUID, create: Bool) throws(ProtocolError) -> Database? {
        let path = Self.path(of: library, in: dataDirectory)
        if !create, !FileManager.default.fileExists(atPath: path) { return nil }
        do {
            if create {
                try PrivateFiles.directory((path as NSString).deletingLastPathComponent)
            }
            var options = Database.Options()
            options.create = create
            let db = try Database(path: path, options: options)
            let version = try db.scalarInt("PRAGMA user_version") ?? 0
            guard version <= Self.formatVersion else {
                throw ProtocolError(503, .blobStoreTooNew, "\(path) is of blobs format \(version); this server reads up to \(Self.formatVersion). Run the server that wrote it, or a later one.")
            }
            if version < Self.formatVersion {
                try db.transaction { db in
                    for statement in Self.statements { try db.execute(statement) }
                    try db.execute("PRAGMA user_version = \(Self.formatVersion)")
                }
            }
            return db
        } catch let error as ProtocolError {
            throw error
        } catch {
            throw Self.failed(path, error)
        }
    }

    static func failed(_ path: String, _ error: any Error) -> ProtocolError {
        if let sqlite = error as? SQLiteError, sqlite.isBusy {
            return ProtocolError(503, .blobStoreBusy, "The library's file store stayed locked by another upload; try again.", detail: path, retryAfterSeconds: 1)
        }
        if let sqlite = error as? SQLiteError, sqlite.isCorrupt {
            return ProtocolError(503, .blobStoreDamaged, "The library's file store on the server is damaged; the operator salvages it (`chronicle server salvage --files`) or restores it from a backup.",
                                 detail: "\(path): \(sqlite.message)", retryAfterSeconds: 300)
        }
        return ProtocolError(503, .blobStoreFailed, "The library's file store on the server could not be used; try again shortly.", detail: "\(path): \(error)", retryAfterSeconds: 5)
    }

    static func held(_ blob: BlobRef, in db: Database) throws -> BlobStatus? {
        try db.query("SELECT length, received, complete FROM chronicle_blobs WHERE hash = ?1", [.text(blob.hex)]) {
            BlobStatus(blob: blob, length: $0.int(0), received: $0.int(1), complete: $0.int(2) == 1)
        }.first
    }

    public func status(library: UUID, blob: BlobRef) throws(ProtocolError) -> BlobStatus {
        guard let db = try open(library, create: false) else { return BlobStatus(blob: blob, length: nil, received: 0, complete: false) }
        do {
            return try Self.held(blob, in: db) ?? BlobStatus(blob: blob, length: nil, received: 0, complete: false)
        } catch {
            throw Self.failed(db.path, error)
        }
    }

    public func put(library: UUID, blob: BlobRef, length: Int64, offset: Int64, bytes: [UInt8]) throws(ProtocolError) -> BlobStatus {
        try BlobRules.check(length: length, offset: offset, count: bytes.count)
        guard let db = try open(library, create: true) else { throw BlobRules.notFound(blob) }
        let now = clock.nowMilliseconds()
        do {
            // Throwing a refusal out of the transaction rolls it back; a digest mismatch
            // discards the upload, so it is decided inside and thrown after the commit.
            let (status, mismatch): (BlobStatus, BlobRef?) = try db.transaction { db in
                let held = try Self.held(blob, in: db)
                guard try BlobRules.decide(held: held, blob: blob, length: length, offset: offset, count: bytes.count) == .append else {
                    return (held ?? BlobStatus(blob: blob, length: length, received: 0, complete: false), nil)
                }
                if held == nil {
                    try db.execute("INSERT INTO chronicle_blobs(hash, length, received, created_at) VALUES (?1, ?2, 0, ?3)",
                                   [.text(blob.hex), .integer(length), .integer(now)])
                }
                try BlobChunkRows.insert(blob.hex, offset: offset, bytes, in: db)
                let received = offset + Int64(bytes.count)
                guard received == length else {
                    try db.execute("UPDATE chronicle_blobs SET received = ?2 WHERE hash = ?1", [.text(blob.hex), .integer(received)])
                    return (BlobStatus(blob: blob, length: length, received: received, complete: false), nil)
                }
                let actual = try BlobChunkRows.digest(blob.hex, in: db)
                guard actual == blob else {
                    try db.execute("DELETE FROM chronicle_blobs WHERE hash = ?1", [.text(blob.hex)])
                    return (BlobStatus(blob: blob, length: nil, received: 0, complete: false), actual)
                }
                try db.execute("UPDATE chronicle_blobs SET received = ?2, complete = 1, completed_at = ?3 WHERE hash = ?1",
                               [.text(blob.hex), .integer(received), .integer(now)])
                return (BlobStatus(blob: blob, length: length, received: received, complete: true), nil)
            }
            if let mismatch { throw BlobRules.digestMismatch(blob, actual: mismatch) }
            return status
        } catch let error as ProtocolError {
            throw error
        } catch {
            throw Self.failed(db.path, error)
        }
    }

    public func range(library: UUID, blob: BlobRef, offset: Int64, count: Int) throws(ProtocolError) -> BlobRange {
        guard let db = try open(library, create: false) else { throw BlobRules.notFound(blob) }
        do {
            return try db.readTransaction { db in
                guard let held = try Self.held(blob, in: db), let length = held.length else { throw BlobRules.notFound(blob) }
                guard held.complete else { throw BlobRules.incomplete(blob, received: held.received, length: length) }
                let (start, wanted) = try BlobRules.clamp(offset: offset, count: count, length: length)
                let bytes = try BlobChunkRows.read(blob.hex, from: start, to: start + Int64(wanted), in: db)
                return BlobRange(offset: start, bytes: bytes, length: length)
            }
        } catch let error as ProtocolError {
            throw error
        } catch {
            throw Self.failed(db.path, error)
        }
    }

    public func complete(library: UUID) throws(ProtocolError) -> [BlobStatus] {
        guard let db = try open(library, create: false) else { return [] }
        do {
            return try db.query("SELECT hash, length FROM chronicle_blobs WHERE complete = 1 ORDER BY hash") { row in
                BlobRef(row.text(0)).map { BlobStatus(blob: $0, length: row.int(1), received: row.int(1), complete: true) }
            }.compactMap { $0 }
        } catch {
            throw Self.failed(db.path, error)
        }
    }

    public func dropAbandonedUploads(before: Int64) throws -> Int {
        var dropped = 0
        for library in Self.libraries(in: dataDirectory) {
            guard let db = try open(library, create: false) else { continue }
            try db.transaction { db in
                try db.execute("DELETE FROM chronicle_blobs WHERE complete = 0 AND created_at < ?1", [.integer(before)])
                dropped += db.changes
            }
        }
        return dropped
    }

    public func libraries() throws -> [UUID] { Self.libraries(in: dataDirectory) }

    public func completed(library: UUID, before: Int64) throws -> [String: Int64] {
        guard let db = try open(library, create: false) else { return [:] }
        var found: [String: Int64] = [:]
        try db.statement("SELECT hash, length FROM chronicle_blobs WHERE complete = 1 AND completed_at < ?1")
            .forEach([.integer(before)]) { found[$0.text(0)] = $0.int(1) }
        return found
    }

    /// Deletes the blobs in one transaction.
    public func delete(library: UUID, blobs: [String]) throws -> Int64 {
        guard !blobs.isEmpty, let db = try open(library, create: false) else { return 0 }
        return try db.transaction { db in
            var bytes: Int64 = 0
            let length = try db.statement("SELECT length FROM chronicle_blobs WHERE hash = ?1")
            let delete = try db.statement("DELETE FROM chronicle_blobs WHERE hash = ?1")
            for hash in blobs {
                bytes += try length.map([.text(hash)]) { $0.int(0) }.first ?? 0
                try delete.execute([.text(hash)])
            }
            return bytes
        }
    }

    /// Where more than a quarter of the file (and at least `rewriteFreeBytesMin`) is free,
    /// rewrites it (`VACUUM`). Only uploads to this library wait meanwhile.
    public func giveSpaceBack(library: UUID) throws {
        guard let db = try open(library, create: false) else { return }
        let pageSize = try db.scalarInt("PRAGMA page_size") ?? 4096
        let free = (try db.scalarInt("PRAGMA freelist_count") ?? 0) * pageSize
        let total = (try db.scalarInt("PRAGMA page_count") ?? 0) * pageSize
        if free >= rewriteFreeBytesMin, free * 4 > total { try db.execute("VACUUM") }
    }

    /// The libraries with a blobs file in `dataDirectory`.
    public static func libraries(in dataDirectory: String) -> [UUID] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: (dataDirectory as NSString).appendingPathComponent("blobs"))) ?? []
        return names.filter { $0.hasSuffix(".sqlite") }.compactMap { UUID(text: String($0.dropLast(7))) }.sorted { $0.lowercased < $1.lowercased }
    }

    public func deleteLibrary(_ library: UUID) throws {
        let path = Self.path(of: library, in: dataDirectory)
        for suffix in ["", "-wal", "-shm"] where FileManager.default.fileExists(atPath: path + suffix) {
            try FileManager.default.removeItem(atPath: path + suffix)
        }
    }
}
