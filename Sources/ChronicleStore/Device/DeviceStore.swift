import ChronicleCore
import Foundation

/// One device's store: a single SQLite file holding the confirmed log, the
/// outbox, the projection tables and FTS5 indexes, and metadata.
///
/// One writer connection behind a lock; reads go through a pool of read-only
/// connections that never wait on the writer (WAL).
///
/// ```swift
/// let store = try DeviceStore.create(at: "library.chronicle", schema: .readItLater)
/// let save = try store.write("article.save", payload: ["url": .text("https://example.com")])
/// try store.write("article.tag", entity: save.entityID, payload: ["tag": .text("later")])
/// let hits = try store.search("example")
/// ```
public final class DeviceStore: Sendable {
    public let path: String
    public let schema: Schema
    public let deviceID: UUID
    public let libraryID: UUID
    package let clock: any ChronicleClock
    let ids: any IDGenerator
    package let materializer: Materializer
    package let projection: ProjectionSchema
    let indexer: SearchIndexer
    let searchPlans: [SearchPlan]
    /// How searches read each plan, from the indexes' sizes, and searches since (`searchLayout`).
    let searchLayoutState = Locked<(layout: SearchLayout?, searches: Int)>((nil, 0))
    let writer: Locked<Database>
    let checkpointer: Checkpointer
    let readers: ReaderPool
    /// True between `beginBulk` and the end of `finishBulk`: the search indexes are meant to be stale.
    let bulkInProgress = Locked(false)
    /// The schema changed since the projection was built and `performUpkeep` has not rebuilt it
    /// yet: reads and writes are refused (`upkeep_required`) until it has.
    let schemaRebuildDue = Locked(false)
    /// The indexes of word pairs beside the search indexes over documents and entities' own (`PhraseIndex`).
    let phraseIndexes: [PhraseIndex]
    /// The background filler of the phrase indexes: running, asked to look again before it
    /// stops, when it last failed (`startPhraseIndexing`).
    let phraseIndexing = Locked<(running: Bool, again: Bool, failedAt: Date?)>((false, false, nil))

    /// Creates a new, empty store at `path`. Fails if a file is already there.
    public static func create(at path: String, schema: Schema, libraryID: UUID? = nil, deviceID: UUID? = nil,
                              clock: any ChronicleClock = SystemClock(),
                              ids: (any IDGenerator)? = nil) throws -> DeviceStore {
        let ids = ids ?? SystemIDGenerator(clock: clock)
        if FileManager.default.fileExists(atPath: path) {
            throw ChronicleError(.storeExists, "A file already exists at \(path); choose another path or open it instead.")
        }
        let db = try Database(path: path)
        let library = libraryID ?? ids.makeUUID()
        let device = deviceID ?? ids.makeUUID()
        do {
            try db.transaction { db in
                try StoreFormat.create(in: db)
                let meta: [(String, Value)] = [
                    ("format_version", .integer(StoreFormat.currentVersion)),
                    ("schema_name", .text(schema.name)),
                    ("schema_version", .integer(Int64(schema.version))),
                    ("schema_fingerprint", .text(schema.fingerprint)),
                    ("library_id", .text(library.lowercased)),
                    ("device_id", .text(device.lowercased)),
                    ("last_device_seq", .integer(0)),
                    ("cursor", .integer(0)),
                    ("created_at", .integer(clock.nowMilliseconds())),
                ]
                for (key, value) in meta {
                    try db.execute("INSERT INTO chronicle_meta(key, value) VALUES (?1, ?2)", [.text(key), value])
                }
                try ProjectionTables.createProjection(ProjectionSchema(schema: schema), in: db, withSearch: true)
            }
        } catch {
            try? FileManager.default.removeItem(atPath: path)
            try? FileManager.default.removeItem(atPath: path + "-wal")
            try? FileManager.default.removeItem(atPath: path + "-shm")
            throw error
        }
        let store = try DeviceStore(path: path, schema: schema, deviceID: device, libraryID: library, clock: clock, ids: ids, writer: db)
        try store.openPhraseIndexes()
        return store
    }

    /// Opens an existing store: it reads, and brings a store of an earlier format to this build's
    /// (a backup first, then one transaction per step), and does nothing else. What else a store
    /// may need before use (its projection rebuilt for a changed schema, search indexes repaired,
    /// a leftover download removed) is listed by `upkeepDue()` and done by `performUpkeep(progress:)`,
    /// which the CLI and the sync engine call; an app that uses the store directly calls it once
    /// after opening. Until then a store whose schema changed refuses reads and writes
    /// (`upkeep_required`).
    ///
    /// `schema`: the app's schema (the newest version, with its history: `Schema.load(history:)`),
    /// for a store of a schema this build does not include; by default the built-in schema the
    /// store names (`Schema.named`).
    public static func open(at path: String, schema given: Schema? = nil, clock: any ChronicleClock = SystemClock(),
                            ids: (any IDGenerator)? = nil) throws -> DeviceStore {
        let ids = ids ?? SystemIDGenerator(clock: clock)
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw ChronicleError(.storeMissing, "No store at \(path). Create one with `chronicle init --store \(path)`.")
        }
        guard !isDirectory.boolValue else {
            throw ChronicleError(.notAChronicleStore, "\(path) is a directory, not a store; a store is one file.")
        }
        // Look before touching: a store from a future version must be left exactly as it is.
        let meta = try probeMeta(at: path)
        guard let format = meta["format_version"]?.integerValue else {
            throw ChronicleError(.notAChronicleStore, "\(path) has no store format version; it is not a Chronicle store.")
        }
        if format > StoreFormat.currentVersion {
            throw ChronicleError(.futureStoreVersion, "\(path) uses store format v\(format), but this build of Chronicle reads up to v\(StoreFormat.currentVersion). Update Chronicle to open it; the store was left untouched.")
        }
        let schema = try schemaOfStore(at: path, named: meta["schema_name"]?.textValue, given: given)
        let schemaName = schema.name
        let storedSchemaVersion = meta["schema_version"]?.integerValue ?? 0
        if storedSchemaVersion > Int64(schema.version) {
            throw ChronicleError(.futureStoreVersion, "\(path) uses schema \(schemaName) v\(storedSchemaVersion), but this build knows up to v\(schema.version). Update Chronicle to open it; the store was left untouched.")
        }
        guard let library = meta["library_id"]?.textValue.flatMap(UUID.init(uuidString:)),
              let device = meta["device_id"]?.textValue.flatMap(UUID.init(uuidString:)) else {
            throw ChronicleError(.notAChronicleStore, "\(path) lacks its library or device id.")
        }
        do {
            return try openChecked(at: path, schema: schema, meta: meta, format: format, library: library, device: device, clock: clock, ids: ids)
        } catch let error as SQLiteError where error.isCorrupt {
            throw damaged(path, error)
        }
    }

    /// `open` once the store's meta has been read and checked.
    private static func openChecked(at path: String, schema: Schema, meta: [String: Value], format: Int64, library: UUID, device: UUID,
                                    clock: any ChronicleClock, ids: any IDGenerator) throws -> DeviceStore {
        let db = try Database(path: path, options: { var o = Database.Options(); o.create = false; return o }())
        if format < StoreFormat.currentVersion { try migrateFormat(db, from: format) }
        try db.execute(ProjectionSchema.unreadableStatement)
        let store = try DeviceStore(path: path, schema: schema, deviceID: device, libraryID: library, clock: clock, ids: ids, writer: db)
        store.schemaRebuildDue.withLock { $0 = meta["schema_fingerprint"]?.textValue != schema.fingerprint }
        return store
    }

    /// The store's `chronicle_meta`, read on a read-only connection, with what is wrong said plainly:
    /// not a database, a database of something else, or a damaged store.
    static func probeMeta(at path: String) throws -> [String: Value] {
        let probe: Database
        do {
            var options = Database.Options()
            options.readOnly = true
            probe = try Database(path: path, options: options)
            // The schema is read on first use; a header SQLite does not recognize fails here.
            _ = try probe.scalarInt("SELECT count(*) FROM sqlite_schema")
        } catch let error as SQLiteError where error.primaryCode == 26 /* SQLITE_NOTADB */ {
            throw ChronicleError(.notAChronicleStore, "\(path) is not a SQLite database, so not a Chronicle store.")
        } catch let error as SQLiteError where error.isCorrupt {
            throw damaged(path, error)
        } catch let error as SQLiteError {
            throw ChronicleError(.database, "\(path) cannot be read: \(error.message).")
        }
        do {
            guard try probe.scalarInt("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'chronicle_meta'") == 1 else {
                throw ChronicleError(.notAChronicleStore, "\(path) is a SQLite database but not a Chronicle store (it has no chronicle_meta table).")
            }
            return Dictionary(try probe.query("SELECT key, value FROM chronicle_meta") { ($0.text(0), $0.value(1)) }, uniquingKeysWith: { a, _ in a })
        } catch let error as SQLiteError where error.isCorrupt {
            throw damaged(path, error)
        }
    }

    /// The error for a store SQLite found damaged (`SQLiteError.isCorrupt`).
    public static func damaged(_ path: String, _ error: SQLiteError) -> ChronicleError {
        ChronicleError(.storeDamaged, "\(path) is damaged: SQLite cannot read part of it (\(error.message)). Nothing more was written to it. `chronicle salvage` keeps everything that can still be read in a new store and sets the damaged file aside.")
    }

    /// The schema a store named `name` opens with: `given` (which must be of that name), else the built-in one.
    static func schemaOfStore(at path: String, named name: String?, given: Schema?) throws -> Schema {
        if let given {
            guard name == given.name else {
                throw ChronicleError(.schemaMismatch, "\(path) holds a library of schema '\(name ?? "?")', not '\(given.name)'; the store was left untouched.")
            }
            return given
        }
        guard let name, let schema = Schema.named(name) else {
            throw ChronicleError(.schemaMismatch, "\(path) uses schema '\(name ?? "?")', which this build does not include; an app with a schema of its own opens its store with DeviceStore.open(at:schema:).")
        }
        return schema
    }

    private init(path: String, schema: Schema, deviceID: UUID, libraryID: UUID, clock: any ChronicleClock,
                 ids: any IDGenerator, writer: Database) throws {
        self.path = path
        self.schema = schema
        self.deviceID = deviceID
        self.libraryID = libraryID
        self.clock = clock
        self.ids = ids
        self.materializer = Materializer(schema: schema)
        self.projection = ProjectionSchema(schema: schema)
        self.indexer = SearchIndexer(projection: projection)
        self.searchPlans = Self.searchPlans(projection)
        self.phraseIndexes = PhraseIndex.all(projection)
        self.checkpointer = Checkpointer(path: path)
        try checkpointer.install(on: writer)
        self.writer = Locked(writer)
        self.readers = ReaderPool(path: path)
    }

    // MARK: - Access

    /// Runs `body` on a read-only connection with a consistent snapshot.
    /// Never waits for the writer.
    public func read<T>(_ body: (Database) throws -> T) throws -> T {
        try refuseUntilRebuilt()
        return try readers.read(body)
    }

    /// Refuses a read or write of a store whose schema changed until `performUpkeep` rebuilt its projection.
    func refuseUntilRebuilt() throws {
        guard schemaRebuildDue.withLock({ $0 }) else { return }
        throw ChronicleError(.upkeepRequired, "\(path) was built with another version of schema \(schema.name): its tables must be rebuilt from the log before it is read or written. `DeviceStore.performUpkeep` does it (the CLI and the sync engine call it).")
    }

    /// Copies the write-ahead log into the database file and empties it, now, on this thread
    /// (after the background checkpoint in progress, if any): a quiet moment's housekeeping,
    /// e.g. before a file-level copy or a measurement. Waits for the writer. False if a
    /// reader kept part of the log in use (the background checkpoint copies it later).
    @discardableResult
    public func checkpoint() -> Bool {
        writer.withLock { checkpointer.truncate(writer: $0) }
    }

    /// Runs `body` in one write transaction on the writer connection. `spillToFiles`: temporary
    /// data (the sorts of `CREATE INDEX` over a whole table) goes to temporary files rather than
    /// memory, so work on a large library keeps a flat footprint.
    package func writeTransaction<T>(_ body: (Database) throws -> T) throws -> T {
        try writeTransaction(spillToFiles: false, body)
    }

    /// `relaxedSync`: the commit does not wait for the disk (`Database.withRelaxedSync`);
    /// only for work that can be redone from the server. `largeCommit`: one big commit after
    /// which writes pause (a rebuild, a bootstrap, the end of a bulk apply): the WAL it leaves
    /// is copied into the database by the background checkpoint, not before this returns.
    /// `ignoringUpkeep`: for the rebuild that makes a store of a changed schema usable again.
    func writeTransaction<T>(spillToFiles: Bool, relaxedSync: Bool = false, largeCommit: Bool = false, ignoringUpkeep: Bool = false,
                             _ body: (Database) throws -> T) throws -> T {
        if !ignoringUpkeep { try refuseUntilRebuilt() }
        return try writer.withLock { db in
            if largeCommit {
                return try checkpointer.deferringRestart { try transactionBody(db, spillToFiles: spillToFiles, relaxedSync: relaxedSync, body) }
            }
            return try transactionBody(db, spillToFiles: spillToFiles, relaxedSync: relaxedSync, body)
        }
    }

    private func transactionBody<T>(_ db: Database, spillToFiles: Bool, relaxedSync: Bool, _ body: (Database) throws -> T) throws -> T {
        do {
            // temp_store cannot change inside a transaction.
            if spillToFiles { try db.execute("PRAGMA temp_store = FILE") }
            defer { if spillToFiles { try? db.execute("PRAGMA temp_store = MEMORY") } }
            if relaxedSync { return try db.withRelaxedSync { try db.transaction(body) } }
            return try db.transaction(body)
        } catch let error as SQLiteError where error.isDiskFull {
            throw ChronicleError(.diskFull, "The disk is full; nothing was written. Free some space and try again.")
        }
    }

    /// An applier for this store's tables, in `db`'s write transaction (`prepareSearchIndexing`
    /// says how a write outside a bulk apply keeps the search indexes).
    func applier(in db: Database, indexing: SearchIndexing) -> ProjectionApplier {
        ProjectionApplier(materializer, indexer: indexer, indexing: indexing, in: db)
    }

    /// Confirmed ops this build cannot read (from a newer app version, or of an unknown type):
    /// kept in the log, not applied; a rebuild after updating Chronicle applies them.
    public func unreadableOps() throws -> [(serverSeq: Int64, opID: String, type: String, code: String, message: String)] {
        try read { db in
            try db.query("SELECT server_seq, op_id, type, code, message FROM \(ProjectionSchema.quoted(ProjectionSchema.unreadableTable)) ORDER BY server_seq") {
                ($0.int(0), $0.text(1), $0.text(2), $0.text(3), $0.text(4))
            }
        }
    }

    /// Copies an entity's confirmed rows aside the first time a pending op touches it.
    func shadowIfNeeded(_ entity: EntitySpec, _ id: String, in db: Database) throws {
        try Self.shadowIfNeeded(entity, id, projection, in: db)
    }

    static func shadowIfNeeded(_ entity: EntitySpec, _ id: String, _ projection: ProjectionSchema, in db: Database) throws {
        try db.execute("INSERT OR IGNORE INTO chronicle_shadowed(entity, id) VALUES (?1, ?2)", [.text(entity.name), .text(id)])
        guard db.changes == 1 else { return }
        for sql in projection.shadowSave(entity) { try db.execute(sql, [.text(id)]) }
    }
}
