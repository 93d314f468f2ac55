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
public struct Materializer: Sendable {
    public let schema: Schema

    public init(schema: Schema) { self.schema = schema }

    private static func q(_ identifier: String) -> String { ProjectionSchema.quoted(identifier) }

    /// The entity type an op acts on, if this schema knows its type.
    public func entity(of op: Op) -> EntitySpec? {
        schema.opType(op.type, version: op.version).flatMap { schema.entity($0.entity) }
    }

    public func steps(for op: Op) -> [SQLStep] {
        guard let spec = schema.opType(op.type, version: op.version), let entity = schema.entity(spec.entity) else { return [] }
        let id = Value.text(op.entityID.lowercased)
        let table = Self.q(entity.table)
        switch spec.action {
        case .create:
            return [createStep(op, spec, entity, id)]
        case .upsert:
            // Create if missing, then set: setting the values just inserted is a no-op.
            return [createStep(op, spec, entity, id)] + setSteps(op, spec, entity, id)
        case .set:
            return setSteps(op, spec, entity, id)
        case .add, .remove:
            guard let field = entity.field(spec.field!), let value = op.payload[spec.valueKey!], !value.isNull else { return [] }
            let setTable = Self.q(entity.setTable(field))
            if spec.action == .add {
                return [SQLStep("INSERT OR IGNORE INTO \(setTable)(id, value) SELECT ?1, ?2 WHERE EXISTS (SELECT 1 FROM \(table) WHERE id = ?1)", [id, value])]
            }
            return [SQLStep("DELETE FROM \(setTable) WHERE id = ?1 AND value = ?2", [id, value])]
        case .increment:
            guard let field = entity.field(spec.field!), let delta = op.payload[spec.valueKey!], delta.realValue != nil else { return [] }
            let column = Self.q(field.name)
            return [SQLStep("UPDATE \(table) SET \(column) = coalesce(\(column), 0) + ?2 WHERE id = ?1", [id, delta])]
        case .delete:
            return [SQLStep("UPDATE \(table) SET deleted_at = ?2 WHERE id = ?1", [id, .integer(op.deviceTime)])]
        case .restore:
            return [SQLStep("UPDATE \(table) SET deleted_at = NULL WHERE id = ?1", [id])]
        }
    }

    /// May this op write this field? Server-only fields take server-authored ops only.
    private func writable(_ field: FieldSpec, by op: Op) -> Bool {
        switch field.rule {
        case .serverOnly: op.isServerAuthored
        case .set, .counter: false
        default: true
        }
    }

    private func createStep(_ op: Op, _ spec: OpTypeSpec, _ entity: EntitySpec, _ id: Value) -> SQLStep {
        var columns = ["id", "created_at"]
        var arguments: [Value] = [id, .integer(op.deviceTime)]
        for field in entity.scalarFields {
            let value: Value
            if spec.fields.contains(field.name), let given = op.payload[field.name], writable(field, by: op) {
                value = given
            } else if let fallback = spec.defaults[field.name] {
                value = fallback
            } else {
                continue
            }
            columns.append(Self.q(field.name))
            arguments.append(value)
            if field.rule == .forwardOnly {
                columns += [Self.q(field.deviceColumn), Self.q(field.timeColumn)]
                arguments += [.text(op.deviceID.lowercased), .integer(op.deviceTime)]
            }
        }
        let placeholders = (1...columns.count).map { "?\($0)" }.joined(separator: ", ")
        return SQLStep("INSERT INTO \(Self.q(entity.table))(\(columns.joined(separator: ", "))) VALUES (\(placeholders)) ON CONFLICT(id) DO NOTHING", arguments)
    }

    private func setSteps(_ op: Op, _ spec: OpTypeSpec, _ entity: EntitySpec, _ id: Value) -> [SQLStep] {
        let table = Self.q(entity.table)
        var assignments: [String] = []
        var arguments: [Value] = [id]
        var steps: [SQLStep] = []
        for field in entity.scalarFields where spec.fields.contains(field.name) && writable(field, by: op) {
            guard let value = op.payload[field.name] else { continue }
            if field.rule == .forwardOnly {
                let c = Self.q(field.name), d = Self.q(field.deviceColumn), t = Self.q(field.timeColumn)
                // Forward only: a lower value is ignored unless the same device set the
                // current value less than the window earlier by its own clock.
                steps.append(SQLStep("""
                    UPDATE \(table) SET \(c) = ?2, \(d) = ?3, \(t) = ?4 WHERE id = ?1 AND (\(c) IS NULL OR ?2 >= \(c) \
                    OR (\(d) = ?3 AND ?4 >= \(t) AND ?4 - \(t) < \(MergeRule.forwardOnlyWindowMilliseconds)))
                    """, [id, value, .text(op.deviceID.lowercased), .integer(op.deviceTime)]))
            } else {
                arguments.append(value)
                assignments.append("\(Self.q(field.name)) = ?\(arguments.count)")
            }
        }
        if !assignments.isEmpty {
            steps.insert(SQLStep("UPDATE \(table) SET \(assignments.joined(separator: ", ")) WHERE id = ?1", arguments), at: 0)
        }
        return steps
    }
}
