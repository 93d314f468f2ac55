import ChronicleCore
import Foundation

/// The stored snapshots of the projection, by seq.
extension LogTables {
    /// Keeps a snapshot's LZ4 frame at `seq` (replacing one already there), streamed into its blob.
    /// Compaction writes one this way, and so does a server that rebuilt its projection for a
    /// newer schema (`ServerLibrary.migrateProjection`).
    package static func insertSnapshot(at seq: Int64, frame: [UInt8], stateDigest: String, createdAt: Int64, in db: Database) throws {
        try db.statement("INSERT OR REPLACE INTO chronicle_snapshots(seq, body, state_digest, body_bytes, created_at) VALUES (?1, ?2, ?3, ?4, ?5)")
            .execute([.integer(seq), .null, .text(stateDigest), .integer(Int64(frame.count)), .integer(createdAt)], blob: frame, at: 2)
    }

    /// The state where a replay must start: the snapshot at the history horizon when
    /// history before it was dropped, otherwise nothing (genesis). `preferLatest` starts
    /// from the newest usable snapshot instead (what `rebuild` does by default).
    /// Returns the snapshot's seq; load it with `load(storedAt:…)`, which reads it as it decodes.
    package static func replayBase(in db: Database, _ projection: ProjectionSchema, preferLatest: Bool, upTo: Int64? = nil) throws -> Int64? {
        let base = try historyBase(in: db)
        if preferLatest, let latest = try LogTables.storedSnapshot(atMost: upTo, in: db), latest.seq >= base,
           latest.header.schemaFingerprint == projection.schema.fingerprint {
            return latest.seq
        }
        guard base > 0 else { return nil }
        guard let horizon = try LogTables.storedSnapshot(atMost: base, in: db), horizon.seq == base else {
            throw ChronicleError(.invariantViolated, "History before seq \(base) was dropped, but the snapshot at \(base) is missing.")
        }
        return base
    }

    /// The snapshot saved at exactly `seq`, or the newest one at or before it.
    static func storedSnapshot(atMost seq: Int64? = nil, in db: Database) throws -> StoredSnapshot? {
        guard let found = try db.scalarInt("SELECT max(seq) FROM chronicle_snapshots WHERE seq <= ?1", [.integer(seq ?? Int64.max)]) else {
            return nil
        }
        let header = try SnapshotCodec.header(pieces: { piece in
            try db.readBlob(table: "chronicle_snapshots", column: "body", rowid: found, pieceBytes: 1 << 16, piece)
        })
        return LogTables.StoredSnapshot(seq: found, header: header)
    }

    /// Reads the snapshot saved at `seq` from its row as it decodes, handing it to `visitor`.
    static func readStoredSnapshot<V: SnapshotVisitor>(_ seq: Int64, in db: Database, into visitor: inout V) throws {
        try SnapshotCodec.read(pieces: { piece in
            try db.readBlob(table: "chronicle_snapshots", column: "body", rowid: seq, piece)
        }, into: &visitor)
    }


    /// A snapshot saved in this database: its seq and header. Its frame stays in its row and is
    /// read from there piece by piece (`readStoredSnapshot`): a 1,000,000-op library's snapshot
    /// took about ten times its frame in memory decoded whole, and the frame itself is 55 MB.
    struct StoredSnapshot {
        let seq: Int64
        let header: SnapshotHeader
    }
}
