import CSQLite
import ChronicleCore
import ChronicleStore
import Foundation

/// The baseline's FTS5 upkeep: the same SQL the engine's `SearchIndexer`
/// (Sources/ChronicleStore/Search/SearchIndexer.swift, internal) runs, through
/// raw prepared statements. Each index is built from its content view
/// (`ProjectionSchema.contentView`: live rows, rows of live owners, premium
/// text on premium only). Around each op that can change what a view shows it
/// reads the touched view rows (by entity id, by set member, or by owner id)
/// before and after; at the end of the transaction it deletes the old entry
/// and inserts the new one per touched rowid, in ascending rowid order.
/// Premium-only indexes are updated at once, rowid by rowid in ascending order.
/// An index over documents has a phrase index beside it (`SearchPairs.phraseIndexTable`):
/// each entry at or below its watermark (read from `chronicle_meta` once per index per flush, when an entry changes)
/// is written there too, as the pairs `chronicle_pairs` makes of the same values.
///
/// Keep in step with `SearchIndexer` when the engine changes how it indexes:
/// the ratio is only meaningful while both sides do the same SQL work.
final class RawSearchIndexer {
    struct Target {
        let number: Int
        let index: SearchIndexSpec
        let gated: Bool
        let fieldCount: Int32
        let byID: OpaquePointer
        /// Set indexes only (no other view has a `value` column).
        let byMember: OpaquePointer?
        let byOwner: OpaquePointer
        let byRowid: OpaquePointer
        let delete: OpaquePointer
        let insert: OpaquePointer
        /// The phrase index's delete, insert and watermark statements, if the index has one.
        let phrase: (delete: OpaquePointer, insert: OpaquePointer, watermark: OpaquePointer)?
    }

    /// Which view rows an op can change (as `SearchIndexer.Scope`).
    enum Scope {
        /// Rows with the op's entity id (its own row, or all its set elements).
        case entity
        /// The one set element the op adds or removes.
        case member
        /// Rows of other entity types owned by the op's entity (an article's highlights).
        case owned
    }

    private let db: RawDatabase
    private let targets: [Target]
    private let byOpType: [String: [(Target, Scope)]]
    private var entries: [Int: [Int64: [Value]?]] = [:]

    /// Prepares every statement; the projection tables, content views and FTS tables must exist.
    init(db: RawDatabase, projection: ProjectionSchema) throws {
        self.db = db
        let schema = projection.schema
        let q = ProjectionSchema.quoted
        var targets: [Target] = []
        var owned: [String: [Target]] = [:]
        var own: [String: [Target]] = [:]
        for (entity, index) in projection.searchIndexes {
            let view = q(projection.contentView(of: index, in: entity).name)
            let columns = index.fields.map(q).joined(separator: ", ")
            let fts = q(index.index)
            let slots = (0..<index.fields.count).map { "?\($0 + 2)" }.joined(separator: ", ")
            let isSet = index.setField != nil
            let target = Target(
                number: targets.count, index: index, gated: index.requiresPremium, fieldCount: Int32(index.fields.count),
                byID: try db.prepare("SELECT rid, \(columns) FROM \(view) WHERE id = ?1"),
                byMember: isSet ? try db.prepare("SELECT rid, \(columns) FROM \(view) WHERE id = ?1 AND value = ?2") : nil,
                byOwner: try db.prepare("SELECT rid, \(columns) FROM \(view) WHERE owner_id = ?1"),
                byRowid: try db.prepare("SELECT \(columns) FROM \(view) WHERE rid = ?1"),
                delete: try db.prepare("INSERT INTO \(fts)(\(fts), rowid, \(columns)) VALUES ('delete', ?1, \(slots))"),
                insert: try db.prepare("INSERT INTO \(fts)(rowid, \(columns)) VALUES (?1, \(slots))"),
                phrase: try SearchPairs.phraseIndexTable(of: index).map { table in
                    let pairs = q(table)
                    let values = (0..<index.fields.count).map { "\(SearchPairs.functionName)(?\($0 + 2))" }.joined(separator: ", ")
                    return (delete: try db.prepare("INSERT INTO \(pairs)(\(pairs), rowid, \(columns)) VALUES ('delete', ?1, \(values))"),
                            insert: try db.prepare("INSERT INTO \(pairs)(rowid, \(columns)) VALUES (?1, \(values))"),
                            watermark: try db.prepare("SELECT value FROM chronicle_meta WHERE key = '\(SearchPairs.phraseIndexWatermarkKey(of: index))'"))
                })
            targets.append(target)
            own[entity.name, default: []].append(target)
            if let owner = projection.ownerEntity(of: index, in: entity) { owned[owner.name, default: []].append(target) }
        }
        var entityWide: [String: [(Target, Scope)]] = [:]
        for entity in schema.entities {
            let list = (own[entity.name] ?? []).map { ($0, Scope.entity) } + (owned[entity.name] ?? []).map { ($0, Scope.owned) }
            if !list.isEmpty { entityWide[entity.name] = list }
        }
        var byOpType: [String: [(Target, Scope)]] = [:]
        for spec in schema.ops {
            let mine = own[spec.entity] ?? []
            let touched: [(Target, Scope)]
            switch spec.action {
            case .create, .upsert, .delete, .restore:
                touched = entityWide[spec.entity] ?? []
            case .set:
                let written = Set(spec.fields)
                touched = mine.filter { $0.index.setField == nil && !written.isDisjoint(with: $0.index.fields) }.map { ($0, .entity) }
            case .add, .remove:
                touched = mine.filter { $0.index.setField == spec.field }.map { ($0, .member) }
            case .increment:
                touched = []
            }
            if !touched.isEmpty { byOpType["\(spec.type)@\(spec.version)"] = touched }
        }
        self.targets = targets
        self.byOpType = byOpType
    }

    /// What to keep an eye on for one op, worked out ahead of the timed region.
    struct Watch {
        let targets: [(Target, Scope)]
        let id: Value
        let member: Value
    }

    /// Ops of earlier versions are read in the current shape first, as the engine's indexer
    /// and materializer do (without this, an `article.save@1` changed rows unseen by the index).
    func watch(_ written: Op, schema: Schema) -> Watch? {
        let op = schema.opNumber(written.type, version: written.version) != nil ? written : ((try? schema.upcast(written)) ?? written)
        guard let touched = byOpType["\(op.type)@\(op.version)"] else { return nil }
        let spec = schema.opType(op.type, version: op.version)
        return Watch(targets: touched, id: .text(op.entityID.lowercased), member: spec?.valueKey.flatMap { op.payload[$0] } ?? .null)
    }

    private typealias Rows = [(rowid: Int64, values: [Value])]

    /// Runs `steps`, noting the index entries they change.
    func apply(_ steps: [PreparedStep], watching watch: Watch?) throws {
        guard let watch else { return try db.execute(steps) }
        let before = try watch.targets.map { try capture($0.0, $0.1, watch) }
        try db.execute(steps)
        for (offset, (target, scope)) in watch.targets.enumerated() {
            let after = try capture(target, scope, watch)
            if !target.gated {
                for row in before[offset] { touch(target, row.rowid, row.values) }
                for row in after { touch(target, row.rowid, nil) }
                continue
            }
            let old = Dictionary(before[offset].map { ($0.rowid, $0.values) }, uniquingKeysWith: { a, _ in a })
            let new = Dictionary(after.map { ($0.rowid, $0.values) }, uniquingKeysWith: { a, _ in a })
            let changed = Set(old.keys).union(new.keys).sorted().filter { old[$0] != new[$0] }
            let through = changed.isEmpty ? 0 : try watermark(target)
            for rowid in changed {
                try update(target, rowid, from: old[rowid], to: new[rowid], phrases: rowid <= through)
            }
        }
    }

    /// Brings every touched index entry up to date, in ascending rowid order.
    func flush() throws {
        for (number, rows) in entries.sorted(by: { $0.key < $1.key }) {
            let target = targets[number]
            var through: Int64?   // read at the first entry that changes, as the engine does
            for rowid in rows.keys.sorted() {
                let old = rows[rowid]!
                try db.bind(target.byRowid, [.integer(rowid)])
                let new: [Value]? = sqlite3_step(target.byRowid) == SQLITE_ROW
                    ? (0..<target.fieldCount).map { RawDatabase.value(target.byRowid, $0) } : nil
                sqlite3_reset(target.byRowid)
                guard old != new else { continue }
                if through == nil { through = try watermark(target) }
                try update(target, rowid, from: old, to: new, phrases: rowid <= through!)
            }
        }
        entries.removeAll(keepingCapacity: true)
    }

    /// The phrase index's watermark (0 without one).
    private func watermark(_ target: Target) throws -> Int64 {
        guard let phrase = target.phrase else { return 0 }
        return try db.scalarInt(phrase.watermark) ?? 0
    }

    /// One entry from `old` to `new`, in the phrase index too if `phrases`.
    private func update(_ target: Target, _ rowid: Int64, from old: [Value]?, to new: [Value]?, phrases: Bool) throws {
        let phrase = phrases ? target.phrase : nil
        if let old {
            try db.run(target.delete, [.integer(rowid)] + old)
            if let phrase { try db.run(phrase.delete, [.integer(rowid)] + old) }
        }
        if let new {
            try db.run(target.insert, [.integer(rowid)] + new)
            if let phrase { try db.run(phrase.insert, [.integer(rowid)] + new) }
        }
    }

    private func touch(_ target: Target, _ rowid: Int64, _ values: [Value]?) {
        if entries[target.number]?.keys.contains(rowid) == true { return }
        entries[target.number, default: [:]][rowid] = .some(values)
    }

    private func capture(_ target: Target, _ scope: Scope, _ watch: Watch) throws -> Rows {
        let (statement, arguments): (OpaquePointer, [Value]) = switch scope {
        case .entity: (target.byID, [watch.id])
        case .member: (target.byMember!, [watch.id, watch.member])
        case .owned: (target.byOwner, [watch.id])
        }
        try db.bind(statement, arguments)
        defer { sqlite3_reset(statement) }
        var rows: Rows = []
        while true {
            let rc = sqlite3_step(statement)
            if rc == SQLITE_DONE { break }
            guard rc == SQLITE_ROW else { throw BenchError("capture failed (\(rc)): \(db.errorMessage)") }
            rows.append((sqlite3_column_int64(statement, 0), (1...target.fieldCount).map { RawDatabase.value(statement, $0) }))
        }
        return rows
    }
}

extension RawDatabase {
    /// A column of the current row as a `Value`.
    static func value(_ statement: OpaquePointer, _ column: Int32) -> Value {
        switch sqlite3_column_type(statement, column) {
        case SQLITE_NULL: return .null
        case SQLITE_INTEGER: return .integer(sqlite3_column_int64(statement, column))
        case SQLITE_FLOAT: return .real(sqlite3_column_double(statement, column))
        default:
            guard let text = sqlite3_column_text(statement, column) else { return .text("") }
            let count = Int(sqlite3_column_bytes(statement, column))
            return .text(String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self))
        }
    }

    func scalarInt(_ statement: OpaquePointer, _ arguments: [Value] = []) throws -> Int64? {
        try bind(statement, arguments)
        defer { sqlite3_reset(statement) }
        let rc = sqlite3_step(statement)
        if rc == SQLITE_ROW { return sqlite3_column_type(statement, 0) == SQLITE_NULL ? nil : sqlite3_column_int64(statement, 0) }
        guard rc == SQLITE_DONE else { throw BenchError("SQLite error \(rc): \(errorMessage)") }
        return nil
    }
}
