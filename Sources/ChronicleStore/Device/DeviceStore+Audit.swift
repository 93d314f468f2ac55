import ChronicleCore
import Foundation

/// What one op did to one field.
public struct FieldEffect: Sendable, Equatable {
    /// How the op's write to the field ended up.
    public enum Outcome: String, Sendable {
        /// The op set the field and it still holds that value.
        case applied
        /// The op set the field; a later op set it again.
        case superseded
        /// The field's rule (or the row's state) made the op leave it alone.
        case ignored
    }
    public var field: String
    public var outcome: Outcome
    /// A sentence: the value set, or why it was ignored.
    public var detail: String
    /// For set fields: the element added or removed.
    public var member: Value? = nil

    var slot: String { field + "\u{0}" + (member?.display ?? "") }
}

/// One op in an entity's history.
public struct AuditEntry: Sendable {
    public var op: Op
    /// True while the op waits in the outbox.
    public var pending: Bool
    public var effects: [FieldEffect]
}

/// An entity's whole history and its state as of a sequence number.
public struct Audit: Sendable {
    public var entityType: String
    public var id: String
    public var entries: [AuditEntry]
    /// Field values after the last entry (or after `asOf`); nil if the row does not exist then.
    public var state: [String: Value]?
    public var sets: [String: [Value]]
    public var asOf: Int64?
    /// Set when a compaction horizon dropped older history: the first seq still kept.
    /// The row's state at the seq before it comes from the snapshot there.
    public var historyBeginsAt: Int64?
    /// When that history was dropped (ms since 1970).
    public var historyDroppedAt: Int64?
}

extension DeviceStore {
    /// Every op that touched `id`, in order (confirmed by server seq, then
    /// pending by device seq), with what each did to each field, and the
    /// state as of `asOf` (a server seq; pending ops are left out) or now.
    ///
    /// Computed by replaying the entity's ops through the same materializer
    /// into a scratch database, so it explains exactly what the projection did.
    public func audit(_ id: UUID, asOf: Int64? = nil) throws -> Audit {
        let key = id.lowercased
        let (confirmed, pending) = try read { db in
            (try { () throws -> [Op] in
                var ops: [Op] = []
                try LogTables.forEachConfirmedOp(in: db, libraryID: libraryID, entity: key) { ops.append($0) }
                return ops
            }(),
             try db.query("SELECT \(Self.outboxColumns) FROM chronicle_outbox WHERE entity_id = ?1 ORDER BY device_seq", [.text(key)]) { try outboxOp($0) })
        }
        // Where a horizon dropped older history, the row starts from the snapshot at the horizon.
        // The snapshot is read as it decodes, keeping only this row's rows.
        let horizon = try read { db -> (base: Int64, seeded: [Snapshot.Table], droppedAt: Int64?) in
            let base = try LogTables.historyBase(in: db)
            guard base > 0 else { return (0, [], nil) }
            var collector = EntityRowsCollector(id: .text(key))
            if let found = try LogTables.storedSnapshot(atMost: base, in: db) { try LogTables.readStoredSnapshot(found.seq, in: db, into: &collector) }
            return (base, collector.tables, try LogTables.meta("history_dropped_at", in: db).integerValue)
        }
        let seeded = horizon.seeded
        let seededEntity = seeded.first { !$0.rows.isEmpty }.flatMap { table in schema.entities.first { $0.table == table.name } }
        guard let entity = (confirmed + pending).lazy.compactMap({ self.materializer.entity(of: $0) }).first ?? seededEntity else {
            throw ChronicleError(.unknownEntity, "No op in this store touches \(key).")
        }
        let ops = confirmed.filter { asOf == nil || $0.serverSeq! <= asOf! } + (asOf == nil ? pending : [])
        let scratch = try ProjectionTables.scratchProjection(projection)
        for table in seeded where !table.rows.isEmpty {
            let names = table.columns.map(ProjectionSchema.quoted).joined(separator: ", ")
            let marks = (1...table.columns.count).map { "?\($0)" }.joined(separator: ", ")
            for row in table.rows { try scratch.execute("INSERT INTO \(ProjectionSchema.quoted(table.name))(\(names)) VALUES (\(marks))", row) }
        }
        let columns = projection.columns(of: entity)
        func snapshot() throws -> (row: [String: Value]?, sets: [String: Set<Value>]) {
            let row = try scratch.query("SELECT \(columns.map(ProjectionSchema.quoted).joined(separator: ", ")) FROM \(ProjectionSchema.quoted(entity.table)) WHERE id = ?1", [.text(key)]) { row in
                Dictionary(uniqueKeysWithValues: columns.enumerated().map { ($1, ProjectionTables.typed(row.value(Int32($0)), entity.field($1))) })
            }.first
            var sets: [String: Set<Value>] = [:]
            for field in entity.setFields {
                sets[field.name] = Set(try scratch.query("SELECT value FROM \(ProjectionSchema.quoted(entity.setTable(field))) WHERE id = ?1", [.text(key)]) { $0.value(0) })
            }
            return (row, sets)
        }

        var entries: [AuditEntry] = []
        var lastApplied: [String: Int] = [:]  // field (or field+member) → entry index
        let applier = ProjectionApplier(materializer, in: scratch)
        for op in ops {
            let before = try snapshot()
            let isPending = op.serverSeq == nil
            if isPending, let spec = materializer.entity(of: op) { try Self.shadowIfNeeded(spec, key, projection, in: scratch) }
            try applier.apply(op)
            let after = try snapshot()
            var effects = explain(op, entity, before, after)
            for effect in effects where effect.outcome == .applied {
                // An earlier op's effect on the same field (or set element) is now superseded.
                if let earlier = lastApplied[effect.slot] {
                    for k in entries[earlier].effects.indices where entries[earlier].effects[k].slot == effect.slot
                        && entries[earlier].effects[k].outcome == .applied {
                        entries[earlier].effects[k].outcome = .superseded
                        entries[earlier].effects[k].detail += " — superseded by \(label(op))"
                    }
                }
                lastApplied[effect.slot] = entries.count
            }
            effects.sort { $0.field < $1.field }
            entries.append(AuditEntry(op: op, pending: isPending, effects: effects))
        }
        let final = try snapshot()
        var state = final.row
        for field in entity.scalarFields {
            for column in field.ruleColumns { state?.removeValue(forKey: column) }
        }
        return Audit(entityType: entity.name, id: key, entries: entries, state: state,
                     sets: final.sets.mapValues { $0.sorted { $0.display < $1.display } }, asOf: asOf,
                     historyBeginsAt: horizon.base > 0 ? horizon.base + 1 : nil, historyDroppedAt: horizon.droppedAt)
    }

    private func label(_ op: Op) -> String {
        op.serverSeq.map { "seq \($0)" } ?? "pending #\(op.deviceSeq)"
    }

    private func deviceLabel(_ device: String?) -> String {
        guard let device else { return "unknown device" }
        if device == deviceID.lowercased { return "this device" }
        if device == Op.serverDeviceID.lowercased { return "the server" }
        return "device …\(device.suffix(8))"
    }

    /// Says, field by field, what an op did, from the row before and after it.
    private func explain(_ written: Op, _ entity: EntitySpec, _ before: (row: [String: Value]?, sets: [String: Set<Value>]),
                         _ after: (row: [String: Value]?, sets: [String: Set<Value>])) -> [FieldEffect] {
        // Ops of earlier versions are explained as they were read: upcast to the current shape.
        let op: Op
        do { op = try schema.upcast(written) } catch {
            return [FieldEffect(field: "*", outcome: .ignored, detail: "set aside: \(error.message) [\(error.code)]")]
        }
        guard let spec = schema.opType(op.type, version: op.version) else {
            return [FieldEffect(field: "*", outcome: .ignored, detail: "\(op.typeAndVersion) is unknown to this build; it changed nothing")]
        }
        if op.typeAndVersion != written.typeAndVersion {
            return explainCurrent(op, spec, entity, before, after).map { effect in
                var effect = effect
                effect.detail += " (written as \(written.typeAndVersion), read as \(op.typeAndVersion))"
                return effect
            }
        }
        return explainCurrent(op, spec, entity, before, after)
    }

    private func explainCurrent(_ op: Op, _ spec: OpTypeSpec, _ entity: EntitySpec, _ before: (row: [String: Value]?, sets: [String: Set<Value>]),
                                _ after: (row: [String: Value]?, sets: [String: Set<Value>])) -> [FieldEffect] {
        var effects: [FieldEffect] = []
        switch spec.action {
        case .create, .upsert, .set:
            let existedBefore = before.row != nil
            if after.row == nil {
                return [FieldEffect(field: "*", outcome: .ignored, detail: "the \(entity.name) does not exist at this point")]
            }
            var names = Set(spec.fields.filter { op.payload[$0] != nil })
            if spec.action != .set, !existedBefore { names.formUnion(spec.defaults.keys) }
            if spec.action == .create, existedBefore {
                return [FieldEffect(field: "*", outcome: .ignored, detail: "the \(entity.name) was already created by an earlier op")]
            }
            for name in names.sorted() {
                guard let field = entity.field(name) else { continue }
                let value = after.row?[name] ?? .null
                if field.rule == .serverOnly && !op.isServerAuthored {
                    effects.append(FieldEffect(field: name, outcome: .ignored, detail: "server-only: only the server may set it"))
                } else if field.rule == .forwardOnly {
                    let changed = before.row?[name] != after.row?[name] || before.row?[field.deviceColumn] != after.row?[field.deviceColumn]
                        || before.row?[field.timeColumn] != after.row?[field.timeColumn] || !existedBefore
                    if changed {
                        effects.append(FieldEffect(field: name, outcome: .applied, detail: "set to \(value.display)"))
                    } else {
                        let current = before.row?[name] ?? .null
                        let setter = deviceLabel(before.row?[field.deviceColumn]?.textValue)
                        effects.append(FieldEffect(field: name, outcome: .ignored,
                            detail: "\(name) \((op.payload[name] ?? .null).display) from \(deviceLabel(op.deviceID.lowercased)) ignored: forward-only, current \(current.display) from \(setter)"))
                    }
                } else if field.rule == .mergeOrAsk, let seq = op.serverSeq, let setSeq = before.row?[field.seqColumn]?.integerValue,
                          setSeq > op.baseSeq, before.row?[field.deviceColumn]?.textValue != op.deviceID.lowercased,
                          before.row?[name] != op.payload[name] {
                    let replaced = before.row?[name] ?? .null
                    effects.append(FieldEffect(field: name, outcome: .applied,
                        detail: "set to \(value.display) — merge-or-ask: concurrent with seq \(setSeq) from \(deviceLabel(before.row?[field.deviceColumn]?.textValue)) (this op was written at seq \(op.baseSeq)); it wins by server order (seq \(seq)) and the replaced \(replaced.display) is kept as a conflict to resolve"))
                } else {
                    effects.append(FieldEffect(field: name, outcome: .applied, detail: "set to \(value.display)"))
                }
            }
        case .add, .remove:
            let field = spec.field!
            let member = op.payload[spec.valueKey!] ?? .null
            let had = before.sets[field]?.contains(member) ?? false
            let has = after.sets[field]?.contains(member) ?? false
            if spec.action == .add {
                effects.append(had || !has
                    ? FieldEffect(field: field, outcome: .ignored, detail: had ? "\(member.display) was already in \(field)" : "the \(entity.name) does not exist at this point")
                    : FieldEffect(field: field, outcome: .applied, detail: "added \(member.display)", member: member))
            } else {
                effects.append(had && !has
                    ? FieldEffect(field: field, outcome: .applied, detail: "removed \(member.display)", member: member)
                    : FieldEffect(field: field, outcome: .ignored, detail: "\(member.display) was not in \(field)"))
            }
        case .increment:
            let field = spec.field!
            let was = before.row?[field] ?? .null, now = after.row?[field] ?? .null
            effects.append(after.row == nil
                ? FieldEffect(field: field, outcome: .ignored, detail: "the \(entity.name) does not exist at this point")
                : FieldEffect(field: field, outcome: .applied, detail: "\(was.display) + \((op.payload[spec.valueKey!] ?? .null).display) = \(now.display)"))
        case .delete, .restore:
            if after.row == nil {
                effects.append(FieldEffect(field: "deleted_at", outcome: .ignored, detail: "the \(entity.name) does not exist at this point"))
            } else {
                effects.append(FieldEffect(field: "deleted_at", outcome: .applied, detail: spec.action == .delete ? "deleted" : "restored"))
            }
        }
        return effects
    }
}

/// The rows of one entity (those whose `id` column holds it) from a snapshot read as it decodes.
struct EntityRowsCollector: SnapshotVisitor {
    let id: Value
    private(set) var tables: [Snapshot.Table] = []
    private var idColumn: Int?

    init(id: Value) { self.id = id }

    mutating func header(_ header: SnapshotHeader) throws {}

    mutating func table(_ name: String, columns: [String], rowCount: Int) throws {
        tables.append(Snapshot.Table(name: name, columns: columns, rows: []))
        idColumn = columns.firstIndex(of: "id")
    }

    mutating func row(_ values: [Value]) throws {
        if let column = idColumn, values[column] == id { tables[tables.count - 1].rows.append(values) }
    }
}
