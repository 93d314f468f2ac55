import Foundation

/// One SQL statement and its arguments.
public struct SQLStep: Sendable, Hashable {
    public let sql: String
    public let arguments: [Value]
    public init(_ sql: String, _ arguments: [Value]) {
        self.sql = sql
        self.arguments = arguments
    }
}

/// Turns one op into the SQL that applies it to the projection.
///
/// Pure and deterministic: the same op always gives the same statements, and
/// every merge rule is expressed in those statements, so the incremental path,
/// a rebuild and an audit replay all fold ops the same way. Total: an op that
/// names an unknown type, a missing row or a field it may not set does nothing
/// rather than fail, because confirmed ops must always apply.
///
/// The SQL text depends only on the op type, which payload fields are present
/// and whether the server wrote it, so it is compiled once per such shape and
/// cached; per op only the arguments are gathered.
public struct Materializer: Sendable {
    public let schema: Schema
    private let cache = PlanCache()

    public init(schema: Schema) { self.schema = schema }

    private static func q(_ identifier: String) -> String { ProjectionSchema.quoted(identifier) }

    /// The entity type an op acts on, if this schema knows its type.
    public func entity(of op: Op) -> EntitySpec? {
        schema.currentSpec(of: op).flatMap { schema.entity($0.entity) }
    }

    /// The statements for `op`, read in the current shape (ops of earlier versions are
    /// upcast first). An op this build cannot read gives no statements: confirmed ops must
    /// always apply, and the store sets such an op aside with its error.
    public func steps(for written: Op) -> [SQLStep] {
        let op: Op
        if schema.opNumber(written.type, version: written.version) != nil {
            op = written
        } else if let upcast = try? schema.upcast(written) {
            op = upcast
        } else {
            return []
        }
        guard let number = schema.opNumber(op.type, version: op.version) else { return [] }
        let spec = schema.ops[number]
        var mask: UInt64 = 0
        for (bit, name) in spec.fields.enumerated() where op.payload[name] != nil { mask |= 1 << UInt64(bit) }
        if let key = spec.valueKey, let value = op.payload[key], !value.isNull,
           spec.action != .increment || value.realValue != nil {
            mask |= 1 << 63
        }
        let key = PlanKey(op: number, mask: mask, server: op.isServerAuthored)
        let templates = cache.plan(key) { compile(spec, mask: mask, server: op.isServerAuthored) }
        return templates.map { template in
            SQLStep(template.sql, template.arguments.map { source in
                switch source {
                case .entityID: .text(op.entityID.lowercased)
                case .deviceID: .text(op.deviceID.lowercased)
                case .deviceTime: .integer(op.deviceTime)
                case .createdTime: .integer(Self.createdTime(of: op))
                case .deletedTime: .integer(Self.deletedTime(of: op))
                case .serverSeq: op.serverSeq.map(Value.integer) ?? .null
                case .baseSeq: .integer(op.baseSeq)
                case .opID: .text(op.opID.lowercased)
                case .payload(let name): op.payload[name] ?? .null
                case .constant(let value): value
                }
            })
        }
    }

    // MARK: - Times

    /// Bumped whenever what a confirmed op writes changes for the same op (the times below):
    /// it is part of the schema's fingerprint, so every store and server library made under
    /// other rules rebuilds its projection on open, and digests agree again.
    public static let rulesRevision = "times-bounded-by-server-time/1"

    /// A row's `created_at`: the author's clock, but never later than the server's time of the
    /// op once the server has confirmed it. A clock years ahead would otherwise keep the row
    /// first in every device's "newest first" for years. A clock behind is kept as it is: a
    /// row written offline really is older than its confirmation, and an early `created_at`
    /// decides nothing (`Schemas/store/device-v9.md`, "Times in the projection"). A queued op
    /// (no server time yet) shows the author's own clock, on the author's device alone.
    public static func createdTime(of op: Op) -> Int64 {
        guard let serverTime = op.serverTime else { return op.deviceTime }
        return min(op.deviceTime, serverTime)
    }

    /// A row's `deleted_at`: the server's time of the delete once confirmed. Retention (how
    /// long a deleted row's files are kept, on the server and on devices) is measured from it,
    /// and another device's clock must decide none of that: a clock years behind would make a
    /// delete look years old and its files go at once. A queued delete shows the author's
    /// clock; its row's confirmed copy (`chronicle_shadow_*`) still names its files meanwhile.
    public static func deletedTime(of op: Op) -> Int64 {
        op.serverTime ?? op.deviceTime
    }

    /// Whether folding `op` once the server confirmed it gives its row what folding it queued
    /// gave it, as far as times go (`createdTime`, `deletedTime`): a device confirming its own
    /// pushes may then leave the row as it is. False for an op without a server time.
    public func foldsAlikeQueuedAndConfirmed(_ op: Op) -> Bool {
        guard let serverTime = op.serverTime else { return false }
        switch schema.currentSpec(of: op)?.action {
        case .create?, .upsert?: return op.deviceTime <= serverTime
        case .delete?: return op.deviceTime == serverTime
        default: return true
        }
    }

    // MARK: - Compiling

    enum Argument: Sendable {
        case entityID, deviceID, deviceTime, serverSeq, baseSeq, opID
        /// `created_at`, `deleted_at`: the device's time bounded by the server's (`createdTime`, `deletedTime`).
        case createdTime, deletedTime
        case payload(String)
        case constant(Value)
    }

    struct Template: Sendable {
        let sql: String
        let arguments: [Argument]
    }

    struct PlanKey: Hashable, Sendable {
        let op: Int
        let mask: UInt64
        let server: Bool
    }

    final class PlanCache: @unchecked Sendable {
        private let lock = NSLock()
        private var plans: [PlanKey: [Template]] = [:]

        func plan(_ key: PlanKey, _ make: () -> [Template]) -> [Template] {
            lock.lock()
            if let plan = plans[key] { lock.unlock(); return plan }
            lock.unlock()
            let plan = make()
            lock.lock()
            plans[key] = plan
            lock.unlock()
            return plan
        }
    }

    private func compile(_ spec: OpTypeSpec, mask: UInt64, server: Bool) -> [Template] {
        guard let entity = schema.entity(spec.entity) else { return [] }
        let present = Set(spec.fields.enumerated().filter { mask & (1 << UInt64($0.offset)) != 0 }.map(\.element))
        let table = Self.q(entity.table)
        switch spec.action {
        case .create:
            return [createTemplate(spec, entity, present, server)]
        case .upsert:
            // Create if missing, then set: setting the values just inserted is a no-op.
            return [createTemplate(spec, entity, present, server)] + setTemplates(entity, present, server)
        case .set:
            return setTemplates(entity, present, server)
        case .add, .remove:
            guard mask & (1 << 63) != 0, let field = entity.field(spec.field!) else { return [] }
            let setTable = Self.q(entity.setTable(field))
            let value = Argument.payload(spec.valueKey!)
            if spec.action == .add {
                return [Template(sql: "INSERT OR IGNORE INTO \(setTable)(id, value) SELECT ?1, ?2 WHERE EXISTS (SELECT 1 FROM \(table) WHERE id = ?1)",
                                 arguments: [.entityID, value])]
            }
            return [Template(sql: "DELETE FROM \(setTable) WHERE id = ?1 AND value = ?2", arguments: [.entityID, value])]
        case .increment:
            guard mask & (1 << 63) != 0, let field = entity.field(spec.field!) else { return [] }
            let column = Self.q(field.name)
            return [Template(sql: "UPDATE \(table) SET \(column) = coalesce(\(column), 0) + ?2 WHERE id = ?1",
                             arguments: [.entityID, .payload(spec.valueKey!)])]
        case .delete:
            return [Template(sql: "UPDATE \(table) SET deleted_at = ?2 WHERE id = ?1", arguments: [.entityID, .deletedTime])]
        case .restore:
            return [Template(sql: "UPDATE \(table) SET deleted_at = NULL WHERE id = ?1", arguments: [.entityID])]
        }
    }

    /// May an op (by the server or not) write this field? Server-only fields take server-authored ops only.
    private func writable(_ field: FieldSpec, server: Bool) -> Bool {
        switch field.rule {
        case .serverOnly: server
        case .set, .counter: false
        default: true
        }
    }

    private func createTemplate(_ spec: OpTypeSpec, _ entity: EntitySpec, _ present: Set<String>, _ server: Bool) -> Template {
        var columns = ["id", "created_at"]
        var arguments: [Argument] = [.entityID, .createdTime]
        for field in entity.scalarFields {
            if present.contains(field.name), writable(field, server: server) {
                arguments.append(.payload(field.name))
            } else if let fallback = spec.defaults[field.name] {
                arguments.append(.constant(fallback))
            } else {
                continue
            }
            columns.append(Self.q(field.name))
            if field.rule == .forwardOnly {
                columns += [Self.q(field.deviceColumn), Self.q(field.timeColumn)]
                arguments += [.deviceID, .deviceTime]
            } else if field.rule == .mergeOrAsk {
                columns += [Self.q(field.deviceColumn), Self.q(field.seqColumn)]
                arguments += [.deviceID, .serverSeq]
            }
        }
        let placeholders = (1...columns.count).map { "?\($0)" }.joined(separator: ", ")
        return Template(sql: "INSERT INTO \(Self.q(entity.table))(\(columns.joined(separator: ", "))) VALUES (\(placeholders)) ON CONFLICT(id) DO NOTHING",
                        arguments: arguments)
    }

    private func setTemplates(_ entity: EntitySpec, _ present: Set<String>, _ server: Bool) -> [Template] {
        let table = Self.q(entity.table)
        var assignments: [String] = []
        var arguments: [Argument] = [.entityID]
        var templates: [Template] = []
        for field in entity.scalarFields where present.contains(field.name) && writable(field, server: server) {
            if field.rule == .forwardOnly {
                let c = Self.q(field.name), d = Self.q(field.deviceColumn), t = Self.q(field.timeColumn)
                // Forward only: a lower value is ignored unless the same device set the
                // current value less than the window earlier by its own clock.
                templates.append(Template(sql: """
                    UPDATE \(table) SET \(c) = ?2, \(d) = ?3, \(t) = ?4 WHERE id = ?1 AND (\(c) IS NULL OR ?2 >= \(c) \
                    OR (\(d) = ?3 AND ?4 >= \(t) AND ?4 - \(t) < \(MergeRule.forwardOnlyWindowMilliseconds)))
                    """, arguments: [.entityID, .payload(field.name), .deviceID, .deviceTime]))
            } else if field.rule == .mergeOrAsk {
                templates += mergeOrAskTemplates(entity, field)
            } else {
                arguments.append(.payload(field.name))
                assignments.append("\(Self.q(field.name)) = ?\(arguments.count)")
            }
        }
        if !assignments.isEmpty {
            templates.insert(Template(sql: "UPDATE \(table) SET \(assignments.joined(separator: ", ")) WHERE id = ?1", arguments: arguments), at: 0)
        }
        return templates
    }

    /// `mergeOrAsk`: the set always wins by server order (as `lww`), but a confirmed op
    /// that did not see the op behind the current value (that op's seq is past the new
    /// op's `baseSeq`) and came from another device keeps the value it replaces in a
    /// conflict record. A confirmed sequential set resolves the field's earlier conflicts.
    /// Pending ops (no serverSeq yet) only set the value; conflicts are decided once the
    /// server has ordered them, identically on every device and the server.
    private func mergeOrAskTemplates(_ entity: EntitySpec, _ field: FieldSpec) -> [Template] {
        let table = Self.q(entity.table), c = Self.q(field.name), d = Self.q(field.deviceColumn), s = Self.q(field.seqColumn)
        let conflicts = Self.q(ProjectionSchema.conflictsTable)
        return [
            Template(sql: """
                UPDATE \(conflicts) SET resolved_seq = ?2 WHERE entity_id = ?1 AND field = ?4 AND resolved_seq IS NULL \
                AND ?2 IS NOT NULL AND winning_seq <= ?3
                """, arguments: [.entityID, .serverSeq, .baseSeq, .constant(.text(field.name))]),
            Template(sql: """
                INSERT OR IGNORE INTO \(conflicts)(op_id, field, entity, entity_id, kept, replaced, replaced_seq, replaced_device, \
                winning_seq, winning_device, resolved_seq) \
                SELECT ?5, ?6, ?7, ?1, ?2, t.\(c), t.\(s), t.\(d), ?3, ?4, NULL FROM \(table) t \
                WHERE t.id = ?1 AND ?3 IS NOT NULL AND t.\(s) IS NOT NULL AND t.\(s) > ?8 AND t.\(d) IS NOT ?4 AND t.\(c) IS NOT ?2
                """, arguments: [.entityID, .payload(field.name), .serverSeq, .deviceID, .opID, .constant(.text(field.name)),
                                 .constant(.text(entity.name)), .baseSeq]),
            Template(sql: "UPDATE \(table) SET \(c) = ?2, \(d) = ?3, \(s) = ?4 WHERE id = ?1",
                     arguments: [.entityID, .payload(field.name), .deviceID, .serverSeq]),
        ]
    }
}
