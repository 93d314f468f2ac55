import ChronicleCore
import Foundation

extension DeviceStore {
    /// A snapshot saved in this database: its seq and header. Its frame stays in its row and is
    /// read from there piece by piece (`readStoredSnapshot`): a 1,000,000-op library's snapshot
    /// took about ten times its frame in memory decoded whole, and the frame itself is 55 MB.
    struct StoredSnapshot {
        let seq: Int64
        let header: SnapshotHeader
    }

    /// The snapshot saved at exactly `seq`, or the newest one at or before it.
    static func storedSnapshot(atMost seq: Int64? = nil, in db: Database) throws -> StoredSnapshot? {
        guard let found = try db.scalarInt("SELECT max(seq) FROM chronicle_snapshots WHERE seq <= ?1", [.integer(seq ?? Int64.max)]) else {
            return nil
        }
        let header = try SnapshotCodec.header(pieces: { piece in
            try db.readBlob(table: "chronicle_snapshots", column: "body", rowid: found, pieceBytes: 1 << 16, piece)
        })
        return StoredSnapshot(seq: found, header: header)
    }

    /// Reads the snapshot saved at `seq` from its row as it decodes, handing it to `visitor`.
    static func readStoredSnapshot<V: SnapshotVisitor>(_ seq: Int64, in db: Database, into visitor: inout V) throws {
        try SnapshotCodec.read(pieces: { piece in
            try db.readBlob(table: "chronicle_snapshots", column: "body", rowid: seq, piece)
        }, into: &visitor)
    }

    /// Seqs of the saved snapshots, oldest first.
    public func snapshotSeqs() throws -> [Int64] {
        try read { db in try db.query("SELECT seq FROM chronicle_snapshots ORDER BY seq") { $0.int(0) } }
    }

    /// The projection's canonical rows as a snapshot body, written as they are read (never
    /// held as values: a 1,000,000-op library's rows took about ten times the body's size in
    /// memory), and the state digest of the same rows, in one pass. Inside a read transaction,
    /// so the counts and rows are of one moment.
    static func snapshotBody(_ projection: ProjectionSchema, from db: Database, seq: Int64,
                             libraryID: UUID) throws -> (body: [UInt8], digest: String) {
        let schema = projection.schema
        var writer = SnapshotBodyWriter(libraryID: libraryID, seq: seq, schemaName: schema.name, schemaVersion: schema.version,
                                        schemaFingerprint: schema.fingerprint, tableCount: projection.tables.count)
        let hasher = SHA256Hasher()
        var rowsLeft = 0
        try visitCanonicalRows(projection, in: db, table: { table in
            guard rowsLeft == 0 else { throw ChronicleError(.invariantViolated, "The projection changed while its snapshot was read.") }
            hasher.update("table \(table.name)\n")
            rowsLeft = Int(try db.scalarInt("SELECT count(*) FROM \(ProjectionSchema.quoted(table.name))") ?? 0)
            writer.table(table.name, columns: table.columns, rowCount: rowsLeft)
        }, row: { row, width in
            guard rowsLeft > 0 else { throw ChronicleError(.invariantViolated, "The projection changed while its snapshot was read.") }
            rowsLeft -= 1
            hash(row, width: width, into: hasher)
            for index in 0..<width { writer.value(row.value(index)) }
        })
        guard rowsLeft == 0 else { throw ChronicleError(.invariantViolated, "The projection changed while its snapshot was read.") }
        return (writer.finish(), hasher.hexDigest())
    }

    /// Reads the projection's canonical rows (every table of `projection.tables`, in key order).
    static func dump(_ projection: ProjectionSchema, from db: Database, seq: Int64, libraryID: UUID) throws -> Snapshot {
        var tables: [Snapshot.Table] = []
        for table in projection.tables {
            let columns = table.columns.map(ProjectionSchema.quoted).joined(separator: ", ")
            let width = Int32(table.columns.count)
            let rows = try db.uncached("SELECT \(columns) FROM \(ProjectionSchema.quoted(table.name)) ORDER BY \(table.orderBy)").map { row in
                (0..<width).map { row.value($0) }
            }
            tables.append(Snapshot.Table(name: table.name, columns: table.columns, rows: rows))
        }
        let schema = projection.schema
        return Snapshot(libraryID: libraryID, seq: seq, schemaName: schema.name, schemaVersion: schema.version,
                        schemaFingerprint: schema.fingerprint, tables: tables)
    }

    /// Fills empty projection tables with a snapshot's rows. The snapshot must be of this
    /// store's library and of the projection's exact shape (same schema fingerprint).
    static func load(_ snapshot: Snapshot, into db: Database, _ projection: ProjectionSchema, libraryID: UUID) throws {
        var filler = ProjectionFiller(db: db, projection: projection, libraryID: libraryID)
        try filler.visit(snapshot)
    }

    /// `load`, of the snapshot saved at `seq` in `source`, read from its row as it decodes (its
    /// checksum is checked at the end, so the caller's transaction, or scratch database, must not
    /// be trusted until this returns). `source` and `db` may be the same connection.
    /// A snapshot this store saved with an earlier version of its schema has its state carried
    /// over (`SnapshotMigration`); the version it was made with is returned then, nil otherwise.
    @discardableResult
    static func load(storedAt seq: Int64, from source: Database, into db: Database, _ projection: ProjectionSchema,
                     libraryID: UUID) throws -> Int? {
        var filler = ProjectionFiller(db: db, projection: projection, libraryID: libraryID, migrating: true)
        try readStoredSnapshot(seq, in: source, into: &filler)
        return filler.migratedFrom
    }

    /// The state where a replay must start: the snapshot at the history horizon when
    /// history before it was dropped, otherwise nothing (genesis). `preferLatest` starts
    /// from the newest usable snapshot instead (what `rebuild` does by default).
    /// Returns the snapshot's seq; load it with `load(storedAt:…)`, which reads it as it decodes.
    static func replayBase(in db: Database, _ projection: ProjectionSchema, preferLatest: Bool, upTo: Int64? = nil) throws -> Int64? {
        let base = try historyBase(in: db)
        if preferLatest, let latest = try storedSnapshot(atMost: upTo, in: db), latest.seq >= base,
           latest.header.schemaFingerprint == projection.schema.fingerprint {
            return latest.seq
        }
        guard base > 0 else { return nil }
        guard let horizon = try storedSnapshot(atMost: base, in: db), horizon.seq == base else {
            throw ChronicleError(.invariantViolated, "History before seq \(base) was dropped, but the snapshot at \(base) is missing.")
        }
        return base
    }

    /// Computes the confirmed state at `seq` in a scratch database: from the newest
    /// snapshot at or before it, replaying the sealed and hot ops after that snapshot.
    static func stateSnapshot(at seq: Int64, source: Database, _ materializer: Materializer, _ projection: ProjectionSchema,
                              libraryID: UUID, progress: ProgressHandler?) throws -> (Snapshot, digest: String) {
        let scratch = try replayedState(at: seq, source: source, materializer, projection, libraryID: libraryID, progress: progress)
        return (try dump(projection, from: scratch, seq: seq, libraryID: libraryID), try digest(projection, in: scratch))
    }

    /// `stateSnapshot`'s body, written as the scratch database's rows are read, and its digest.
    static func stateSnapshotBody(at seq: Int64, source: Database, _ materializer: Materializer, _ projection: ProjectionSchema,
                                  libraryID: UUID, progress: ProgressHandler?) throws -> (body: [UInt8], digest: String) {
        let scratch = try replayedState(at: seq, source: source, materializer, projection, libraryID: libraryID, progress: progress)
        return try snapshotBody(projection, from: scratch, seq: seq, libraryID: libraryID)
    }

    /// A private scratch database holding the confirmed state at `seq`.
    private static func replayedState(at seq: Int64, source: Database, _ materializer: Materializer, _ projection: ProjectionSchema,
                                      libraryID: UUID, progress: ProgressHandler?) throws -> Database {
        let scratch = try scratchProjection(projection, onDisk: true)   // large libraries need not fit in memory
        let base = try replayBase(in: source, projection, preferLatest: true, upTo: seq)
        // One transaction for the whole replay: statement by statement it committed every op
        // (the benchmark's 1,000,000-op snapshot step took 26.7 s, against about 10 s for a whole rebuild).
        try scratch.execute("PRAGMA cache_size = -\(bulkCacheKilobytes)")
        try scratch.transaction { scratch in
            if let base { try load(storedAt: base, from: source, into: scratch, projection, libraryID: libraryID) }
            _ = try replay(from: source, into: scratch, materializer, projection, after: base ?? 0, upTo: seq, includePending: false,
                           progress: progress)
        }
        return scratch
    }
}
