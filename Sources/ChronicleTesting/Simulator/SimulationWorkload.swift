import ChronicleCore
import ChronicleStore
import Foundation

/// One write the workload wants to make: an op type of the schema, its target and payload.
public struct PlannedWrite: Sendable, CustomStringConvertible {
    public var type: String
    public var entity: UUID?
    public var payload: Payload
    /// The row before the write (for checks that need the old value, such as a counter's).
    public var before: EntityRow?

    public var description: String {
        let target = entity.map { " " + String($0.lowercased.prefix(8)) } ?? ""
        let fields = payload.keys.sorted().map { "\($0)=\(Self.short(payload[$0]!))" }.joined(separator: " ")
        return "\(type)\(target)\(fields.isEmpty ? "" : " " + fields)"
    }

    static func short(_ value: Value) -> String {
        let text = value.display
        return text.count > 24 ? String(text.prefix(24)) + "…" : text
    }
}

/// A random workload of every op type the schema lets a device write — creates,
/// edits, set adds and removes, counter deltas, forward-only values that
/// sometimes go backwards, deletes and restores (and, for merge-or-ask fields,
/// resolving a conflict) — over the rows the device can see. Seeded.
///
/// It also knows what each write must look like right after it returns: a
/// device always reads its own writes.
public struct SimulationWorkload: Sendable {
    public let schema: Schema
    let random: SimulationRandom

    static let words = ["offline", "tunnel", "plane", "swift", "merge", "ünïcode", "🎉", "log", "\"quoted\"", "AND", "NEAR",
                        "prefix*", "-minus", "o'clock", "日本語", "sync"]
    static let tags = ["later", "swift", "ünï", "long read", "🎧", "x"]

    public init(schema: Schema, random: SimulationRandom) {
        self.schema = schema
        self.random = random
    }

    /// Op types a device may write: everything except ops that only set server-only fields.
    var deviceOps: [OpTypeSpec] {
        schema.ops.filter { spec in
            guard let entity = schema.entity(spec.entity) else { return false }
            switch spec.action {
            case .create, .upsert, .set:
                return spec.fields.contains { entity.field($0)?.rule != .serverOnly }
                    && spec.required.allSatisfy { entity.field($0)?.rule != .serverOnly }
            default:
                return true
            }
        }
    }

    /// Creates without references: what two devices can clash on.
    public var plainCreates: [OpTypeSpec] {
        deviceOps.filter { spec in
            spec.action == .create && spec.required.allSatisfy { schema.entity(spec.entity)?.field($0)?.type != .id }
        }
    }

    // MARK: - Planning

    /// A random write over what `store` shows now; nil when the dice chose something
    /// with nothing to act on.
    public func plan(on store: DeviceStore) throws -> PlannedWrite? {
        let ops = deviceOps
        let spec = ops[random.below(ops.count)]
        return try plan(spec, on: store)
    }

    /// A write of one op type, with a random target and payload.
    public func plan(_ spec: OpTypeSpec, on store: DeviceStore, entityHint: UUID? = nil) throws -> PlannedWrite? {
        guard let entity = schema.entity(spec.entity) else { return nil }
        var target: EntityRow?
        if spec.action != .create {
            let rows = try store.rows(entity.name, includeDeleted: true, limit: 200)
            if let entityHint {
                target = rows.first { $0.id == entityHint.lowercased }
            } else if spec.action == .restore {
                target = pick(rows.filter { Self.isDeleted($0) })
            } else if random.chance(0.1) {
                target = pick(rows)                                   // deleted ones too: the store must refuse those
            } else {
                target = pick(rows.filter { !Self.isDeleted($0) })
            }
            guard target != nil else { return nil }
        }
        var payload = Payload()
        switch spec.action {
        case .create, .upsert, .set:
            var names = spec.fields.filter { entity.field($0)?.rule != .serverOnly && (spec.required.contains($0) || random.chance(0.5)) }
            if names.isEmpty, let any = spec.fields.first(where: { entity.field($0)?.rule != .serverOnly }) { names = [any] }
            for name in names {
                guard let field = entity.field(name) else { continue }
                guard let value = try value(for: field, current: target?[name], on: store) else { return nil }
                payload[name] = value
            }
        case .add, .remove:
            guard let name = spec.field, let key = spec.valueKey, let field = entity.field(name) else { return nil }
            let present = target?.sets.first { $0.name == name }?.values ?? []
            if spec.action == .remove, !present.isEmpty, random.chance(0.8) {
                payload[key] = random.pick(present)
            } else if field.type == .id {
                guard let reference = field.references,
                      let other = pick(try store.rows(reference, limit: 200)) else { return nil }
                payload[key] = .text(other.id)
            } else {
                payload[key] = .text(random.pick(Self.tags))
            }
        case .increment:
            guard let key = spec.valueKey else { return nil }
            payload[key] = .integer(Int64(random.between(-5...5)))
        case .delete, .restore:
            break
        }
        return PlannedWrite(type: spec.type, entity: target.flatMap { UUID(text: $0.id) }, payload: payload, before: target)
    }

    private func pick(_ rows: [EntityRow]) -> EntityRow? { rows.isEmpty ? nil : random.pick(rows) }

    static func isDeleted(_ row: EntityRow) -> Bool { !(row["deleted_at"]?.isNull ?? true) }

    /// A valid random value for a field (nil when it must name a row and there is none).
    func value(for field: FieldSpec, current: Value?, on store: DeviceStore) throws -> Value? {
        switch field.type {
        case .url:
            return .text("https://example.com/\(random.pick(Self.words).addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "x")/\(random.below(1000))")
        case .text:
            if let allowed = field.enumValues { return .text(random.pick(allowed)) }
            let count = random.between(1...4)
            var text = (0..<count).map { _ in random.pick(Self.words) }.joined(separator: " ")
            if let maxLength = field.maxLength, text.count > maxLength { text = String(text.prefix(maxLength)) }
            return .text(text)
        case .integer, .timestamp:
            return .integer(Int64(random.below(1000)))
        case .real:
            if field.rule == .forwardOnly, let now = current?.realValue, random.chance(0.5) {
                // Forward-only: often a step on from where it is, sometimes a step back.
                let step = (random.unit() - 0.35) * (field.maximum == 1 ? 0.3 : 600)
                let next = min(field.maximum ?? .greatestFiniteMagnitude, max(field.minimum ?? 0, now + step))
                return .real((next * 1000).rounded() / 1000)
            }
            if field.maximum == 1 { return .real(Double(random.below(101)) / 100) }
            return .real(Double(random.below(36_000)) / 10)
        case .boolean:
            return .bool(random.chance(0.5))
        case .id:
            guard let reference = field.references,
                  let other = pick(try store.rows(reference, limit: 200)) else { return nil }
            return .text(other.id)
        }
    }

    // MARK: - Reading one's own writes

    /// What is wrong with `store`'s view right after `op` was written, or nil if it shows the write.
    public func ownWriteProblem(_ op: Op, before: EntityRow?, on store: DeviceStore) throws -> String? {
        guard let spec = schema.opType(op.type, version: op.version), let entity = schema.entity(spec.entity) else {
            return "the store wrote an op type its schema does not know (\(op.typeAndVersion))"
        }
        guard let row = try store.row(op.entityID) else {
            return "no \(entity.name) \(op.entityID.lowercased) after \(op.typeAndVersion) returned"
        }
        switch spec.action {
        case .create, .upsert, .set:
            if spec.action == .create, Self.isDeleted(row) { return "the \(entity.name) it just created shows as deleted" }
            for name in op.payload.keys.sorted() {
                guard let field = entity.field(name), let wrote = op.payload[name] else { continue }
                let shown = row[name] ?? .null
                if field.rule == .forwardOnly {
                    // A lower value may be ignored, but the field never shows less than what was just written.
                    if let w = wrote.realValue, let s = shown.realValue, s >= w { continue }
                } else if Self.same(shown, wrote) {
                    continue
                }
                return "\(entity.name).\(name) shows \(shown.display) right after this device wrote \(wrote.display)"
            }
        case .add, .remove:
            guard let name = spec.field, let key = spec.valueKey, let value = op.payload[key] else { return nil }
            let values = row.sets.first { $0.name == name }?.values ?? []
            let contains = values.contains { Self.same($0, value) }
            if spec.action == .add && !contains { return "\(entity.name).\(name) lacks \(value.display) right after it was added" }
            if spec.action == .remove && contains { return "\(entity.name).\(name) still has \(value.display) right after it was removed" }
        case .increment:
            guard let name = spec.field, let key = spec.valueKey, let delta = op.payload[key]?.integerValue else { return nil }
            let old = before?[name]?.integerValue ?? 0
            let now = row[name]?.integerValue ?? 0
            if now != old + delta { return "\(entity.name).\(name) is \(now) after adding \(delta) to \(old)" }
        case .delete:
            if !Self.isDeleted(row) { return "the \(entity.name) is not deleted right after it was deleted" }
        case .restore:
            if Self.isDeleted(row) { return "the \(entity.name) is still deleted right after it was restored" }
        }
        return nil
    }

    /// Values equal as the store shows them (numbers by value, booleans as 0/1).
    static func same(_ a: Value, _ b: Value) -> Bool {
        switch (a, b) {
        case (.null, .null): return true
        case (.text(let x), .text(let y)): return x == y
        case (.null, _), (_, .null), (.text, _), (_, .text): return false
        default:
            guard let x = a.realValue ?? a.integerValue.map(Double.init), let y = b.realValue ?? b.integerValue.map(Double.init) else { return false }
            return x == y
        }
    }
}
