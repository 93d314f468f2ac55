import CSQLite
import ChronicleCore
import ChronicleStore
import Foundation

/// The floors beside the lifecycle's two missed targets: the least the same work costs in raw
/// SQLite (the C API, statements prepared once) on this machine, in the same run, with
/// everything the engine adds on top left out. A floor that misses a target says no
/// implementation doing that work here meets it.
///
/// - Sealing (target: at least half the `lz4` tool's MB/s on the same bodies):
///   1. the same store (its log kept in blocks, store format v9): each block read whole,
///      compressed with liblz4 and digested (SHA-256), then the frame and the block's filter
///      stored and the block deleted, one transaction a segment whose commit does not wait for
///      the disk, as compaction does;
///   2. an ideal row log: one row per op holding nothing but its encoded record (the sealed
///      bodies cut into as many pieces as ops), no index and no trigger: read, concatenate,
///      compress, store the frame, delete the rows, commit;
///   3. a log kept in blocks: the same bodies cut into a piece per 500 ops, a row each (as a log
///      that kept each confirmed batch as one encoded run would hold them), sealed a segment a commit and ten
///      segments a commit: read and concatenate the segment's blocks, compress, digest (SHA-256),
///      store the frame, delete the blocks.
///   Each counts its reading side (select, concatenate, compress) and its writing side (the
///   rest) apart; the floor is the larger of the two, as if the two cores overlapped them
///   perfectly.
/// - The snapshot start (target: ten times faster than the full log): on the store a snapshot
///   start made,
///   4. its rows, search indexes' rows included, copied into a new file with the same tables
///      (`INSERT … SELECT`, one transaction, the secondary indexes built after): the least a
///      start that carries every row, index rows and all, can take;
///   5. FTS5's `rebuild` of its word indexes, one after another: the least a start that builds
///      them can take, halved for two cores (or the longest one, if more);
///   6. the copy's pages written to a new file (`VACUUM INTO`): with the snapshot's download, the
///      least a start that carries the database's pages themselves can take.
///   The first and the last add the download of the run's snapshot (which a start carrying index
///   rows or pages would only make longer).
extension LifecycleBenchmark {
    struct Floor {
        /// Reading (select, concatenate, compress) and writing (store, delete, commit), summed over segments.
        var readSeconds: Double
        var writeSeconds: Double
        var segments: Int
        /// Both sides overlapped perfectly on two cores.
        var seconds: Double { max(readSeconds, writeSeconds) }

        /// One more segment: read from `start` to `read`, written from `read` to `written` (nanoseconds).
        mutating func add(start: UInt64, read: UInt64, written: UInt64) {
            readSeconds += Double(read - start) / 1e9
            writeSeconds += Double(written - read) / 1e9
            segments += 1
        }
    }

    struct SnapshotFloor {
        var copySeconds: Double
        var copiedRows: Int64
        /// The copy's pages written to a new file (`VACUUM INTO`, after the rebuilds), and their bytes.
        var pageWriteSeconds: Double
        var pageBytes: Int64
        /// Each word index's FTS5 `rebuild`, in seconds.
        var rebuilds: [(index: String, seconds: Double)]
        /// The rebuilds shared by two cores: half their sum, or the longest one if more.
        var rebuildSeconds: Double {
            max(rebuilds.map(\.seconds).max() ?? 0, rebuilds.reduce(0) { $0 + $1.seconds } / 2)
        }
    }

    // MARK: - 1. Sealing the same store

    /// Seals a copy of the store at `path` (closed, its WAL checkpointed) up to `through`, doing
    /// compaction's SQL work in raw SQLite: each block of the log that starts after the sealed
    /// end read whole, compressed and digested (its body is the segment's), then the frame and
    /// the block's filter stored and the block deleted, one transaction a segment (its commit not
    /// waiting for the disk, as the engine's). The store's blocks are its bulk apply's batches, of
    /// `segmentOps` ops each.
    func sealingFloor(copyOf path: String, through: Int64, segmentOps: Int64) throws -> Floor {
        let copy = directory + "/lifecycle-floor-store.chronicle"
        remove(copy)
        try FileManager.default.copyItem(atPath: path, toPath: copy)
        defer { remove(copy) }
        let db = try RawDatabase(path: copy)
        try db.exec("PRAGMA wal_autocheckpoint = 0")
        // As the engine's seals: commits that do not wait for the disk.
        try db.exec("PRAGMA synchronous = NORMAL")
        let select = try db.prepare("SELECT last_seq, filter, body FROM chronicle_log_blocks WHERE first_seq = ?1")
        let insertSegment = try db.prepare("""
            INSERT INTO chronicle_segments(first_seq, last_seq, op_count, body, digest, previous_digest, body_bytes, created_at)
            VALUES (?1, ?2, ?3, ?8, ?4, ?5, ?6, ?7)
            """)
        let insertFilter = try db.prepare("INSERT INTO chronicle_segment_filters(first_seq, filter) VALUES (?1, ?2)")
        let delete = try db.prepare("DELETE FROM chronicle_log_blocks WHERE first_seq <= ?1 AND last_seq <= ?1")
        var sealed = try db.scalarInt("SELECT coalesce(max(last_seq), 0) FROM chronicle_segments") ?? 0
        var previous = try db.rows("SELECT digest FROM chronicle_segments ORDER BY first_seq DESC LIMIT 1").first?[0] ?? ""
        var floor = Floor(readSeconds: 0, writeSeconds: 0, segments: 0)
        var body: [UInt8] = []
        var filter: [UInt8] = []
        while sealed < through {
            let t0 = nowNanoseconds()
            try db.bind(select, [.integer(sealed + 1)])
            guard sqlite3_step(select) == SQLITE_ROW else { throw BenchError("lifecycle floor: no log block starts at seq \(sealed + 1)") }
            let last = sqlite3_column_int64(select, 0)
            func copy(_ column: Int32, into bytes: inout [UInt8]) {
                bytes.removeAll(keepingCapacity: true)
                if let blob = sqlite3_column_blob(select, column) {
                    bytes.append(contentsOf: UnsafeRawBufferPointer(start: blob, count: Int(sqlite3_column_bytes(select, column))))
                }
            }
            copy(1, into: &filter)
            copy(2, into: &body)
            sqlite3_reset(select)
            guard last <= through, last - sealed <= segmentOps else { throw BenchError("lifecycle floor: the log block at seq \(sealed + 1) ends at \(last)") }
            let frame = LZ4Frame.compress(body)
            let digest = LogTables.chainDigest(previous: previous, body: body)
            let t1 = nowNanoseconds()
            try db.exec("BEGIN IMMEDIATE")
            try db.run(insertSegment, [.integer(sealed + 1), .integer(last), .integer(last - sealed), .text(digest), .text(previous),
                                       .integer(Int64(body.count)), .integer(0)], blob: frame, at: 8)
            try db.run(insertFilter, [.integer(sealed + 1)], blob: filter, at: 2)
            try db.run(delete, [.integer(last)])
            try db.exec("COMMIT")
            floor.add(start: t0, read: t1, written: nowNanoseconds())
            (sealed, previous) = (last, digest)
        }
        return floor
    }

    // MARK: - 2. Sealing an ideal row log

    /// Fills a fresh file with `ops` rows cut from the sealed bodies in `bodiesFile` (one
    /// encoded record per row, no index or trigger), then seals it in segments of `segmentOps`.
    func idealLogFloor(bodiesFile: String, ops: Int64, segmentOps: Int64) throws -> Floor {
        let path = directory + "/lifecycle-floor-ideal.sqlite"
        remove(path)
        defer { remove(path) }
        let bodies = try Data(contentsOf: URL(fileURLWithPath: bodiesFile), options: .mappedIfSafe)
        guard ops > 0, !bodies.isEmpty else { return Floor(readSeconds: 0, writeSeconds: 0, segments: 0) }
        let db = try RawDatabase(path: path)
        try db.exec("PRAGMA wal_autocheckpoint = 0")
        try db.exec("CREATE TABLE log (seq INTEGER PRIMARY KEY, record BLOB NOT NULL)")
        try db.exec("CREATE TABLE segments (first_seq INTEGER PRIMARY KEY, last_seq INTEGER NOT NULL, frame BLOB NOT NULL)")
        let insert = try db.prepare("INSERT INTO log(seq, record) VALUES (?1, ?2)")
        let size = bodies.count / Int(ops)
        try db.exec("BEGIN IMMEDIATE")
        for seq in 1...ops {
            let start = Int(seq - 1) * size
            let end = seq == ops ? bodies.count : start + size
            try db.run(insert, [.integer(seq)], blob: Array(bodies[start..<end]), at: 2)
            if seq % segmentOps == 0 { try db.exec("COMMIT; BEGIN IMMEDIATE") }
        }
        try db.exec("COMMIT")
        try db.exec("PRAGMA wal_checkpoint(TRUNCATE)")

        let select = try db.prepare("SELECT record FROM log WHERE seq > ?1 AND seq <= ?2 ORDER BY seq")
        let store = try db.prepare("INSERT INTO segments(first_seq, last_seq, frame) VALUES (?1, ?2, ?3)")
        let delete = try db.prepare("DELETE FROM log WHERE seq >= ?1 AND seq <= ?2")
        var floor = Floor(readSeconds: 0, writeSeconds: 0, segments: 0)
        var body: [UInt8] = []
        var sealed: Int64 = 0
        while sealed < ops {
            let last = min(ops, sealed + segmentOps)
            let t0 = nowNanoseconds()
            try Self.concatenateBlobs(select, in: db, after: sealed, through: last, into: &body, reading: "the ideal log")
            let frame = LZ4Frame.compress(body)
            let t1 = nowNanoseconds()
            try db.exec("BEGIN IMMEDIATE")
            try db.run(store, [.integer(sealed + 1), .integer(last)], blob: frame, at: 3)
            try db.run(delete, [.integer(sealed + 1), .integer(last)])
            try db.exec("COMMIT")
            floor.add(start: t0, read: t1, written: nowNanoseconds())
            sealed = last
        }
        return floor
    }

    /// Runs `select` (one blob column, bound to `after` and `through`) and appends its rows' bytes
    /// to `body`, emptied first: a segment's worth of a row log's records or a block log's blocks.
    static func concatenateBlobs(_ select: OpaquePointer, in db: RawDatabase, after: Int64, through: Int64, into body: inout [UInt8],
                                 reading what: String) throws {
        body.removeAll(keepingCapacity: true)
        try db.bind(select, [.integer(after), .integer(through)])
        var rc = sqlite3_step(select)
        while rc == SQLITE_ROW {
            if let bytes = sqlite3_column_blob(select, 0) {
                body.append(contentsOf: UnsafeRawBufferPointer(start: bytes, count: Int(sqlite3_column_bytes(select, 0))))
            }
            rc = sqlite3_step(select)
        }
        sqlite3_reset(select)
        guard rc == SQLITE_DONE else { throw BenchError("lifecycle floor: reading \(what) failed (\(rc))") }
    }

    // MARK: - 3. Sealing a log kept in blocks

    /// Fills a fresh file with the sealed bodies in `bodiesFile` cut into a block per `blockOps`
    /// ops, of equal bytes (a row per block, as a log that kept each confirmed batch as one encoded run
    /// would hold them; `blockOps` divides `segmentOps`), then seals it: each segment's blocks read
    /// and concatenated, compressed with liblz4 and digested (SHA-256, as the chain needs), the frame
    /// stored and the blocks deleted, `segmentsPerCommit` segments to a transaction.
    func blockLogFloor(bodiesFile: String, ops: Int64, segmentOps: Int64, blockOps: Int64, segmentsPerCommit: Int) throws -> Floor {
        let path = directory + "/lifecycle-floor-blocks.sqlite"
        remove(path)
        defer { remove(path) }
        let bodies = try Data(contentsOf: URL(fileURLWithPath: bodiesFile), options: .mappedIfSafe)
        guard ops > 0, !bodies.isEmpty, blockOps > 0, segmentOps % blockOps == 0 else { return Floor(readSeconds: 0, writeSeconds: 0, segments: 0) }
        let db = try RawDatabase(path: path)
        try db.exec("PRAGMA wal_autocheckpoint = 0")
        try db.exec("CREATE TABLE blocks (first_seq INTEGER PRIMARY KEY, last_seq INTEGER NOT NULL, body BLOB NOT NULL)")
        try db.exec("CREATE TABLE segments (first_seq INTEGER PRIMARY KEY, last_seq INTEGER NOT NULL, frame BLOB NOT NULL, digest TEXT NOT NULL)")
        let insert = try db.prepare("INSERT INTO blocks(first_seq, last_seq, body) VALUES (?1, ?2, ?3)")
        let size = bodies.count / Int(ops)
        try db.exec("BEGIN IMMEDIATE")
        var first: Int64 = 1
        while first <= ops {
            let last = min(ops, first + blockOps - 1)
            let start = Int(first - 1) * size
            let end = last == ops ? bodies.count : Int(last) * size
            try db.run(insert, [.integer(first), .integer(last)], blob: Array(bodies[start..<end]), at: 3)
            if last % segmentOps == 0 { try db.exec("COMMIT; BEGIN IMMEDIATE") }
            first = last + 1
        }
        try db.exec("COMMIT")
        try db.exec("PRAGMA wal_checkpoint(TRUNCATE)")

        let select = try db.prepare("SELECT body FROM blocks WHERE first_seq > ?1 AND first_seq <= ?2 ORDER BY first_seq")
        let store = try db.prepare("INSERT INTO segments(first_seq, last_seq, frame, digest) VALUES (?1, ?2, ?3, ?4)")
        let delete = try db.prepare("DELETE FROM blocks WHERE first_seq > ?1 AND first_seq <= ?2")
        var floor = Floor(readSeconds: 0, writeSeconds: 0, segments: 0)
        var body: [UInt8] = []
        var sealed: Int64 = 0
        var inTransaction = 0
        var previous = ""
        while sealed < ops {
            let last = min(ops, sealed + segmentOps)
            let t0 = nowNanoseconds()
            try Self.concatenateBlobs(select, in: db, after: sealed, through: last, into: &body, reading: "the block log")
            let frame = LZ4Frame.compress(body)
            let digest = LogTables.chainDigest(previous: previous, body: body)
            let t1 = nowNanoseconds()
            if inTransaction == 0 { try db.exec("BEGIN IMMEDIATE") }
            try db.run(store, [.integer(sealed + 1), .integer(last), .null, .text(digest)], blob: frame, at: 3)
            try db.run(delete, [.integer(sealed), .integer(last)])
            inTransaction += 1
            if inTransaction == segmentsPerCommit || last == ops {
                try db.exec("COMMIT")
                inTransaction = 0
            }
            floor.add(start: t0, read: t1, written: nowNanoseconds())
            (sealed, previous) = (last, digest)
        }
        return floor
    }

    // MARK: - 4 and 5. The snapshot start

    /// Copies the rows of the store a snapshot start made (at `path`, closed) into a new file with
    /// the same tables, then rebuilds the copy's FTS5 word indexes one by one.
    func snapshotFloor(startedStore path: String) throws -> SnapshotFloor {
        try settle(path)
        let copy = directory + "/lifecycle-floor-copy.chronicle"
        remove(copy)
        defer { remove(copy) }
        let ddl = try StoreDDL.read(fromStoreAt: path, schema: .readItLater)
        let db = try RawDatabase(path: copy)
        try db.exec("PRAGMA wal_autocheckpoint = 0")
        let later = ddl.statements.filter { $0.hasPrefix("CREATE INDEX") || $0.hasPrefix("CREATE TRIGGER") }
        try db.exec("BEGIN IMMEDIATE")
        for statement in ddl.statements where !later.contains(statement) { try db.exec(statement) }
        try db.exec("COMMIT")
        // Every table but the snapshot's own frame, the word indexes' shadow tables included (their rows are
        // the indexes); not the phrase indexes', which both starts fill in the background, untimed.
        let tables = try db.rows("""
            SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name <> 'chronicle_snapshots'
              AND name NOT GLOB '*_pairs_*' AND sql NOT LIKE 'CREATE VIRTUAL TABLE%' ORDER BY name
            """).compactMap { $0[0] }
        try db.exec("ATTACH DATABASE '\(path)' AS started")
        let t0 = nowNanoseconds()
        try db.exec("BEGIN IMMEDIATE")
        var rows: Int64 = 0
        for table in tables {
            let name = ProjectionSchema.quoted(table)
            try db.exec("INSERT OR REPLACE INTO main.\(name) SELECT * FROM started.\(name)")
            rows += Int64(sqlite3_changes(db.handle))
        }
        for statement in later { try db.exec(statement) }
        try db.exec("COMMIT")
        let copySeconds = Double(nowNanoseconds() - t0) / 1e9
        try db.exec("DETACH DATABASE started")

        var rebuilds: [(String, Double)] = []
        for (_, index) in ProjectionSchema(schema: .readItLater).searchIndexes {
            let name = ProjectionSchema.quoted(index.index)
            let t1 = nowNanoseconds()
            try db.exec("INSERT INTO \(name)(\(name)) VALUES ('rebuild')")
            rebuilds.append((index.index, Double(nowNanoseconds() - t1) / 1e9))
        }
        let pages = directory + "/lifecycle-floor-pages.chronicle"
        remove(pages)
        defer { remove(pages) }
        let t2 = nowNanoseconds()
        try db.exec("VACUUM INTO '\(pages)'")
        let pageWriteSeconds = Double(nowNanoseconds() - t2) / 1e9
        return SnapshotFloor(copySeconds: copySeconds, copiedRows: rows, pageWriteSeconds: pageWriteSeconds, pageBytes: fileBytes(pages),
                             rebuilds: rebuilds)
    }
}
