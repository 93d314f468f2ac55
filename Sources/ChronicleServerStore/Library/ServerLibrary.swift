import ChronicleCore
import ChronicleStore
import Foundation

/// The server's store for one library: the canonical log (gap-free `serverSeq`),
/// the index of every op id it has seen with its outcome, and the server's own
/// projection built by the same materializers the devices use.
///
/// One SQLite file per library (`Schemas/store/server-v4.md`): libraries
/// never wait on each other, and one library is one file to back up or move.
/// One writer behind a lock; pulls and verdicts read on their own connections.
///
/// ```swift
/// let library = try ServerLibrary.openOrCreate(at: "data/libraries/\(id).sqlite", libraryID: id, schema: .readItLater)
/// let response = try library.push(segment.ops, from: device)
/// let page = try library.pull(after: 0, limit: 1000)
/// ```
public final class ServerLibrary: Sendable {
    public let path: String
    public let libraryID: UUID
    /// This file's incarnation: made when the library is created (or first opened by a build that
    /// has them), and made anew in every backup of it (`ServerBackup`). A server restored from a
    /// backup therefore answers with another one, and a device that synced with the file before
    /// compares its history with the server's op by op (`PullPage.incarnation`), rather than
    /// trusting one op at its cursor that may match by chance.
    public let incarnation: UUID
    /// Where this library's state was carried over from a snapshot of an earlier schema version
    /// (`PullPage.stateCarriedOverAt`); nil where its state is a replay of its log.
    public let stateCarriedOverAt: Int64?
    /// The meta key that holds `stateCarriedOverAt`.
    static let stateCarriedOverKey = "state_carried_over_at"
    /// The meta key that holds `incarnation`.
    public static let incarnationKey = "incarnation"
    public let schema: Schema
    /// Set where this open rebuilt the projection for a newer version of the schema: the
    /// version the library was written with, and how long the rebuild took.
    public let schemaMigration: (fromVersion: Int64, seconds: Double)?
    package let clock: any ChronicleClock
    let ids: any IDGenerator
    package let materializer: Materializer
    package let projection: ProjectionSchema
    let writer: Locked<Database>
    let checkpointer: Checkpointer
    /// The writer's page cache, in KiB.
    public static let cacheKilobytes = 64_000
    let readers: ReaderPool
    /// The highest serverSeq and serverTime, kept in memory so pulls can answer "nothing new" without a query.
    let tail: Locked<(seq: Int64, time: Int64)>
    /// Free-tier caps are installed: each op is applied inside a savepoint so a cap can refuse it alone.
    let capped: Bool
    /// Counts committed pushes, so a push that arrived ahead of the device's push before it
    /// (two in flight) can wait for that one to land (`pushGeneration`, `waitForPush`).
    let pushes = PushSignal()
    /// Where this library's order is decided, if not in this file (`follow`).
    private let upstreamHolder = Locked<(any LibraryUpstream)?>(nil)
    var upstream: (any LibraryUpstream)? { upstreamHolder.withLock { $0 } }

    /// v2: sealed segments, snapshots and the retention horizon (`Schemas/store/server-v2.md`);
    /// v3: entity filters beside sealed segments, guard triggers that find the sealed end by key (`server-v3.md`);
    /// v4: sealed op ids found by seq as well (`server-v4.md`).
    static let formatVersion: Int64 = 4
    static let migrations: [Int64: [String]] = [1: StoreFormat.lifecycleStatements,
                                                2: StoreFormat.segmentFilterStatements + StoreFormat.keyedGuardStatements,
                                                3: sealedBySeqStatements]

    /// The op id at a seq in sealed history (`PullPage.afterOpID` where the log no longer holds it).
    static let sealedBySeqStatements = ["CREATE INDEX chronicle_sealed_ops_by_seq ON chronicle_sealed_ops(server_seq)"]

    static let statements: [String] = [
        "CREATE TABLE chronicle_meta (key TEXT PRIMARY KEY NOT NULL, value) WITHOUT ROWID",
    ] + StoreFormat.logStatements + [
        // Every op id the server refused, with the answer a repeat gets. Accepted ops are found in the log.
        """
        CREATE TABLE chronicle_rejected_ops (
          op_id TEXT PRIMARY KEY NOT NULL,
          device_id TEXT NOT NULL,
          device_seq INTEGER NOT NULL,
          type TEXT NOT NULL,
          entity_id TEXT NOT NULL,
          code TEXT NOT NULL,
          message TEXT NOT NULL,
          rejected_at INTEGER NOT NULL
        ) WITHOUT ROWID
        """,
        "CREATE TRIGGER chronicle_rejected_ops_kept_update BEFORE UPDATE ON chronicle_rejected_ops BEGIN SELECT RAISE(ABORT, 'chronicle_rejected_ops: answers are never changed'); END",
        "CREATE TRIGGER chronicle_rejected_ops_kept_delete BEFORE DELETE ON chronicle_rejected_ops BEGIN SELECT RAISE(ABORT, 'chronicle_rejected_ops: answers are never deleted'); END",
        // The last deviceSeq the server has answered for each device: the next op must follow it.
        "CREATE TABLE chronicle_devices (device_id TEXT PRIMARY KEY NOT NULL, last_device_seq INTEGER NOT NULL) WITHOUT ROWID",
        """
        CREATE TRIGGER chronicle_devices_forward BEFORE UPDATE ON chronicle_devices
        WHEN NEW.last_device_seq < OLD.last_device_seq BEGIN
          SELECT RAISE(ABORT, 'chronicle_devices: a device sequence never moves backwards');
        END
        """,
    ]

    /// Opens the library's file, creating it (and its directory) on first use.
    ///
    /// `incarnation`: the one a new file takes (a replica takes the one of the database it
    /// follows); nil makes one. An existing file keeps its own.
    ///
    /// `caps`: the free-tier caps to enforce, installed as triggers in the file in place of those
    /// it has; nil leaves the file's as they are (a tool working beside a running server, which
    /// enforces its own).
    ///
    /// `durable` false (a replica, which another database has committed first): commits do not
    /// wait for the disk (`synchronous = NORMAL` in WAL mode: never damaged by a power loss, but
    /// the last commits may be lost with it, and the replica then catches up again).
    public static func openOrCreate(at path: String, libraryID: UUID, schema: Schema,
                                    clock: any ChronicleClock = SystemClock(), ids: (any IDGenerator)? = nil,
                                    caps: [FreeTierCap]? = nil, incarnation: UUID? = nil, durable: Bool = true) throws -> ServerLibrary {
        let fresh = !FileManager.default.fileExists(atPath: path)
        var migrated: (Int64, Double)?
        if fresh {
            try PrivateFiles.directory((path as NSString).deletingLastPathComponent)
        }
        var options = Database.Options()
        options.synchronousFull = durable
        let db = try Database(path: path, options: options)
        let projection = ProjectionSchema(schema: schema)
        let hasMeta = try db.scalarInt("SELECT count(*) FROM sqlite_master WHERE name = 'chronicle_meta'") ?? 0
        if fresh || hasMeta == 0 {
            try db.transaction { db in
                for statement in statements + StoreFormat.lifecycleStatements + StoreFormat.segmentFilterStatements
                    + StoreFormat.keyedGuardStatements + sealedBySeqStatements { try db.execute(statement) }
                for statement in projection.tableStatements where !statement.contains("chronicle_shadow_") { try db.execute(statement) }
                let meta: [(String, Value)] = [
                    ("format_version", .integer(formatVersion)),
                    ("kind", .text("server-library")),
                    ("schema_name", .text(schema.name)),
                    ("schema_version", .integer(Int64(schema.version))),
                    ("schema_fingerprint", .text(schema.fingerprint)),
                    ("library_id", .text(libraryID.lowercased)),
                    ("created_at", .integer(clock.nowMilliseconds())),
                ]
                for (key, value) in meta { try LogTables.setMeta(key, value, in: db) }
                // A replica answers with the incarnation of the database it follows.
                if let incarnation { try LogTables.setMeta(Self.incarnationKey, .text(incarnation.lowercased), in: db) }
            }
        } else {
            let format = try LogTables.meta("format_version", in: db).integerValue ?? 0
            if format > formatVersion {
                throw ChronicleError(.futureStoreVersion, "\(path) uses server library format v\(format), but this build reads up to v\(formatVersion). Update Chronicle to open it; the file was left untouched.")
            }
            for version in format..<formatVersion {
                try db.transaction { db in
                    for statement in migrations[version] ?? [] { try db.execute(statement) }
                    try LogTables.setMeta("format_version", .integer(version + 1), in: db)
                }
            }
            let stored = try LogTables.meta("library_id", in: db).textValue
            guard stored == libraryID.lowercased else {
                throw ChronicleError(.wrongLibrary, "\(path) holds library \(stored ?? "?"), not \(libraryID.lowercased).")
            }
            if try LogTables.meta("schema_fingerprint", in: db).textValue != schema.fingerprint {
                let start = DispatchTime.now().uptimeNanoseconds
                let from = try LogTables.meta("schema_version", in: db).integerValue ?? 0
                try migrateProjection(db, to: schema, projection, libraryID: libraryID, clock: clock)
                migrated = (from, Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
            }
        }
        try db.execute(ProjectionSchema.unreadableStatement)
        if let caps { try installCaps(caps, schema, projection, in: db) }
        let capped = try caps.map { !$0.isEmpty }
            ?? (db.scalarInt("SELECT count(*) FROM sqlite_schema WHERE type = 'trigger' AND name LIKE 'chronicle\\_cap\\_%' ESCAPE '\\'") ?? 0 > 0)
        return try ServerLibrary(path: path, libraryID: libraryID, schema: schema, clock: clock,
                                 ids: ids ?? SystemIDGenerator(clock: clock), projection: projection, writer: db, capped: capped,
                                 schemaMigration: migrated)
    }

    /// The library was made by a build with another version of its schema (the server was
    /// updated): its projection is rebuilt from the log, ops of earlier versions upcast as they
    /// are read, in one transaction (interrupted, the next open does it again; the log is not
    /// touched). Where a horizon dropped the history before a snapshot, the replay starts from
    /// that snapshot, its state carried over (`SnapshotMigration`). Devices that start from a
    /// snapshot get one of the current shape: a new one is written at the head.
    static func migrateProjection(_ db: Database, to schema: Schema, _ projection: ProjectionSchema, libraryID: UUID,
                                  clock: any ChronicleClock) throws {
        let stored = try LogTables.meta("schema_version", in: db).integerValue ?? 0
        if stored > Int64(schema.version) {
            throw ChronicleError(.updateRequired, "This library was written with schema \(schema.name) v\(stored), but this server build knows up to v\(schema.version). Update the server to open it; the file was left untouched.")
        }
        try db.transaction { db in
            try db.withoutDefensive {
                for (kind, name) in projection.droppableObjects { try db.execute("DROP \(kind) IF EXISTS \(ProjectionSchema.quoted(name))") }
            }
            let statements = projection.tableStatements.filter { !$0.contains("chronicle_shadow_") }
            for statement in statements where !statement.hasPrefix("CREATE INDEX") { try db.execute(statement) }
            try db.execute(ProjectionSchema.unreadableStatement)
            let base = try LogTables.replayBase(in: db, projection, preferLatest: false)
            var carriedOver = false
            if let base { carriedOver = try ProjectionTables.load(storedAt: base, from: db, into: db, projection, libraryID: libraryID) != nil }
            _ = try ProjectionTables.replay(from: db, into: db, Materializer(schema: schema), projection, after: base ?? 0, upTo: nil,
                                       includePending: false, progress: nil)
            if carriedOver {
                // Devices that replay the log themselves would know more than this state: pulls name
                // where it began, and such devices start over from the snapshot written below.
                try LogTables.setMeta(stateCarriedOverKey, .integer(try Self.head(in: db)), in: db)
            }
            for statement in statements where statement.hasPrefix("CREATE INDEX") { try db.execute(statement) }
            if try db.scalarInt("SELECT count(*) FROM chronicle_snapshots") ?? 0 > 0 {
                let head = try Self.head(in: db)
                let (body, digest) = try ProjectionTables.snapshotBody(projection, from: db, seq: head, libraryID: libraryID)
                let frame = LZ4Frame.compress(body)
                try LogTables.insertSnapshot(at: head, frame: frame, stateDigest: digest, createdAt: clock.nowMilliseconds(), in: db)
            }
            try LogTables.setMeta("schema_version", .integer(Int64(schema.version)), in: db)
            try LogTables.setMeta("schema_fingerprint", .text(schema.fingerprint), in: db)
        }
    }

    /// Replaces the free-tier cap triggers with the ones configured now.
    static func installCaps(_ caps: [FreeTierCap], _ schema: Schema, _ projection: ProjectionSchema, in db: Database) throws {
        let statements = try caps.flatMap { try $0.triggers(schema, projection) }
        try db.transaction { db in
            let old = try db.query("SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'chronicle\\_cap\\_%' ESCAPE '\\'") { $0.text(0) }
            for name in old { try db.execute("DROP TRIGGER \(ProjectionSchema.quoted(name))") }
            for statement in statements { try db.execute(statement) }
        }
    }

    private init(path: String, libraryID: UUID, schema: Schema, clock: any ChronicleClock, ids: any IDGenerator,
                 projection: ProjectionSchema, writer: Database, capped: Bool,
                 schemaMigration: (fromVersion: Int64, seconds: Double)? = nil) throws {
        self.capped = capped
        self.schemaMigration = schemaMigration
        self.ids = ids
        self.path = path
        self.libraryID = libraryID
        if let stored = try LogTables.meta(Self.incarnationKey, in: writer).textValue.flatMap(UUID.init(uuidString:)) {
            incarnation = stored
        } else {
            incarnation = UUID()
            try LogTables.setMeta(Self.incarnationKey, .text(incarnation.lowercased), in: writer)
        }
        self.schema = schema
        self.stateCarriedOverAt = try LogTables.meta(Self.stateCarriedOverKey, in: writer).integerValue
        self.clock = clock
        self.materializer = Materializer(schema: schema)
        self.projection = projection
        let last = try writer.query("SELECT server_seq, server_time FROM chronicle_log ORDER BY server_seq DESC LIMIT 1") { ($0.int(0), $0.int(1)) }
        self.tail = Locked((last.first?.0 ?? 0, last.first?.1 ?? 0))
        // Checkpoints off the push path (as on devices), and a page cache sized for a library's
        // op-id index and projection (with the 16 MB default, in-process pushes fell from 43,000
        // to 12,000 ops/s as a library grew to 400,000 ops; the cache is one suspect).
        self.checkpointer = Checkpointer(path: path)
        try checkpointer.install(on: writer)
        try writer.execute("PRAGMA cache_size = -\(Self.cacheKilobytes)")
        self.writer = Locked(writer)
        self.readers = ReaderPool(path: path)
    }

    /// The highest serverSeq in the log (read from the file: another process, such as
    /// `chronicle server set-plan`, may have appended since).
    /// A library that follows an upstream catches up first (and answers with what it holds where
    /// the upstream cannot be reached).
    public var head: Int64 {
        if let upstream { try? upstream.catchUp(self) }
        return localHead
    }

    /// `head`, but where the upstream cannot be asked this throws (a 503 where it is out of reach)
    /// instead of answering with what the file holds: a device whose cursor is past a stale head
    /// would otherwise be told the server lost its history (`cursor_ahead`).
    public func caughtUpHead() throws -> Int64 {
        try catchUp()
        return localHead
    }

    /// The highest serverSeq this file holds, without asking an upstream.
    public var localHead: Int64 {
        (try? read { db in try Self.head(in: db) }) ?? tail.withLock { $0.seq }
    }

    /// Makes `upstream` decide this library's order from now on: pushes and server ops are ordered
    /// and committed there first, and reads catch up with it before they answer.
    public func follow(_ upstream: any LibraryUpstream) {
        upstreamHolder.withLock { $0 = upstream }
    }

    /// Brings this file up to its upstream's state (nothing without one).
    public func catchUp() throws {
        try upstream?.catchUp(self)
    }

    static func head(in db: Database) throws -> Int64 {
        max(try db.scalarInt("SELECT coalesce(max(server_seq), 0) FROM chronicle_log") ?? 0, try LogTables.sealedUpTo(in: db))
    }

    package func read<T>(_ body: (Database) throws -> T) throws -> T {
        try readers.read(body)
    }

    // MARK: - Pull and verdicts

    /// Confirmed ops after `cursor`, at most `limit`, in server order (sealed segments
    /// included). A cursor older than the retention horizon cannot be served op by op:
    /// that is `cursor_too_old` (410) and the device starts from the snapshot instead.
    ///
    /// `alignToSegments` (what sync asks for): a page within sealed history ends where its
    /// sealed segment ends, so it may hold fewer than `limit` ops while more remain, and the
    /// next page starts a segment. A page that is exactly one sealed segment then also comes
    /// back `encoded`: the segment's body and its stored LZ4 frame, which the HTTP answer
    /// sends as they are (a device catching up on compacted history costs no encoding).
    public func pull(after cursor: Int64, limit: Int, alignToSegments: Bool = false) throws
        -> (ops: [Op], head: Int64, encoded: SegmentBytes?, afterOpID: UUID?) {
        try catchUp()
        return try read { db in
            // The op at the cursor (in the log, or sealed: its id is kept forever, even past the
            // horizon): a device that holds another op there went on from a history this server no
            // longer has (`PullPage.afterOpID`).
            let afterOpID = cursor > 0 ? try Self.opID(at: cursor, in: db) : nil
            let base = try LogTables.historyBase(in: db)
            if cursor < base {
                var error = ProtocolError(410, .cursorTooOld, "Ops up to seq \(base) were compacted away on the server (retention horizon); this device last synced at seq \(cursor). Start from the snapshot at seq \(base): queued changes are kept and pushed afterwards.")
                error.afterOpID = afterOpID
                throw error
            }
            var limit = limit
            if alignToSegments, let (first, last) = try db.query("""
                SELECT first_seq, last_seq FROM chronicle_segments WHERE first_seq <= ?1 ORDER BY first_seq DESC LIMIT 1
                """, [.integer(cursor + 1)], { ($0.int(0), $0.int(1)) }).first, last > cursor {
                if first == cursor + 1, last - cursor <= Int64(limit) {
                    let whole = try wholeSegment(at: first, in: db)
                    return (whole.ops, try Self.head(in: db), whole.encoded, afterOpID)
                }
                limit = Int(min(Int64(limit), last - cursor))
            }
            var ops: [Op] = []
            ops.reserveCapacity(min(limit, 10_000))
            let sealed = try LogTables.sealedUpTo(in: db)
            if cursor < sealed {
                struct Enough: Error {}
                do {
                    try LogTables.forEachConfirmedOp(in: db, libraryID: libraryID, after: cursor, upTo: sealed) { op in
                        ops.append(op)
                        if ops.count >= limit { throw Enough() }
                    }
                } catch is Enough {}
            }
            if ops.count < limit {
                let after = ops.last?.serverSeq ?? cursor
                let statement = try db.statement("SELECT \(LogTables.logColumns) FROM chronicle_log WHERE server_seq > ?1 ORDER BY server_seq LIMIT ?2")
                ops += try statement.map([.integer(after), .integer(Int64(limit - ops.count))]) { try LogTables.logOp($0, libraryID: libraryID) }
            }
            return (ops, try Self.head(in: db), nil, afterOpID)
        }
    }

    /// The id of the op at `seq`, from the log or the sealed op ids; nil past the head.
    static func opID(at seq: Int64, in db: Database) throws -> UUID? {
        let text = try db.scalarText("SELECT op_id FROM chronicle_log WHERE server_seq = ?1", [.integer(seq)])
            ?? db.scalarText("SELECT op_id FROM chronicle_sealed_ops WHERE server_seq = ?1", [.integer(seq)])
        return text.flatMap { UUID(uuidString: $0) }
    }

    /// The sealed segment starting at `first`: its ops, body and stored frame.
    private func wholeSegment(at first: Int64, in db: Database) throws -> (ops: [Op], encoded: SegmentBytes) {
        guard let (count, frame) = try db.query("SELECT op_count, body FROM chronicle_segments WHERE first_seq = ?1", [.integer(first)],
                                                { ($0.int(0), $0.withBytes(1) { Array($0) }) }).first else {
            throw ChronicleError(.invariantViolated, "No sealed segment starts at seq \(first).")
        }
        let body = try LZ4Frame.decompress(frame, maxBytes: SegmentCodec.Limits().maxDecodedBytes)
        let segment = try SegmentCodec.decodeBody(body)
        guard segment.libraryID == libraryID, segment.firstSeq == first, segment.ops.count == Int(count) else {
            throw ChronicleError(.invariantViolated, "The sealed segment at seq \(first) does not hold what its row says.")
        }
        return (segment.ops, SegmentBytes(body: body, frame: frame))
    }

    /// The newest snapshot (its seq and LZ4 frame), for devices that start from it.
    public func latestSnapshot() throws -> (seq: Int64, frame: [UInt8])? {
        try read { db in
            try db.query("SELECT seq, body FROM chronicle_snapshots ORDER BY seq DESC LIMIT 1") { row in
                (row.int(0), row.withBytes(1) { Array($0) })
            }.first
        }
    }

    /// The newest snapshot's seq, with its frame read straight into storage `allocate` returns
    /// for the frame's length (incremental blob I/O, so the frame is never copied whole on the
    /// way). One read transaction.
    public func latestSnapshot<Storage>(into allocate: (Int) -> (storage: Storage, bytes: UnsafeMutableRawBufferPointer)) throws
        -> (seq: Int64, storage: Storage)? {
        try read { db in
            let newest = try db.query("SELECT seq, length(body) FROM chronicle_snapshots ORDER BY seq DESC LIMIT 1") { ($0.int(0), $0.int(1)) }
            guard let found = newest.first else { return nil }
            let (storage, bytes) = allocate(Int(found.1))
            var offset = 0
            try db.readBlob(table: "chronicle_snapshots", column: "body", rowid: found.0) { piece in
                guard offset + piece.count <= bytes.count else {
                    throw ChronicleError(.invariantViolated, "The snapshot at seq \(found.0) grew while it was read.")
                }
                bytes.baseAddress!.advanced(by: offset).copyMemory(from: piece.baseAddress!, byteCount: piece.count)
                offset += piece.count
            }
            guard offset == bytes.count else {
                throw ChronicleError(.invariantViolated, "The snapshot at seq \(found.0) was shorter than its row said.")
            }
            return (found.0, storage)
        }
    }

    /// The seq of the newest snapshot, if any (pulls advertise it so a far-behind device can start there).
    public func latestSnapshotSeq() throws -> Int64? {
        try read { db in try db.scalarInt("SELECT max(seq) FROM chronicle_snapshots") }
    }

    /// The server's state of one entity.
    public func verdict(_ entity: UUID) throws -> Verdict {
        try catchUp()
        return try read { db in try verdict(entity, in: db) }
    }

    func verdict(_ entity: UUID, in db: Database) throws -> Verdict {
        let head = try Self.head(in: db)
        let lastSeq = try db.scalarInt("SELECT coalesce(max(server_seq), 0) FROM chronicle_log WHERE entity_id = ?1", [.text(entity.lowercased)]) ?? 0
        guard let spec = try ProjectionTables.entityType(of: entity, schema, in: db),
              let row = try ProjectionTables.rows(spec.name, schema, where: "t.id = ?1", [.text(entity.lowercased)],
                                             includeDeleted: true, limit: 1, markPending: false, in: db).first else {
            return Verdict(entityID: entity, entityType: nil, deleted: false, fields: [:], sets: [:], lastSeq: lastSeq, head: head)
        }
        var fields: [String: Value] = [:]
        for (name, value) in row.fields { fields[name] = value }
        var sets: [String: [Value]] = [:]
        for (name, values) in row.sets { sets[name] = values }
        let deleted = spec.hasSoftDelete && !(fields["deleted_at"]?.isNull ?? true)
        return Verdict(entityID: entity, entityType: spec.name, deleted: deleted, fields: fields, sets: sets, lastSeq: lastSeq, head: head)
    }

    /// The same digest a device computes over its projection.
    public func digest() throws -> String {
        try read { db in try ProjectionTables.digest(projection, in: db) }
    }

    /// Every op in the log, in order (tests and tools; streams nothing, so keep it to small libraries).
    public func allOps() throws -> [Op] {
        try pull(after: try read { db in try LogTables.historyBase(in: db) }, limit: Int(Int32.max)).ops
    }

    package func writeTransaction<T>(_ body: (Database) throws -> T) throws -> T {
        try writer.withLock { db in try db.transaction(body) }
    }
}
