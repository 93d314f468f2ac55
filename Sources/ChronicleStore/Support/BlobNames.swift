import ChronicleCore

/// Which files (`BlobRef`) a projection still names: the addresses held by its rows, by their
/// confirmed copies kept for rebase (`chronicle_shadow_*`), by set fields and by conflict
/// records not yet settled. A device store and a server library read it the same way before they delete files
/// nobody names (`DeviceStore.dropUnnamedBlobs`, `SyncService.collectUnnamedBlobs`).
///
/// It is deliberately generous, because a false name only keeps a file: any text value that
/// reads as an address counts, in any text or URL field that can hold one, except fields that
/// hold whole documents (an article's text naming an address is not a reference to it).
public enum BlobNames {
    /// One query of `queries`: the distinct values of one column that may be an address.
    public struct Query: Sendable {
        public var table: String
        public var sql: String
        public var arguments: [Value]
    }

    /// The hex digests named in `db`'s projection. A row soft-deleted before `deletedBefore`
    /// (its `deleted_at`: the server's time of the delete, ms since 1970) no longer names its
    /// files; nil keeps every row's. With `pendingName` (a device), a row with queued ops
    /// (`chronicle_shadowed`) names its files whatever its `deleted_at`: a queued delete has
    /// only its author's clock to say when it happened.
    package static func named(in db: Database, projection: ProjectionSchema, deletedBefore: Int64?, pendingName: Bool = false) throws -> Set<String> {
        var named: Set<String> = []
        for query in queries(projection, deletedBefore: deletedBefore, pendingName: pendingName) where try exists(query.table, in: db) {
            try db.statement(query.sql).forEach(query.arguments) { row in
                if let ref = BlobRef(row.text(0)) { named.insert(ref.hex) }
            }
        }
        return named
    }

    /// The statements `named` runs (the benchmark runs them on a raw connection as its baseline):
    /// for each column that can name a file, in the entity tables, their shadow copies, the set
    /// tables and the conflict records, its distinct text values of an address's length.
    public static func queries(_ projection: ProjectionSchema, deletedBefore: Int64?, pendingName: Bool = false) -> [Query] {
        var queries: [Query] = []
        func scan(_ table: String, _ column: String, deleted: Bool, pendingOf entity: String? = nil, unresolvedOnly: Bool = false) {
            let c = ProjectionSchema.quoted(column)
            var sql = "SELECT DISTINCT \(c) FROM \(ProjectionSchema.quoted(table)) WHERE typeof(\(c)) = 'text' AND length(\(c)) IN (64, 71)"
            var arguments: [Value] = []
            if unresolvedOnly { sql += " AND resolved_seq IS NULL" }
            if deleted, let deletedBefore {
                sql += " AND (deleted_at IS NULL OR deleted_at >= ?1"
                arguments.append(.integer(deletedBefore))
                if let entity {
                    sql += " OR id IN (SELECT id FROM chronicle_shadowed WHERE entity = ?2)"
                    arguments.append(.text(entity))
                }
                sql += ")"
            }
            queries.append(Query(table: table, sql: sql, arguments: arguments))
        }
        for entity in projection.schema.entities {
            for field in entity.fields where canName(field) {
                if field.isSet {
                    let table = entity.setTable(field)
                    scan(table, "value", deleted: false)
                    scan("chronicle_shadow_" + table, "value", deleted: false)
                } else {
                    scan(entity.table, field.name, deleted: entity.hasSoftDelete, pendingOf: pendingName ? entity.name : nil)
                    scan("chronicle_shadow_" + entity.table, field.name, deleted: entity.hasSoftDelete)
                }
            }
        }
        if projection.hasConflicts {
            // Only while the person may still pick the value back: a settled record is history.
            scan(ProjectionSchema.conflictsTable, "kept", deleted: false, unresolvedOnly: true)
            scan(ProjectionSchema.conflictsTable, "replaced", deleted: false, unresolvedOnly: true)
        }
        return queries
    }

    /// Whether values of `field` can be an address: text or URLs long enough for one, not one of
    /// a list of values, and not whole documents.
    static func canName(_ field: FieldSpec) -> Bool {
        guard field.type == .text || field.type == .url, field.enumValues == nil else { return false }
        if let maxLength = field.maxLength, maxLength < 64 || maxLength > SearchIndexSpec.documentLengthMin { return false }
        return true
    }

    private static func exists(_ table: String, in db: Database) throws -> Bool {
        try db.scalarInt("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1", [.text(table)]) == 1
    }
}
