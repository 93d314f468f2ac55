import ChronicleCore

/// Keeps the FTS5 indexes in step with the rows they may find.
///
/// Each index is built from a content view (`ProjectionSchema.contentView`)
/// that leaves out deleted rows, rows whose owner is deleted, and premium-only
/// text on a free plan. Around each op that can change what a view shows,
/// this notes the view rows the op touches and what the index holds for them;
/// when the transaction's batch ends, `flush` brings each touched entry up to
/// date in ascending rowid order, with single-row `VALUES` statements:
///
/// - External-content FTS5 needs the exact old values to delete an entry, so
///   they are read before the first change.
/// - FTS5 keeps new terms in memory until commit only while rowids ascend and
///   no statement savepoint intervenes; a trigger, an `INSERT … SELECT` or an
///   out-of-order rowid makes it flush to disk every time, which made bulk
///   apply several times slower.
///
/// Premium-only indexes (rare writes, and a plan change refills them
/// wholesale by trigger) are updated immediately instead.
struct SearchIndexer: Sendable {
    struct Target: Sendable {
        let number: Int
        let index: SearchIndexSpec
        let gated: Bool
        let byID: String
        let byMember: String
        let byOwner: String
        let byRowid: String
        let delete: String
        let insert: String
        /// The index's phrase index, kept up to date for rows at or below its watermark.
        let phrase: PhraseIndex?
    }

    /// Which view rows an op can change.
    enum Scope: Sendable {
        /// Rows with the op's entity id (its own row, or all its set elements).
        case entity
        /// The one set element the op adds or removes.
        case member
        /// Rows of other entity types owned by the op's entity (an article's highlights).
        case owned
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
    private let schema: Schema
    private func opNumber(_ op: Op) -> Int? { schema.opNumber(op.type, version: op.version) }
    /// What a delete, a restore or a rebase of an entity can change.
    private let entityWide: [String: [(Target, Scope)]]
    /// Indexed by `Schema.opNumber`.
    private let byOpType: [[(Target, Scope)]]

    init(projection: ProjectionSchema) {
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
            let target = Target(
                number: targets.count, index: index, gated: index.requiresPremium,
                byID: "SELECT rid, \(columns) FROM \(view) WHERE id = ?1",
                byMember: "SELECT rid, \(columns) FROM \(view) WHERE id = ?1 AND value = ?2",
                byOwner: "SELECT rid, \(columns) FROM \(view) WHERE owner_id = ?1",
                byRowid: "SELECT \(columns) FROM \(view) WHERE rid = ?1",
                delete: "INSERT INTO \(fts)(\(fts), rowid, \(columns)) VALUES ('delete', ?1, \(slots))",
                insert: "INSERT INTO \(fts)(rowid, \(columns)) VALUES (?1, \(slots))",
                phrase: PhraseIndex(of: index))
            targets.append(target)
            own[entity.name, default: []].append(target)
            if let owner = projection.ownerEntity(of: index, in: entity) { owned[owner.name, default: []].append(target) }
        }
        var entityWide: [String: [(Target, Scope)]] = [:]
        for entity in schema.entities {
            let list = (own[entity.name] ?? []).map { ($0, Scope.entity) } + (owned[entity.name] ?? []).map { ($0, Scope.owned) }
            if !list.isEmpty { entityWide[entity.name] = list }
        }
        var byOpType: [[(Target, Scope)]] = []
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
            byOpType.append(touched)
        }
        self.targets = targets
        self.schema = schema
        self.entityWide = entityWide
        self.byOpType = byOpType
    }

    private typealias Rows = [(rowid: Int64, values: [Value])]

    /// Applies `body` (an op's materializer steps), noting the index entries it changes.
    func around(_ written: Op, _ spec: OpTypeSpec?, in db: Database, batch: Batch, _ body: () throws -> Void) throws {
        let op = schema.opNumber(written.type, version: written.version) != nil ? written : ((try? schema.upcast(written)) ?? written)
        guard let number = opNumber(op), !byOpType[number].isEmpty else { return try body() }
        let touched = byOpType[number]
        let member = spec?.valueKey.flatMap { op.payload[$0] } ?? .null
        try around(touched, .text(op.entityID.lowercased), member, in: db, batch: batch, body)
    }

    /// Runs `body` (putting an entity's confirmed rows back during rebase), noting what it changes.
    func aroundEntity(_ entity: String, _ id: String, in db: Database, batch: Batch, _ body: () throws -> Void) throws {
        try around(entityWide[entity] ?? [], .text(id), .null, in: db, batch: batch, body)
    }

    private func around(_ touched: [(Target, Scope)], _ id: Value, _ member: Value, in db: Database, batch: Batch,
                        _ body: () throws -> Void) throws {
        let before = try touched.map { try capture($0.0, $0.1, id, member, db) }
        try body()
        for (offset, (target, scope)) in touched.enumerated() {
            let after = try capture(target, scope, id, member, db)
            if !target.gated {
                for row in before[offset] { batch.touch(target, row.rowid, row.values) }
                // A row the view did not show before: nothing was indexed for its rowid (or it was touched already).
                for row in after { batch.touch(target, row.rowid, nil) }
                continue
            }
            let old = Dictionary(before[offset].map { ($0.rowid, $0.values) }, uniquingKeysWith: { a, _ in a })
            let new = Dictionary(after.map { ($0.rowid, $0.values) }, uniquingKeysWith: { a, _ in a })
            let changed = Set(old.keys).union(new.keys).sorted().filter { old[$0] != new[$0] }
            // Most writes (a save before its text arrives) change nothing here: no watermark to read.
            let through = changed.isEmpty ? 0 : try target.phrase?.watermark(in: db) ?? 0
            for rowid in changed {
                try Self.update(target, rowid, from: old[rowid], to: new[rowid], phrases: rowid <= through, in: db)
            }
        }
    }

    private func capture(_ target: Target, _ scope: Scope, _ id: Value, _ member: Value, _ db: Database) throws -> Rows {
        let count = Int32(target.index.fields.count)
        let (sql, arguments): (String, [Value]) = switch scope {
        case .entity: (target.byID, [id])
        case .member: (target.byMember, [id, member])
        case .owned: (target.byOwner, [id])
        }
        return try db.query(sql, arguments) { row in (row.int(0), (1...count).map { row.value($0) }) }
    }

    /// Brings every index entry the batch touched up to date, in ascending rowid order.
    func flush(_ batch: Batch, in db: Database) throws {
        for (number, entries) in batch.entries.sorted(by: { $0.key < $1.key }) {
            let target = targets[number]
            let count = Int32(target.index.fields.count)
            let read = try db.statement(target.byRowid)
            var through: Int64?   // read at the first entry that changes
            for rowid in entries.keys.sorted() {
                let old = entries[rowid]!
                let new = try read.map([.integer(rowid)]) { row in (0..<count).map { row.value($0) } }.first
                guard old != new else { continue }
                if through == nil { through = try target.phrase?.watermark(in: db) ?? 0 }
                try Self.update(target, rowid, from: old, to: new, phrases: rowid <= through!, in: db)
            }
        }
        batch.entries.removeAll()
    }

    /// One entry of an index from `old` (what it holds; nil: nothing) to `new` (nil: nothing),
    /// and of its phrase index if `phrases` (the row is at or below its watermark).
    private static func update(_ target: Target, _ rowid: Int64, from old: [Value]?, to new: [Value]?, phrases: Bool,
                               in db: Database) throws {
        let phrase = phrases ? target.phrase : nil
        if let old {
            try db.statement(target.delete).execute([.integer(rowid)] + old)
            if let phrase { try db.statement(phrase.deleteSQL).execute([.integer(rowid)] + old) }
        }
        if let new {
            try db.statement(target.insert).execute([.integer(rowid)] + new)
            if let phrase { try db.statement(phrase.insertSQL).execute([.integer(rowid)] + new) }
        }
    }
}
