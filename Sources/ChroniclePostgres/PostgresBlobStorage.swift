import ChronicleCore
import ChronicleStore
import Foundation
import ChronicleServerStore

/// Blobs of the libraries ordered in PostgreSQL (server format v4), so that every server sharing
/// the database serves an upload another one began: a row per blob, a row per chunk. The rules
/// are `BlobRules`, as for the files of a lone server (`ServerBlobFiles`).
public struct PostgresBlobStorage: BlobStorage {
    public let pool: PostgresPool

    public init(pool: PostgresPool) { self.pool = pool }

    /// Format 4's tables. Not tied to `chronicle_libraries`: a device may upload a file before its
    /// library's first op reaches the server. Deleted with the library.
    static let statements: [String] = [
        """
        CREATE TABLE chronicle_blobs (
          library_id text NOT NULL,
          hash text NOT NULL CHECK (length(hash) = 64),
          length bigint NOT NULL CHECK (length >= 0),
          received bigint NOT NULL CHECK (received BETWEEN 0 AND length),
          complete boolean NOT NULL DEFAULT false CHECK (NOT complete OR received = length),
          created_at bigint NOT NULL,
          completed_at bigint,
          PRIMARY KEY (library_id, hash)
        )
        """,
        """
        CREATE TABLE chronicle_blob_chunks (
          library_id text NOT NULL,
          hash text NOT NULL,
          "offset" bigint NOT NULL CHECK ("offset" >= 0),
          data bytea NOT NULL,
          PRIMARY KEY (library_id, hash, "offset"),
          FOREIGN KEY (library_id, hash) REFERENCES chronicle_blobs ON DELETE CASCADE
        )
        """,
        // Files are mostly compressed already (audio, photos): stored out of line as they are.
        "ALTER TABLE chronicle_blob_chunks ALTER COLUMN data SET STORAGE EXTERNAL",
    ]

    private static func held(_ library: UUID, _ blob: BlobRef, _ pg: PostgresConnection, forUpdate: Bool) throws -> BlobStatus? {
        let rows = try pg.execute("SELECT length, received, complete FROM chronicle_blobs WHERE library_id = $1 AND hash = $2"
                                  + (forUpdate ? " FOR UPDATE" : ""), [library.lowercased, blob.hex])
        guard rows.count == 1 else { return nil }
        return BlobStatus(blob: blob, length: try rows.int(0, 0), received: try rows.int(0, 1), complete: rows.text(0, 2) == "t")
    }

    private func using<T>(_ body: (PostgresConnection) throws -> T) throws(ProtocolError) -> T {
        do {
            return try pool.withConnection(body)
        } catch let error as ProtocolError {
            throw error
        } catch let error as PostgresError where error.isUnavailable {
            throw PostgresLibrary.unavailable(error)
        } catch {
            throw ProtocolError(503, .blobStoreFailed, "The library's file store on the server could not be used; try again shortly.", detail: "PostgreSQL: \(error)", retryAfterSeconds: 5)
        }
    }

    public func status(library: UUID, blob: BlobRef) throws(ProtocolError) -> BlobStatus {
        try using { pg in
            try Self.held(library, blob, pg, forUpdate: false) ?? BlobStatus(blob: blob, length: nil, received: 0, complete: false)
        }
    }

    public func put(library: UUID, blob: BlobRef, length: Int64, offset: Int64, bytes: [UInt8]) throws(ProtocolError) -> BlobStatus {
        try BlobRules.check(length: length, offset: offset, count: bytes.count)
        let key = library.lowercased
        let now = String(Int64(Date().timeIntervalSince1970 * 1000))
        let (status, mismatch): (BlobStatus, BlobRef?) = try using { pg in
            try pg.transaction { pg in
                // Made if new (another server may make it at the same time), then locked: chunks of
                // one blob are appended one at a time, whichever server takes them.
                try pg.execute("""
                    INSERT INTO chronicle_blobs(library_id, hash, length, received, created_at) VALUES ($1, $2, $3, 0, $4)
                    ON CONFLICT (library_id, hash) DO NOTHING
                    """, [key, blob.hex, String(length), now])
                let held = try Self.held(library, blob, pg, forUpdate: true)
                guard try BlobRules.decide(held: held, blob: blob, length: length, offset: offset, count: bytes.count) == .append else {
                    return (held ?? BlobStatus(blob: blob, length: length, received: 0, complete: false), nil)
                }
                if !bytes.isEmpty {
                    try pg.execute(#"INSERT INTO chronicle_blob_chunks(library_id, hash, "offset", data) VALUES ($1, $2, $3, $4)"#,
                                   values: [.text(key), .text(blob.hex), .text(String(offset)), .bytes(bytes)])
                }
                let received = offset + Int64(bytes.count)
                guard received == length else {
                    try pg.execute("UPDATE chronicle_blobs SET received = $3 WHERE library_id = $1 AND hash = $2", [key, blob.hex, String(received)])
                    return (BlobStatus(blob: blob, length: length, received: received, complete: false), nil)
                }
                // Read back a chunk at a time: a large file never sits in memory whole.
                let hasher = SHA256Hasher()
                var next: Int64 = 0
                while next < length {
                    let rows = try pg.execute(#"""
                        SELECT "offset", data FROM chronicle_blob_chunks WHERE library_id = $1 AND hash = $2 AND "offset" >= $3
                        ORDER BY "offset" LIMIT 1
                        """#, [key, blob.hex, String(next)])
                    guard rows.count == 1 else { break }
                    let data = try rows.bytes(0, 1)
                    hasher.update(data)
                    next = try rows.int(0, 0) + Int64(max(1, data.count))
                }
                let actual = BlobRef(digest: hasher.finalize())
                guard actual == blob else {
                    try pg.execute("DELETE FROM chronicle_blobs WHERE library_id = $1 AND hash = $2", [key, blob.hex])
                    return (BlobStatus(blob: blob, length: nil, received: 0, complete: false), actual)
                }
                try pg.execute("UPDATE chronicle_blobs SET received = $3, complete = true, completed_at = $4 WHERE library_id = $1 AND hash = $2",
                               [key, blob.hex, String(received), now])
                return (BlobStatus(blob: blob, length: length, received: received, complete: true), nil)
            }
        }
        if let mismatch { throw BlobRules.digestMismatch(blob, actual: mismatch) }
        return status
    }

    public func range(library: UUID, blob: BlobRef, offset: Int64, count: Int) throws(ProtocolError) -> BlobRange {
        let key = library.lowercased
        return try using { pg in
            guard let held = try Self.held(library, blob, pg, forUpdate: false), let length = held.length else { throw BlobRules.notFound(blob) }
            guard held.complete else { throw BlobRules.incomplete(blob, received: held.received, length: length) }
            let (start, wanted) = try BlobRules.clamp(offset: offset, count: count, length: length)
            let end = start + Int64(wanted)
            // Only the part of each chunk in the range leaves the database (1-based substring).
            let rows = try pg.execute(#"""
                SELECT substring(data FROM greatest(1, $3 - "offset" + 1)::int FOR ($4 - greatest("offset", $3))::int)
                FROM chronicle_blob_chunks
                WHERE library_id = $1 AND hash = $2 AND "offset" < $4
                  AND "offset" >= coalesce((SELECT max("offset") FROM chronicle_blob_chunks
                                            WHERE library_id = $1 AND hash = $2 AND "offset" <= $3), 0)
                ORDER BY "offset"
                """#, [key, blob.hex, String(start), String(end)])
            var bytes: [UInt8] = []
            bytes.reserveCapacity(wanted)
            for row in 0..<rows.count { bytes += try rows.bytes(row, 0) }
            return BlobRange(offset: start, bytes: Array(bytes.prefix(wanted)), length: length)
        }
    }

    public func complete(library: UUID) throws(ProtocolError) -> [BlobStatus] {
        try using { pg in
            let rows = try pg.execute("SELECT hash, length FROM chronicle_blobs WHERE library_id = $1 AND complete ORDER BY hash", [library.lowercased])
            return try (0..<rows.count).compactMap { row in
                BlobRef(try rows.string(row, 0)).map { BlobStatus(blob: $0, length: try? rows.int(row, 1), received: (try? rows.int(row, 1)) ?? 0, complete: true) }
            }
        }
    }

    public func dropAbandonedUploads(before: Int64) throws -> Int {
        try pool.withConnection { pg in
            try pg.execute("DELETE FROM chronicle_blobs WHERE NOT complete AND created_at < $1", [String(before)]).affected
        }
    }

    public func libraries() throws -> [UUID] {
        try pool.withConnection { pg in
            let rows = try pg.execute("SELECT DISTINCT library_id FROM chronicle_blobs ORDER BY library_id")
            return try (0..<rows.count).compactMap { UUID(text: try rows.string($0, 0)) }
        }
    }

    public func completed(library: UUID, before: Int64) throws -> [String: Int64] {
        try pool.withConnection { pg in
            let rows = try pg.execute("SELECT hash, length FROM chronicle_blobs WHERE library_id = $1 AND complete AND completed_at < $2",
                                      [library.lowercased, String(before)])
            var found: [String: Int64] = [:]
            for row in 0..<rows.count { found[try rows.string(row, 0)] = try rows.int(row, 1) }
            return found
        }
    }

    public func delete(library: UUID, blobs: [String]) throws -> Int64 {
        guard !blobs.isEmpty else { return 0 }
        return try pool.withConnection { pg in
            try pg.transaction { pg in
                var bytes: Int64 = 0
                for hash in blobs {
                    let rows = try pg.execute("DELETE FROM chronicle_blobs WHERE library_id = $1 AND hash = $2 RETURNING length", [library.lowercased, hash])
                    if rows.count == 1 { bytes += try rows.int(0, 0) }
                }
                return bytes
            }
        }
    }

    public func deleteLibrary(_ library: UUID) throws {
        // `PostgresServerStore.deleteLibrary` deletes them in the library's own transaction.
    }
}
