import ChronicleCore

/// Keeps the FTS5 indexes in step with the projection rows they index.
///
/// Around each op that can change indexed text it notes which indexed rows
/// the op touches and what the index holds for them; when the transaction's
/// batch ends, `flush` brings each touched row's index entry up to date in
/// ascending rowid order, with single-row `VALUES` statements:
///
/// - External-content FTS5 needs the exact old values to delete an entry, so
///   they are read before the first change.
/// - FTS5 keeps new terms in memory until commit only while rowids ascend and
///   no statement savepoint intervenes; a trigger, an `INSERT … SELECT` or an
///   out-of-order rowid makes it flush to disk every time, which made bulk
///   apply several times slower.
///
/// Premium-gated indexes (rare writes, and a plan change refills them
/// wholesale) are updated immediately instead.
struct SearchIndexer: Sendable {
    struct Target: Sendable {
        let number: Int
        let index: SearchIndexSpec
        let isSet: Bool
        let gated: Bool
        let capture: String
        let captureAll: String
        let byRowid: String
        let delete: String
        let insert: String
    }

    /// Index entries touched in one transaction: target → rowid → what the
    /// index held for that rowid before (nil: nothing).
    final class Batch {
        fileprivate var entries: [Int: [Int64: [Value]?]] = [:]

        fileprivate func touch(_ target: Target, _ rowid: Int64, _ values: [Value]?) {
            if entries[target.number]?.keys.contains(rowid) == true { return }
            entries[target.number, default: [:]][rowid] = .some(values)
        }
    }

    private let targets: [Target]
    private let byEntity: [String: [Target]]
    private let byOpType: [String: [Target]]
    private let premiumSQL: String

    init(projection: ProjectionSchema) {
        let schema = projection.schema
        let q = ProjectionSchema.quoted
        var targets: [Target] = []
        for (entity, index) in projection.searchIndexes {
            let content = q(projection.contentTable(of: index, in: entity))
            let columns = index.fields.map(q).joined(separator: ", ")
            let fts = q(index.index)
            let slots = (0..<index.fields.count).map { "?\($0 + 2)" }.joined(separator: ", ")
            let isSet = index.setField != nil
            targets.append(Target(
                number: targets.count, index: index, isSet: isSet, gated: index.requiresPremium,
                capture: "SELECT rowid, \(columns) FROM \(content) WHERE id = ?1" + (isSet ? " AND value = ?2" : ""),
                captureAll: "SELECT rowid, \(columns) FROM \(content) WHERE id = ?1",
                byRowid: "SELECT \(columns) FROM \(content) WHERE rowid = ?1",
                delete: "INSERT INTO \(fts)(\(fts), rowid, \(columns)) VALUES ('delete', ?1, \(slots))",
                insert: "INSERT INTO \(fts)(rowid, \(columns)) VALUES (?1, \(slots))"))
        }
        var byEntity: [String: [Target]] = [:]
        for (offset, pair) in projection.searchIndexes.enumerated() { byEntity[pair.entity.name, default: []].append(targets[offset]) }
        var byOpType: [String: [Target]] = [:]
        for spec in schema.ops {
            guard let candidates = byEntity[spec.entity] else { continue }
            let touched: [Target]
            switch spec.action {
            case .create, .upsert:
                touched = candidates.filter { !$0.isSet }
            case .set:
                let written = Set(spec.fields)
                touched = candidates.filter { !$0.isSet && !written.isDisjoint(with: $0.index.fields) }
            case .add, .remove:
                touched = candidates.filter { $0.index.setField == spec.field }
            case .increment, .delete, .restore:
                touched = []
            }
            if !touched.isEmpty { byOpType["\(spec.type)@\(spec.version)"] = touched }
        }
        self.targets = targets
        self.byEntity = byEntity
        self.byOpType = byOpType
        self.premiumSQL = "SELECT \(projection.premiumCondition)"
    }

    private typealias Captured = (rowid: Int64, values: [Value])

    /// Applies `body` (an op's materializer steps), noting the index entries it changes.
    func around(_ op: Op, _ spec: OpTypeSpec?, in db: Database, batch: Batch, _ body: () throws -> Void) throws {
        guard let touched = byOpType["\(op.type)@\(op.version)"] else { return try body() }
        let id = Value.text(op.entityID.lowercased)
        let member = spec?.valueKey.flatMap { op.payload[$0] } ?? .null
        let before = try touched.map { try capture($0, id, member, db) }
        for (target, old) in zip(touched, before) where !target.gated {
            if let old { batch.touch(target, old.rowid, old.values) }
        }
        try body()
        var premium: Bool?
        for (offset, target) in touched.enumerated() {
            let after = try capture(target, id, member, db)
            if !target.gated {
                // A row that did not exist before: its rowid was not indexed (or was touched already).
                if let after { batch.touch(target, after.rowid, nil) }
                continue
            }
            guard after?.rowid != before[offset]?.rowid || after?.values != before[offset]?.values else { continue }
            if premium == nil { premium = try db.scalarInt(premiumSQL) == 1 }
            guard premium == true else { continue }
            if let old = before[offset] { try db.statement(target.delete).execute([.integer(old.rowid)] + old.values) }
            if let new = after { try db.statement(target.insert).execute([.integer(new.rowid)] + new.values) }
        }
    }

    private func capture(_ target: Target, _ id: Value, _ member: Value, _ db: Database) throws -> Captured? {
        let count = Int32(target.index.fields.count)
        return try db.query(target.capture, target.isSet ? [id, member] : [id]) { row in
            (row.int(0), (1...count).map { row.value($0) })
        }.first
    }

    /// Notes every indexed row of one entity before (`add: false`) or after
    /// (`add: true`) rebase puts its confirmed rows back wholesale.
    func reindexEntity(_ entity: String, _ id: String, add: Bool, in db: Database, batch: Batch) throws {
        guard let targets = byEntity[entity] else { return }
        var premium: Bool?
        for target in targets {
            let count = Int32(target.index.fields.count)
            let rows = try db.query(target.captureAll, [.text(id)]) { row in (row.int(0), (1...count).map { row.value($0) }) }
            if !target.gated {
                for row in rows { batch.touch(target, row.0, add ? nil : row.1) }
                continue
            }
            if premium == nil { premium = try db.scalarInt(premiumSQL) == 1 }
            guard premium == true else { continue }
            for row in rows { try db.statement(add ? target.insert : target.delete).execute([.integer(row.0)] + row.1) }
        }
    }

    /// Brings every index entry the batch touched up to date, in ascending rowid order.
    func flush(_ batch: Batch, in db: Database) throws {
        for (number, entries) in batch.entries.sorted(by: { $0.key < $1.key }) {
            let target = targets[number]
            let count = Int32(target.index.fields.count)
            let read = try db.statement(target.byRowid)
            for rowid in entries.keys.sorted() {
                let old = entries[rowid]!
                let new = try read.map([.integer(rowid)]) { row in (0..<count).map { row.value($0) } }.first
                guard old != new else { continue }
                if let old { try db.statement(target.delete).execute([.integer(rowid)] + old) }
                if let new { try db.statement(target.insert).execute([.integer(rowid)] + new) }
            }
        }
        batch.entries.removeAll()
    }
}
