import CSQLite
import ChronicleCore
import Foundation

/// The projection's tables, as both sides keep them: rows read back, the state digest, replays
/// of the log into them, scratch copies, and snapshots written from and loaded into them. The
/// device store and the server's library files both go through this one type; ops are applied
/// to the tables by `ProjectionApplier`.
///
/// Every function runs on the connection it is given, inside the caller's transaction.
public enum ProjectionTables {
    /// The SHA-256 of the projection's canonical rows, as hex: equal on every replica that applied the same ops.
    package static func digest(_ projection: ProjectionSchema, in db: Database) throws -> String {
        let hasher = SHA256Hasher()
        try ProjectionTables.visitCanonicalRows(projection, in: db, table: { table in hasher.update("table \(table.name)\n") },
                               row: { row, width in ProjectionTables.hash(row, width: width, into: hasher) })
        return hasher.hexDigest()
    }

    /// A scratch database holding empty projection tables (no FTS): in memory, or in a private
    /// temporary file that SQLite removes when it closes (`onDisk`, for a whole library's state).
    package static func scratchProjection(_ projection: ProjectionSchema, onDisk: Bool = false) throws -> Database {
        var options = Database.Options()
        options.scratch = true   // no journal, no syncs: it is thrown away
        let scratch = try Database(path: onDisk ? "" : ":memory:", options: options)
        try scratch.execute("CREATE TABLE chronicle_shadowed (entity TEXT NOT NULL, id TEXT NOT NULL, PRIMARY KEY (entity, id)) WITHOUT ROWID")
        try ProjectionTables.createProjection(projection, in: scratch, withSearch: false)
        return scratch
    }

    /// Replays confirmed ops after `after` (up to `upTo`) and optionally the outbox from
    /// `source` into the projection tables of `target`, which must hold exactly the state
    /// at `after` (empty for 0, or a loaded snapshot). Reads sealed segments and the log.
    package static func replay(from source: Database, into target: Database, _ materializer: Materializer, _ projection: ProjectionSchema,
                       after: Int64 = 0, upTo: Int64?, includePending: Bool, entity: String? = nil,
                       prefetch: ReaderPool? = nil, progress: ProgressHandler?) throws -> (Int64, Int) {
        let entityFilter = entity.map { _ in " WHERE entity_id = ?1" } ?? ""
        let pendingTotal = includePending
            ? try source.scalarInt("SELECT count(*) FROM chronicle_outbox\(entityFilter)", entity.map { [.text($0)] } ?? []) ?? 0 : 0
        let total = (entity == nil ? try LogTables.confirmedCount(in: source, after: after, upTo: upTo) : 0) + pendingTotal
        var done: Int64 = 0
        let stride: Int64 = 10_000
        progress?(0, total)
        let applier = ProjectionApplier(materializer, in: target)
        let libraryID = try LogTables.uuid(try LogTables.meta("library_id", in: source).textValue ?? "")
        if let prefetch, entity == nil {
            // `prefetch`: the confirmed ops are committed as `source` sees them (see forEachPreparedOp).
            try LogTables.forEachPreparedOp(readers: prefetch, libraryID: libraryID, after: after, upTo: upTo, materializer) { op, steps in
                try applier.apply(op, steps: steps)
                done += 1
                if done % stride == 0 { progress?(done, total) }
            }
        } else {
            try LogTables.forEachConfirmedOp(in: source, libraryID: libraryID, after: after, upTo: upTo, entity: entity) { op in
                try applier.apply(op)
                done += 1
                if done % stride == 0 { progress?(done, total) }
            }
        }
        var pending = 0
        if includePending {
            let deviceID = try LogTables.uuid(try LogTables.meta("device_id", in: source).textValue ?? "")
            let ops = try source.query("SELECT \(DeviceStore.outboxColumns) FROM chronicle_outbox\(entityFilter) ORDER BY device_seq",
                                       entity.map { [.text($0)] } ?? []) { try DeviceStore.outboxOp($0, libraryID: libraryID, deviceID: deviceID) }
            for op in ops {
                if let spec = materializer.entity(of: op) { try DeviceStore.shadowIfNeeded(spec, op.entityID.lowercased, projection, in: target) }
                try applier.apply(op)
                pending += 1
                if pending % Int(stride) == 0 { progress?(done + Int64(pending), total) }
            }
        }
        progress?(done + Int64(pending), total)
        return (done, pending)
    }

    /// The projection query behind `rows` and the server's verdicts. `markPending` reads
    /// `chronicle_shadowed` (device stores only).
    package static func rows(_ entityName: String, _ schema: Schema, where filter: String? = nil, _ arguments: [Value] = [],
                     includeDeleted: Bool, limit: Int, markPending: Bool, in db: Database) throws -> [EntityRow] {
        guard let entity = schema.entity(entityName) else {
            throw ChronicleError(.unknownEntity, "Schema \(schema.name) has no entity type '\(entityName)'; it has \(schema.entities.map(\.name).joined(separator: ", ")).")
        }
        let names = entity.scalarFields.map(\.name)
        var conditions: [String] = []
        if let filter { conditions.append(filter) }
        if !includeDeleted && entity.hasSoftDelete { conditions.append("t.deleted_at IS NULL") }
        let whereClause = conditions.isEmpty ? "" : " WHERE " + conditions.joined(separator: " AND ")
        let columns = (["id", "created_at"] + names).map { "t." + ProjectionSchema.quoted($0) }.joined(separator: ", ")
        let pending = markPending ? "EXISTS (SELECT 1 FROM chronicle_shadowed s WHERE s.entity = ?\(arguments.count + 1) AND s.id = t.id)" : "0"
        let sql = """
            SELECT \(columns), \(pending)
            FROM \(ProjectionSchema.quoted(entity.table)) t\(whereClause) ORDER BY t.created_at DESC, t.id LIMIT \(limit)
            """
        var result = try db.query(sql, arguments + (markPending ? [.text(entity.name)] : [])) { row -> EntityRow in
            var fields: [(String, Value)] = [("created_at", row.value(1))]
            for (offset, field) in entity.scalarFields.enumerated() {
                fields.append((field.name, ProjectionTables.typed(row.value(Int32(offset + 2)), field)))
            }
            return EntityRow(entityType: entity.name, id: row.text(0), fields: fields, sets: [],
                             pending: row.int(Int32(names.count + 2)) == 1)
        }
        for index in result.indices {
            for field in entity.setFields {
                let values = try db.query("SELECT value FROM \(ProjectionSchema.quoted(entity.setTable(field))) WHERE id = ?1 ORDER BY value",
                                          [.text(result[index].id)]) { $0.value(0) }
                result[index].sets.append((field.name, values))
            }
        }
        return result
    }

    /// The entity type of the row with this id, searching every entity table.
    package static func entityType(of id: UUID, _ schema: Schema, in db: Database) throws -> EntitySpec? {
        for entity in schema.entities {
            if try db.scalarInt("SELECT 1 FROM \(ProjectionSchema.quoted(entity.table)) WHERE id = ?1", [.text(id.lowercased)]) != nil {
                return entity
            }
        }
        return nil
    }

    /// The projection's canonical rows as a snapshot body, written as they are read (never
    /// held as values: a 1,000,000-op library's rows took about ten times the body's size in
    /// memory), and the state digest of the same rows, in one pass. Inside a read transaction,
    /// so the counts and rows are of one moment.
    package static func snapshotBody(_ projection: ProjectionSchema, from db: Database, seq: Int64,
                             libraryID: UUID) throws -> (body: [UInt8], digest: String) {
        let schema = projection.schema
        var writer = SnapshotBodyWriter(libraryID: libraryID, seq: seq, schemaName: schema.name, schemaVersion: schema.version,
                                        schemaFingerprint: schema.fingerprint, tableCount: projection.tables.count)
        let hasher = SHA256Hasher()
        var rowsLeft = 0
        try ProjectionTables.visitCanonicalRows(projection, in: db, table: { table in
            guard rowsLeft == 0 else { throw ChronicleError(.invariantViolated, "The projection changed while its snapshot was read.") }
            hasher.update("table \(table.name)\n")
            rowsLeft = Int(try db.scalarInt("SELECT count(*) FROM \(ProjectionSchema.quoted(table.name))") ?? 0)
            writer.table(table.name, columns: table.columns, rowCount: rowsLeft)
        }, row: { row, width in
            guard rowsLeft > 0 else { throw ChronicleError(.invariantViolated, "The projection changed while its snapshot was read.") }
            rowsLeft -= 1
            ProjectionTables.hash(row, width: width, into: hasher)
            for index in 0..<width { writer.value(row.value(index)) }
        })
        guard rowsLeft == 0 else { throw ChronicleError(.invariantViolated, "The projection changed while its snapshot was read.") }
        return (writer.finish(), hasher.hexDigest())
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
    package static func load(storedAt seq: Int64, from source: Database, into db: Database, _ projection: ProjectionSchema,
                     libraryID: UUID) throws -> Int? {
        var filler = ProjectionFiller(db: db, projection: projection, libraryID: libraryID, migrating: true)
        try LogTables.readStoredSnapshot(seq, in: source, into: &filler)
        return filler.migratedFrom
    }

    static func createProjection(_ projection: ProjectionSchema, in db: Database, withSearch: Bool) throws {
        for statement in projection.tableStatements { try db.execute(statement) }
        if withSearch { for statement in projection.searchStatements { try db.execute(statement) } }
    }

    /// One row's cells into the digest: each cell's SQLite type, then its value.
    static func hash(_ row: Row, width: Int32, into hasher: SHA256Hasher) {
        for index in 0..<width {
            var tag: UInt8
            switch row.columnType(index) {
            case SQLITE_NULL: tag = 0
            case SQLITE_INTEGER: tag = 1
            case SQLITE_FLOAT: tag = 2
            default: tag = 3
            }
            withUnsafeBytes(of: &tag) { hasher.update($0) }
            switch tag {
            case 1: var v = row.int(index).littleEndian; withUnsafeBytes(of: &v) { hasher.update($0) }
            case 2: var v = row.double(index).bitPattern.littleEndian; withUnsafeBytes(of: &v) { hasher.update($0) }
            case 3:
                row.withBytes(index) { bytes in
                    var length = UInt64(bytes.count).littleEndian
                    withUnsafeBytes(of: &length) { hasher.update($0) }
                    hasher.update(bytes)
                }
            default: break
            }
        }
    }

    /// SQLite keeps booleans as 0/1; give them back as booleans.
    static func typed(_ value: Value, _ field: FieldSpec?) -> Value {
        if field?.type == .boolean, let i = value.integerValue, value.textValue == nil { return .bool(i != 0) }
        return value
    }

    /// Reads every projection table in schema order, its rows in key order: what the digest
    /// hashes and a snapshot holds. `table` is called before each table's rows.
    static func visitCanonicalRows(_ projection: ProjectionSchema, in db: Database, table visitTable: ((name: String, columns: [String], orderBy: String)) throws -> Void,
                                   row visitRow: (Row, Int32) throws -> Void) throws {
        for table in projection.tables {
            try visitTable(table)
            let columns = table.columns.map(ProjectionSchema.quoted).joined(separator: ", ")
            let statement = try db.uncached("SELECT \(columns) FROM \(ProjectionSchema.quoted(table.name)) ORDER BY \(table.orderBy)")
            let width = Int32(table.columns.count)
            try statement.forEach { row in try visitRow(row, width) }
        }
    }
}
