import CSQLite
import ChronicleCore
import Foundation

/// The baseline's FTS5 upkeep: the same SQL the engine's `SearchIndexer`
/// (Sources/ChronicleStore/Search/SearchIndexer.swift, internal) runs, through
/// raw prepared statements. Around each op that can change indexed text it
/// reads the touched rows' indexed values before and after; at the end of the
/// transaction it deletes the old entry and inserts the new one per touched
/// rowid, in ascending rowid order. Premium-gated indexes are updated at once.
///
/// Keep in step with `SearchIndexer` when the engine changes how it indexes:
/// the ratio is only meaningful while both sides do the same SQL work.
final class RawSearchIndexer {
    struct Target {
        let number: Int
        let isSet: Bool
        let gated: Bool
        let fieldCount: Int32
        let capture: OpaquePointer
        let byRowid: OpaquePointer
        let delete: OpaquePointer
        let insert: OpaquePointer
    }

    private let db: RawDatabase
    private let targets: [Target]
    private let byOpType: [String: [Target]]
    private let premium: OpaquePointer
    private var entries: [Int: [Int64: [Value]?]] = [:]

    /// Prepares every statement; the projection and FTS tables must exist.
    init(db: RawDatabase, projection: ProjectionSchema) throws {
        self.db = db
        let schema = projection.schema
        let q = ProjectionSchema.quoted
        var targets: [Target] = []
        var byEntity: [String: [(Target, SearchIndexSpec)]] = [:]
        for (entity, index) in projection.searchIndexes {
            let content = q(projection.contentTable(of: index, in: entity))
            let columns = index.fields.map(q).joined(separator: ", ")
            let fts = q(index.index)
            let slots = (0..<index.fields.count).map { "?\($0 + 2)" }.joined(separator: ", ")
            let isSet = index.setField != nil
            let target = Target(
                number: targets.count, isSet: isSet, gated: index.requiresPremium, fieldCount: Int32(index.fields.count),
                capture: try db.prepare("SELECT rowid, \(columns) FROM \(content) WHERE id = ?1" + (isSet ? " AND value = ?2" : "")),
                byRowid: try db.prepare("SELECT \(columns) FROM \(content) WHERE rowid = ?1"),
                delete: try db.prepare("INSERT INTO \(fts)(\(fts), rowid, \(columns)) VALUES ('delete', ?1, \(slots))"),
                insert: try db.prepare("INSERT INTO \(fts)(rowid, \(columns)) VALUES (?1, \(slots))"))
            targets.append(target)
            byEntity[entity.name, default: []].append((target, index))
        }
        var byOpType: [String: [Target]] = [:]
        for spec in schema.ops {
            guard let candidates = byEntity[spec.entity] else { continue }
            let touched: [(Target, SearchIndexSpec)]
            switch spec.action {
            case .create, .upsert:
                touched = candidates.filter { !$0.0.isSet }
            case .set:
                let written = Set(spec.fields)
                touched = candidates.filter { !$0.0.isSet && !written.isDisjoint(with: $0.1.fields) }
            case .add, .remove:
                touched = candidates.filter { $0.1.setField == spec.field }
            case .increment, .delete, .restore:
                touched = []
            }
            if !touched.isEmpty { byOpType["\(spec.type)@\(spec.version)"] = touched.map(\.0) }
        }
        self.targets = targets
        self.byOpType = byOpType
        self.premium = try db.prepare("SELECT \(projection.premiumCondition)")
    }

    /// What to keep an eye on for one op, worked out ahead of the timed region.
    struct Watch {
        let targets: [Target]
        let id: Value
        let member: Value
    }

    func watch(_ op: Op, schema: Schema) -> Watch? {
        guard let touched = byOpType["\(op.type)@\(op.version)"] else { return nil }
        let spec = schema.opType(op.type, version: op.version)
        return Watch(targets: touched, id: .text(op.entityID.lowercased), member: spec?.valueKey.flatMap { op.payload[$0] } ?? .null)
    }

    /// Runs `steps`, noting the index entries they change.
    func apply(_ steps: [PreparedStep], watching watch: Watch?) throws {
        guard let watch else { return try db.execute(steps) }
        let before = try watch.targets.map { try capture($0, watch) }
        for (target, old) in zip(watch.targets, before) where !target.gated {
            if let old { touch(target, old.rowid, old.values) }
        }
        try db.execute(steps)
        var isPremium: Bool?
        for (offset, target) in watch.targets.enumerated() {
            let after = try capture(target, watch)
            if !target.gated {
                if let after { touch(target, after.rowid, nil) }
                continue
            }
            guard after?.rowid != before[offset]?.rowid || after?.values != before[offset]?.values else { continue }
            if isPremium == nil { isPremium = try db.scalarInt(premium) == 1 }
            guard isPremium == true else { continue }
            if let old = before[offset] { try db.run(target.delete, [.integer(old.rowid)] + old.values) }
            if let new = after { try db.run(target.insert, [.integer(new.rowid)] + new.values) }
        }
    }

    /// Brings every touched index entry up to date, in ascending rowid order.
    func flush() throws {
        for (number, rows) in entries.sorted(by: { $0.key < $1.key }) {
            let target = targets[number]
            for rowid in rows.keys.sorted() {
                let old = rows[rowid]!
                try db.bind(target.byRowid, [.integer(rowid)])
                let new: [Value]? = sqlite3_step(target.byRowid) == SQLITE_ROW
                    ? (0..<target.fieldCount).map { RawDatabase.value(target.byRowid, $0) } : nil
                sqlite3_reset(target.byRowid)
                guard old != new else { continue }
                if let old { try db.run(target.delete, [.integer(rowid)] + old) }
                if let new { try db.run(target.insert, [.integer(rowid)] + new) }
            }
        }
        entries.removeAll(keepingCapacity: true)
    }

    private func touch(_ target: Target, _ rowid: Int64, _ values: [Value]?) {
        if entries[target.number]?.keys.contains(rowid) == true { return }
        entries[target.number, default: [:]][rowid] = .some(values)
    }

    private func capture(_ target: Target, _ watch: Watch) throws -> (rowid: Int64, values: [Value])? {
        try db.bind(target.capture, target.isSet ? [watch.id, watch.member] : [watch.id])
        defer { sqlite3_reset(target.capture) }
        let rc = sqlite3_step(target.capture)
        guard rc == SQLITE_ROW else {
            guard rc == SQLITE_DONE else { throw BenchError("capture failed (\(rc)): \(db.errorMessage)") }
            return nil
        }
        return (sqlite3_column_int64(target.capture, 0), (1...target.fieldCount).map { RawDatabase.value(target.capture, $0) })
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
