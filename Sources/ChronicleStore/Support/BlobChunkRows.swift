import ChronicleCore
import Foundation

/// The chunk rows both a device store and a server's blobs file keep a blob in
/// (`chronicle_blob_chunks(hash, offset, data)`): written in rows of at most
/// `BlobLimits.chunkBytes`, read back by offset whatever size each row has.
package enum BlobChunkRows {
    /// Stores `bytes` at `offset` of blob `hash`, a row per `BlobLimits.chunkBytes`.
    package static func insert(_ hash: String, offset: Int64, _ bytes: [UInt8], in db: Database) throws {
        let insert = try db.statement("INSERT INTO chronicle_blob_chunks(hash, offset, data) VALUES (?1, ?2, ?3)")
        var start = 0
        while start < bytes.count {
            let end = min(bytes.count, start + BlobLimits.chunkBytes)
            try insert.execute([.text(hash), .integer(offset + Int64(start))], blob: Array(bytes[start..<end]), at: 3)
            start = end
        }
    }

    /// The bytes of blob `hash` from `start` up to `end`: the row holding `start` and those after it.
    package static func read(_ hash: String, from start: Int64, to end: Int64, in db: Database) throws -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(Int(max(0, end - start)))
        let sql = """
            SELECT offset, data FROM chronicle_blob_chunks
            WHERE hash = ?1 AND offset >= coalesce((SELECT max(offset) FROM chronicle_blob_chunks WHERE hash = ?1 AND offset <= ?2), 0)
              AND offset < ?3 ORDER BY offset
            """
        try db.statement(sql).forEach([.text(hash), .integer(start), .integer(end)]) { row in
            let rowStart = row.int(0)
            row.withBytes(1) { data in
                let from = max(0, Int(start - rowStart)), to = min(data.count, Int(end - rowStart))
                if from < to { bytes.append(contentsOf: data[from..<to]) }
            }
        }
        return bytes
    }

    /// Where the rows of blob `hash` stop following one another from offset 0, and where the
    /// last one ends (the two differ where there is a gap).
    package static func extent(_ hash: String, in db: Database) throws -> (contiguous: Int64, end: Int64) {
        var (contiguous, end): (Int64, Int64) = (0, 0)
        try db.statement("SELECT offset, length(data) FROM chronicle_blob_chunks WHERE hash = ?1 ORDER BY offset").forEach([.text(hash)]) { row in
            if row.int(0) == contiguous { contiguous += row.int(1) }
            end = row.int(0) + row.int(1)
        }
        return (contiguous, end)
    }

    /// What `verify` finds wrong with blob `hash`, said to hold `received` bytes (and, where
    /// `whole`, to be all there): chunks that leave a gap or end elsewhere, or bytes that hash to
    /// another address. nil where nothing is.
    package static func problem(_ hash: String, received: Int64, whole: Bool, in db: Database) throws -> String? {
        let (contiguous, end) = try extent(hash, in: db)
        if contiguous != end || end != received {
            return "sha256:\(hash): its chunks hold \(end) bytes\(contiguous != end ? " with a gap" : ""), not the \(received) recorded"
        }
        if whole, try digest(hash, in: db).hex != hash { return "sha256:\(hash): its bytes hash to something else" }
        return nil
    }

    /// The address the rows of blob `hash` hash to, read in order.
    package static func digest(_ hash: String, in db: Database) throws -> BlobRef {
        let hasher = SHA256Hasher()
        try db.statement("SELECT data FROM chronicle_blob_chunks WHERE hash = ?1 ORDER BY offset").forEach([.text(hash)]) { row in
            row.withBytes(0) { hasher.update($0) }
        }
        return BlobRef(digest: hasher.finalize())
    }
}
