/// The SQL shape of a schema's projection: tables, FTS5 indexes and the
/// triggers that keep them in step, plus the shadow tables rebase uses.
///
/// Everything here is derived from the `Schema`; nothing is written by hand
/// per entity type, which is what makes the engine generic.
public struct ProjectionSchema: Sendable {
    public let schema: Schema
    /// `shadowSave`, `shadowRestore` and `shadowDrop` per entity type, built once: rebase runs
    /// them for every row it restores, and building the SQL each time was half of that work.
    private let shadowStatements: [String: (save: [String], restore: [String], drop: [String])]

    public init(schema: Schema) {
        self.schema = schema
        var statements: [String: (save: [String], restore: [String], drop: [String])] = [:]
        for entity in schema.entities {
            statements[entity.name] = (Self.shadowSaveStatements(entity), Self.shadowRestoreStatements(entity), Self.shadowDropStatements(entity))
        }
        shadowStatements = statements
    }

    public static func quoted(_ identifier: String) -> String { "\"\(identifier)\"" }

    static func sqlType(_ type: FieldType) -> String {
        switch type {
        case .text, .url, .id: "TEXT"
        case .integer, .timestamp, .boolean: "INTEGER"
        case .real: "REAL"
        }
    }

    /// The columns of an entity's table, in canonical order.
    public func columns(of entity: EntitySpec) -> [String] {
        var columns = ["id", "created_at"]
        for field in entity.scalarFields {
            columns.append(field.name)
            columns += field.ruleColumns
        }
        return columns
    }

    private func tableDefinition(_ name: String, of entity: EntitySpec, primaryKey: Bool) -> String {
        var lines = [primaryKey ? "id TEXT PRIMARY KEY NOT NULL" : "id TEXT NOT NULL", "created_at INTEGER NOT NULL"]
        for field in entity.scalarFields {
            lines.append("\(Self.quoted(field.name)) \(Self.sqlType(field.type))")
            for column in field.ruleColumns {
                lines.append("\(Self.quoted(column)) \(column == field.deviceColumn ? "TEXT" : "INTEGER")")
            }
        }
        return "CREATE TABLE \(Self.quoted(name)) (\n  " + lines.joined(separator: ",\n  ") + "\n)"
    }

    /// Condition under which premium-only indexes hold rows.
    public var premiumCondition: String {
        guard let plan = schema.plan else { return "0" }
        return "EXISTS (SELECT 1 FROM \(Self.quoted(plan.entity)) WHERE \(Self.quoted(plan.field)) = '\(plan.premium)')"
    }

    /// Every projection table (entity tables then set tables, then conflict records), for digests and rebuilds.
    public var tables: [(name: String, columns: [String], orderBy: String)] {
        var result: [(String, [String], String)] = []
        for entity in schema.entities {
            result.append((entity.table, columns(of: entity), "id"))
            for field in entity.setFields { result.append((entity.setTable(field), ["id", "value"], "id, value")) }
        }
        if hasConflicts { result.append((Self.conflictsTable, Self.conflictColumns, "op_id, field")) }
        return result
    }

    /// Whether any field uses `mergeOrAsk`, and so needs the conflicts table.
    public var hasConflicts: Bool { schema.entities.contains { $0.fields.contains { $0.rule == .mergeOrAsk } } }

    /// Conflict records of `mergeOrAsk` fields: derived from the log like every projection table.
    /// A row is made when a confirmed op set a field concurrently (its `baseSeq` older than the seq
    /// that set the current value, by another device); a later sequential set resolves it.
    public static let conflictsTable = "chronicle_conflicts"
    public static let unreadableTable = "chronicle_unreadable"
    /// Idempotent: stores made before the table existed get it when they open.
    public static let unreadableStatement = "CREATE TABLE IF NOT EXISTS \(quoted(unreadableTable)) (server_seq INTEGER PRIMARY KEY, op_id TEXT NOT NULL, type TEXT NOT NULL, code TEXT NOT NULL, message TEXT NOT NULL)"
    public static let conflictColumns = ["op_id", "field", "entity", "entity_id", "kept", "replaced", "replaced_seq",
                                         "replaced_device", "winning_seq", "winning_device", "resolved_seq"]

    /// DDL for the projection tables and their indexes (no FTS).
    public var tableStatements: [String] {
        var statements: [String] = []
        for entity in schema.entities {
            statements.append(tableDefinition(entity.table, of: entity, primaryKey: true))
            statements.append(tableDefinition("chronicle_shadow_\(entity.table)", of: entity, primaryKey: true))
            let indexes = Self.readIndexes(of: entity)
            statements += indexes.filter { $0.table == entity.table }.map(\.createSQL)
            for field in entity.setFields {
                let table = entity.setTable(field)
                statements.append("CREATE TABLE \(Self.quoted(table)) (id TEXT NOT NULL, value \(Self.sqlType(field.type)) NOT NULL, PRIMARY KEY (id, value))")
                statements.append("CREATE TABLE \(Self.quoted("chronicle_shadow_\(table)")) (id TEXT NOT NULL, value \(Self.sqlType(field.type)) NOT NULL, PRIMARY KEY (id, value))")
                statements += indexes.filter { $0.table == table }.map(\.createSQL)
            }
        }
        // Confirmed ops this build cannot read (a newer version, an unknown type): kept in the log,
        // listed here with why, applied by a rebuild once Chronicle is updated. Not part of the digest.
        statements.append(Self.unreadableStatement)
        if hasConflicts {
            statements.append("""
                CREATE TABLE \(Self.quoted(Self.conflictsTable)) (
                  op_id TEXT NOT NULL, field TEXT NOT NULL, entity TEXT NOT NULL, entity_id TEXT NOT NULL,
                  kept, replaced, replaced_seq INTEGER, replaced_device TEXT,
                  winning_seq INTEGER NOT NULL, winning_device TEXT NOT NULL, resolved_seq INTEGER,
                  PRIMARY KEY (op_id, field)
                )
                """)
            statements.append("CREATE INDEX \(Self.quoted(Self.conflictsTable + "_by_entity")) ON \(Self.quoted(Self.conflictsTable))(entity_id, field)")
        }
        return statements
    }

    /// An index over a projection table that serves the app's reads and no statement of the
    /// materializer: a row's highlights or notes (`<table>_by_<id field>`), the rows with a tag
    /// (`<set table>_by_value`). Every op that adds such a row updates one, at a place of its
    /// own (another article, another tag), so a bulk apply sets them aside and builds them at
    /// its close (`DeviceStore.beginBulk`). The index that merge-or-ask's statements read
    /// (`chronicle_conflicts_by_entity`) is not one of them.
    public struct ReadIndex: Sendable, Hashable {
        public let name: String
        public let table: String
        /// The indexed column as the DDL names it.
        let column: String

        /// The statement in the store's schema (`tableStatements`).
        public var createSQL: String { create("CREATE INDEX") }
        /// The same, doing nothing where the index exists.
        public var createIfMissingSQL: String { create("CREATE INDEX IF NOT EXISTS") }
        public var dropSQL: String { "DROP INDEX IF EXISTS \(ProjectionSchema.quoted(name))" }

        private func create(_ verb: String) -> String {
            "\(verb) \(ProjectionSchema.quoted(name)) ON \(ProjectionSchema.quoted(table))(\(column))"
        }
    }

    /// Every `ReadIndex` of the projection, in the order `tableStatements` creates them.
    public var readIndexes: [ReadIndex] { schema.entities.flatMap(Self.readIndexes(of:)) }

    static func readIndexes(of entity: EntitySpec) -> [ReadIndex] {
        entity.scalarFields.filter { $0.type == .id }.map { field in
            ReadIndex(name: "\(entity.table)_by_\(field.name)", table: entity.table, column: quoted(field.name))
        } + entity.setFields.map { field in
            let table = entity.setTable(field)
            return ReadIndex(name: "\(table)_by_value", table: table, column: "value")
        }
    }

    /// The view an index is built from: the rows that may be found. Deleted rows,
    /// rows whose owner is deleted, and premium-only text on a free plan are not
    /// in it, so the index never holds them and a search needs no join to skip
    /// them. Columns: `rid` (the content row's rowid), `id` (the entity id),
    /// `owner_id` (the row hits count for), then the indexed columns.
    public func contentView(of index: SearchIndexSpec, in entity: EntitySpec) -> (name: String, sql: String) {
        let q = Self.quoted
        let name = Self.contentViewName(of: index)
        var columns: [String]
        var from: String
        var conditions: [String] = []
        if let setField = index.setField {
            from = "\(q(entity.setTable(entity.field(setField)!))) s JOIN \(q(entity.table)) t ON t.id = s.id"
            columns = ["s.rowid AS rid", "s.id AS id", "s.id AS owner_id", "s.value AS value"]
        } else {
            from = "\(q(entity.table)) t"
            columns = ["t.rowid AS rid", "t.id AS id"]
            columns.append(index.owner.map { "t.\(q($0)) AS owner_id" } ?? "t.id AS owner_id")
            columns += index.fields.map { "t.\(q($0)) AS \(q($0))" }
        }
        if entity.hasSoftDelete { conditions.append("t.deleted_at IS NULL") }
        if let owner = ownerEntity(of: index, in: entity) {
            from += " JOIN \(q(owner.table)) o ON o.id = t.\(q(index.owner!))"
            if owner.hasSoftDelete { conditions.append("o.deleted_at IS NULL") }
        }
        if index.requiresPremium { conditions.append(premiumCondition) }
        let filter = conditions.isEmpty ? "" : " WHERE " + conditions.joined(separator: " AND ")
        return (name, "CREATE VIEW \(q(name)) AS SELECT \(columns.joined(separator: ", ")) FROM \(from)\(filter)")
    }

    /// The entity type a hit in this index counts for when it is not the row's own.
    public func ownerEntity(of index: SearchIndexSpec, in entity: EntitySpec) -> EntitySpec? {
        index.owner.flatMap { entity.field($0)?.references }.flatMap(schema.entity)
    }

    /// DDL for the FTS5 indexes and their content views. Rows are indexed by
    /// explicit single-row statements (see `SearchIndexer`), not by triggers: a
    /// trigger that writes an FTS5 table makes every statement open a
    /// savepoint, and FTS5 flushes its pending terms at each one, which made
    /// bulk apply three times slower. Only the plan gate, which changes
    /// rarely, is a trigger.
    public var searchStatements: [String] {
        var statements: [String] = []
        for entity in schema.entities {
            for index in entity.search {
                let view = contentView(of: index, in: entity)
                let columns = Self.searchColumns(index)
                let fts = Self.quoted(index.index)
                statements.append(view.sql)
                statements.append(searchTableStatement(index, in: entity))
                statements.append(Self.searchRankSQL(index))
                if index.requiresPremium {
                    let fill = "INSERT INTO \(fts)(rowid, \(columns)) SELECT rid, \(columns) FROM \(Self.quoted(view.name));"
                    let clear = "INSERT INTO \(fts)(\(fts)) VALUES ('delete-all');"
                    // The plan gates the whole index: fill it when premium starts, empty it when it ends.
                    for event in planGateEvents {
                        statements.append("CREATE TRIGGER \(Self.quoted(index.index + "_plan_" + event.suffix)) \(event.head) BEGIN \(clear)\(event.starts ? " " + fill : "") END")
                    }
                }
            }
        }
        return statements
    }

    /// The four moments the plan gates a premium-only index at: a trigger's name suffix, its
    /// head (`AFTER … ON … WHEN …`), and whether premium starts then (else it ends). Empty
    /// without a plan.
    public var planGateEvents: [(suffix: String, head: String, starts: Bool)] {
        guard let plan = schema.plan else { return [] }
        let planTable = Self.quoted(plan.entity), planField = Self.quoted(plan.field)
        return [
            ("on", "AFTER UPDATE OF \(planField) ON \(planTable) WHEN new.\(planField) = '\(plan.premium)' AND old.\(planField) IS NOT '\(plan.premium)'", true),
            ("new", "AFTER INSERT ON \(planTable) WHEN new.\(planField) = '\(plan.premium)' AND (SELECT count(*) FROM \(planTable) WHERE \(planField) = '\(plan.premium)') = 1", true),
            ("off", "AFTER UPDATE OF \(planField) ON \(planTable) WHEN old.\(planField) = '\(plan.premium)' AND new.\(planField) IS NOT '\(plan.premium)' AND NOT \(premiumCondition)", false),
            ("gone", "AFTER DELETE ON \(planTable) WHEN old.\(planField) = '\(plan.premium)' AND NOT \(premiumCondition)", false),
        ]
    }

    /// The view an FTS5 index reads its rows from.
    public static func contentViewName(of index: SearchIndexSpec) -> String { index.index + "_content" }

    /// An FTS5 index's columns, quoted and comma-separated.
    public static func searchColumns(_ index: SearchIndexSpec) -> String {
        index.fields.map(quoted).joined(separator: ", ")
    }

    /// The prefix lengths, in bytes, every FTS5 index keeps an index of its own for (FTS5's
    /// `prefix` option): `ab*` and `abc*` read one list; a longer prefix merges the lists of
    /// every word that begins with it. A length more costs an index's build about a third more.
    public static let prefixIndexLengths = [2, 3]

    /// The prefix lengths of an index over documents (`SearchIndexSpec.holdsDocuments`): 4 as
    /// well. In rows of thousands of words a four-letter prefix, which search as you type asks
    /// for all the time, would merge the position lists of every word that begins with it: in the
    /// search benchmark (20,000 articles of 2,000 words) the slowest prefix queries were all of
    /// four letters (5.8–6.5 ms), and with this index the prefix p99 went from 5.4–6.2 ms to
    /// 4.2–4.5 ms (on 12-03, outside the VM's slow hours). The index takes a fifth more bytes
    /// and builds a third longer; over the benchmark's 1,000,000-op library, where most rows are
    /// short, that is about 0.06 s of a 6 s rebuild.
    public static let documentPrefixIndexLengths = [2, 3, 4]

    /// The prefix lengths `index` keeps indexes for.
    public static func prefixIndexLengths(of index: SearchIndexSpec) -> [Int] {
        index.holdsDocuments ? documentPrefixIndexLengths : prefixIndexLengths
    }

    /// The tokenizer of every FTS5 index, and its arguments: FTS5's `unicode61`, which folds
    /// case and removes diacritics (`2`: also from letters that have more than one).
    public static let searchTokenizer = ["unicode61", "remove_diacritics", "2"]

    /// The FTS5 table of `index` with `content` as its content options: the projection's
    /// reads its content view; a contentless one (`content=''`) builds the same index elsewhere.
    public static func searchTableSQL(_ index: SearchIndexSpec, content: String, name: String? = nil) -> String {
        let columns = searchColumns(index)
        let prefixes = prefixIndexLengths(of: index).map(String.init).joined(separator: " ")
        return """
            CREATE VIRTUAL TABLE \(quoted(name ?? index.index)) USING fts5(\(columns), \(content), \
            tokenize='\(searchTokenizer.joined(separator: " "))', prefix='\(prefixes)')
            """
    }

    /// The statement that creates `index`'s FTS5 table over its content view, as a store has it.
    public func searchTableStatement(_ index: SearchIndexSpec, in entity: EntitySpec) -> String {
        let view = contentView(of: index, in: entity)
        return Self.searchTableSQL(index, content: "content=\(Self.quoted(view.name)), content_rowid='rid'")
    }

    /// Sets the index's `rank`: `ORDER BY rank` then ranks by bm25 with the schema's column weights.
    public static func searchRankSQL(_ index: SearchIndexSpec) -> String {
        let fts = quoted(index.index)
        let weights = index.weights.map { CanonicalJSON.format($0) }.joined(separator: ", ")
        return "INSERT INTO \(fts)(\(fts), rank) VALUES ('rank', 'bm25(\(weights))')"
    }

    /// Names of every FTS5 table, with whether it is premium-gated.
    public var searchIndexes: [(entity: EntitySpec, index: SearchIndexSpec)] {
        schema.entities.flatMap { entity in entity.search.map { (entity, $0) } }
    }

    /// Every object the projection owns, for dropping it before a rebuild.
    public var droppableObjects: [(kind: String, name: String)] {
        var objects: [(String, String)] = []
        for (_, index) in searchIndexes {
            objects.append(("TABLE", index.index))
            objects.append(("VIEW", Self.contentViewName(of: index)))
        }
        if hasConflicts { objects.append(("TABLE", Self.conflictsTable)) }
        objects.append(("TABLE", Self.unreadableTable))
        for entity in schema.entities {
            objects.append(("TABLE", entity.table))
            objects.append(("TABLE", "chronicle_shadow_\(entity.table)"))
            for field in entity.setFields {
                objects.append(("TABLE", entity.setTable(field)))
                objects.append(("TABLE", "chronicle_shadow_\(entity.setTable(field))"))
            }
        }
        return objects
    }

    // MARK: - Shadows (rebase)

    /// Statements that copy an entity's confirmed rows aside before the first
    /// pending op touches it; `?1` is the entity id. Run only when the entity
    /// is not already shadowed.
    public func shadowSave(_ entity: EntitySpec) -> [String] {
        shadowStatements[entity.name]?.save ?? Self.shadowSaveStatements(entity)
    }

    static func shadowSaveStatements(_ entity: EntitySpec) -> [String] {
        var statements = ["INSERT INTO \(Self.quoted("chronicle_shadow_\(entity.table)")) SELECT * FROM \(Self.quoted(entity.table)) WHERE id = ?1"]
        for field in entity.setFields {
            let table = entity.setTable(field)
            statements.append("INSERT INTO \(Self.quoted("chronicle_shadow_\(table)")) SELECT * FROM \(Self.quoted(table)) WHERE id = ?1")
        }
        return statements
    }

    /// Statements that put an entity's confirmed rows back and clear its shadow; `?1` is the entity id.
    public func shadowRestore(_ entity: EntitySpec) -> [String] {
        shadowStatements[entity.name]?.restore ?? Self.shadowRestoreStatements(entity)
    }

    /// Statements that forget an entity's shadow (its live rows are its confirmed state again); `?1` is the entity id.
    public func shadowDrop(_ entity: EntitySpec) -> [String] {
        shadowStatements[entity.name]?.drop ?? Self.shadowDropStatements(entity)
    }

    static func shadowDropStatements(_ entity: EntitySpec) -> [String] {
        ([entity.table] + entity.setFields.map(entity.setTable))
            .map { "DELETE FROM \(Self.quoted("chronicle_shadow_\($0)")) WHERE id = ?1" }
    }

    static func shadowRestoreStatements(_ entity: EntitySpec) -> [String] {
        var statements: [String] = []
        var pairs = [(entity.table, "chronicle_shadow_\(entity.table)")]
        for field in entity.setFields { pairs.append((entity.setTable(field), "chronicle_shadow_\(entity.setTable(field))")) }
        for (live, shadow) in pairs {
            statements.append("DELETE FROM \(Self.quoted(live)) WHERE id = ?1")
            statements.append("INSERT INTO \(Self.quoted(live)) SELECT * FROM \(Self.quoted(shadow)) WHERE id = ?1")
            statements.append("DELETE FROM \(Self.quoted(shadow)) WHERE id = ?1")
        }
        return statements
    }
}
