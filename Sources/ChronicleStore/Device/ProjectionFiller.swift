import ChronicleCore
import Foundation

/// Fills empty projection tables with a snapshot's rows as they are read, after checking
/// that it is of this library and of the projection's shape. Used by `load` and by a
/// bootstrap's streamed read.
///
/// A snapshot of the projection's exact shape (same schema fingerprint, same tables and
/// columns in order) is copied as it is. With `migrating`, a snapshot made with an earlier
/// version of the same schema is accepted too and its state carried over (`SnapshotMigration`):
/// that is how a store whose history begins at such a snapshot (it started from the server's,
/// or a horizon dropped what came before) opens after an update, where there is no log to
/// replay the state from. A snapshot of a later version is refused (`update_required`).
struct ProjectionFiller: SnapshotVisitor {
    let db: Database
    let projection: ProjectionSchema
    let libraryID: UUID
    let migrating: Bool
    /// Set once the header is read: the snapshot's schema version where its state is carried
    /// over from an earlier version, nil where it is of this projection's exact shape.
    private(set) var migratedFrom: Int?
    private var seq: Int64 = 0
    private var tableIndex = -1
    private var insert: Statement?
    /// Migrating: which of the snapshot's columns the current table takes, in order (nil: the table is not kept).
    private var kept: [Int]?
    private var migration: SnapshotMigration?

    init(db: Database, projection: ProjectionSchema, libraryID: UUID, migrating: Bool = false) {
        self.db = db
        self.projection = projection
        self.libraryID = libraryID
        self.migrating = migrating
    }

    mutating func header(_ header: SnapshotHeader) throws {
        guard header.libraryID == libraryID else {
            throw ChronicleError(.wrongLibrary, "The snapshot at seq \(header.seq) is of library \(header.libraryID.lowercased), not \(libraryID.lowercased).")
        }
        seq = header.seq
        let schema = projection.schema
        if header.schemaFingerprint == schema.fingerprint, header.tableCount == projection.tables.count { return }
        guard header.schemaName == schema.name else {
            throw ChronicleError(.schemaMismatch, "The snapshot at seq \(header.seq) holds a library of schema \(header.schemaName), not \(schema.name).")
        }
        if header.schemaVersion > schema.version {
            throw ChronicleError(.updateRequired, "The snapshot at seq \(header.seq) was made with \(header.schemaName) v\(header.schemaVersion), a later version than this build's v\(schema.version); update Chronicle to read it.")
        }
        guard migrating, header.schemaVersion < schema.version else {
            throw ChronicleError(.schemaMismatch, "The snapshot at seq \(header.seq) was made with schema \(header.schemaName) v\(header.schemaVersion), whose projection differs from this build's; replay from the first op instead.")
        }
        migratedFrom = header.schemaVersion
        migration = SnapshotMigration(schema: schema, projection: projection)
    }

    mutating func table(_ name: String, columns: [String], rowCount: Int) throws {
        if let migration {
            guard let (target, mapped) = migration.target(of: name, columns: columns) else {
                kept = nil
                insert = nil
                return
            }
            kept = mapped.map(\.source)
            let quoted = mapped.map { ProjectionSchema.quoted($0.column) }.joined(separator: ", ")
            let placeholders = (1...max(1, mapped.count)).map { "?\($0)" }.joined(separator: ", ")
            insert = mapped.isEmpty ? nil : try db.uncached("INSERT OR IGNORE INTO \(ProjectionSchema.quoted(target))(\(quoted)) VALUES (\(placeholders))")
            return
        }
        tableIndex += 1
        let expected = projection.tables[tableIndex]
        guard name == expected.name, columns == expected.columns else {
            throw ChronicleError(.schemaMismatch, "The snapshot at seq \(seq) has table \(name) (\(columns.joined(separator: ", "))) where this build's projection has \(expected.name) (\(expected.columns.joined(separator: ", "))); replay from the first op instead.")
        }
        let quoted = columns.map(ProjectionSchema.quoted).joined(separator: ", ")
        let placeholders = (1...columns.count).map { "?\($0)" }.joined(separator: ", ")
        insert = try db.uncached("INSERT INTO \(ProjectionSchema.quoted(name))(\(quoted)) VALUES (\(placeholders))")
    }

    mutating func row(_ values: [Value]) throws {
        guard migration != nil else { return try insert!.execute(values) }
        guard let insert, let kept else { return }
        try insert.execute(kept.map { values[$0] })
    }
}

/// How the state in a snapshot made with an earlier version of a schema maps onto the
/// current projection. Tables and columns are matched by name; a field an upcaster renames
/// (`"rename": {"byline": "author"}` on an op type of that entity) is carried over under its
/// new name, with its bookkeeping columns and its set table. What the new version adds starts
/// empty (NULL, no rows): a field that became `mergeOrAsk`, say, starts with no record of who
/// set its value. What it no longer has is left out. Only where no log is left to replay
/// (history before the snapshot is gone) is state carried over this way; everywhere else a
/// new schema version rebuilds the projection from the log.
struct SnapshotMigration {
    /// Table → the snapshot's name of a column → its name now.
    private let renamedColumns: [String: [String: String]]
    /// The snapshot's name of a set table → its name now.
    private let renamedTables: [String: String]
    private let tables: [String: [String]]

    init(schema: Schema, projection: ProjectionSchema) {
        var fields: [String: [String: String]] = [:]   // entity → old field → new field
        for upcaster in schema.upcasters where !upcaster.rename.isEmpty {
            guard let spec = schema.ops.first(where: { $0.type == upcaster.toType }) else { continue }
            for (old, new) in upcaster.rename where old != new { fields[spec.entity, default: [:]][old] = new }
        }
        var columns: [String: [String: String]] = [:]
        var renamedTables: [String: String] = [:]
        for entity in schema.entities {
            guard let renames = fields[entity.name] else { continue }
            for (old, new) in renames {
                guard let field = entity.field(new) else { continue }
                if field.isSet {
                    renamedTables["\(entity.name)_\(old)"] = entity.setTable(field)
                } else {
                    columns[entity.table, default: [:]][old] = new
                    for suffix in ["__device", "__time", "__seq"] { columns[entity.table, default: [:]][old + suffix] = new + suffix }
                }
            }
        }
        renamedColumns = columns
        self.renamedTables = renamedTables
        tables = Dictionary(projection.tables.map { ($0.name, $0.columns) }, uniquingKeysWith: { first, _ in first })
    }

    /// The table a snapshot's table fills now, and for each column it keeps, its place in the
    /// snapshot's rows and its name now; nil if no table of the projection takes it.
    func target(of name: String, columns: [String]) -> (table: String, columns: [(source: Int, column: String)])? {
        let table = tables[name] != nil ? name : renamedTables[name]
        guard let table, let current = tables[table] else { return nil }
        let wanted = Set(current)
        let renames = renamedColumns[table] ?? [:]
        var mapped: [(source: Int, column: String)] = []
        var taken = Set<String>()
        for (index, column) in columns.enumerated() {
            let now = renames[column] ?? column
            if wanted.contains(now), taken.insert(now).inserted { mapped.append((index, now)) }
        }
        return (table, mapped)
    }
}
