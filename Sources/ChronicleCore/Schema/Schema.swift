import Foundation

/// A field of an entity type: its value type, merge rule and validation limits.
public struct FieldSpec: Sendable {
    public let name: String
    public let type: FieldType
    public let rule: MergeRule
    public let enumValues: [String]?
    public let minimum: Double?
    public let maximum: Double?
    public let minLength: Int?
    public let maxLength: Int?
    /// For `id` fields: the entity type the id must name.
    public let references: String?

    public var isSet: Bool { rule == .set }
    /// `forwardOnly` keeps who set the value and when, by the setter's clock;
    /// `mergeOrAsk` keeps who set it and at which server seq (NULL while pending).
    public var deviceColumn: String { name + "__device" }
    public var timeColumn: String { name + "__time" }
    public var seqColumn: String { name + "__seq" }

    /// The bookkeeping columns a field's rule keeps beside its value, in table order.
    public var ruleColumns: [String] {
        switch rule {
        case .forwardOnly: [deviceColumn, timeColumn]
        case .mergeOrAsk: [deviceColumn, seqColumn]
        default: []
        }
    }
}

/// A full-text index over some fields of an entity, or over a set field.
public struct SearchIndexSpec: Sendable {
    public let index: String
    public let fields: [String]
    public let setField: String?
    public let weights: [Double]
    /// Indexed only while the library's plan is premium.
    public let requiresPremium: Bool
    /// The `id` field naming the row a hit belongs to (a highlight's article);
    /// nil when hits belong to the row itself.
    public let owner: String?
    /// Whether a field of the index may hold a whole document: a `maxLength` over
    /// `documentLengthMin` characters (article text, transcripts).
    public let holdsDocuments: Bool

    /// Text fields allowed more characters than this hold documents (`holdsDocuments`).
    public static let documentLengthMin = 100_000
}

/// One entity of a schema: its fields, search indexes and op types.
public struct EntitySpec: Sendable {
    public let name: String
    public let fields: [FieldSpec]
    public let search: [SearchIndexSpec]
    private let byName: [String: Int]

    init(name: String, fields: [FieldSpec], search: [SearchIndexSpec]) {
        self.name = name
        self.fields = fields
        self.search = search
        self.byName = Dictionary(uniqueKeysWithValues: fields.enumerated().map { ($1.name, $0) })
    }

    public var table: String { name }
    public func field(_ name: String) -> FieldSpec? { byName[name].map { fields[$0] } }
    public var scalarFields: [FieldSpec] { fields.filter { !$0.isSet } }
    public var setFields: [FieldSpec] { fields.filter(\.isSet) }
    public func setTable(_ field: FieldSpec) -> String { "\(name)_\(field.name)" }
    public var hasSoftDelete: Bool { byName["deleted_at"] != nil }
}

/// One version of one op type.
public struct OpTypeSpec: Sendable {
    public let type: String
    public let version: Int
    public let entity: String
    public let action: OpAction
    /// For create/upsert/set: the payload keys, each an entity field.
    public let fields: [String]
    public let required: Set<String>
    /// Values a create gives fields the payload leaves out.
    public let defaults: Payload
    /// For add/remove/increment: the field acted on and the payload key holding the value.
    public let field: String?
    public let valueKey: String?
}

/// Which field holds the plan tier that gates premium-only search indexes.
public struct PlanSpec: Sendable {
    public let entity: String
    public let field: String
    public let premium: String
}

/// An application schema: entity types, fields with merge rules, search
/// indexes and op types. Defined once, as data, under `Schemas/`.
public struct Schema: Sendable {
    public let name: String
    public let version: Int
    public let entities: [EntitySpec]
    public let ops: [OpTypeSpec]
    public let plan: PlanSpec?
    /// The limits a free library lives under, as the schema declares them (none by default).
    public let caps: [FreeTierCap]
    /// Upcasters from every earlier version of this schema's op types, oldest first.
    public let upcasters: [Upcaster]
    let upcasterIndex: [String: Int]
    /// SHA-256 of the schema file's text; stored in the device store so a store
    /// is never opened with a different schema by mistake.
    public let fingerprint: String
    private let entityIndex: [String: Int]
    private let opIndex: [String: [Int: Int]]

    public func entity(_ name: String) -> EntitySpec? { entityIndex[name].map { entities[$0] } }

    /// The op type spec for `type@version`.
    public func opType(_ type: String, version: Int) -> OpTypeSpec? { opNumber(type, version: version).map { ops[$0] } }

    /// The position of `type@version` in `ops`: a small integer key for per-op-type caches.
    public func opNumber(_ type: String, version: Int) -> Int? { opIndex[type]?[version] }

    /// The newest version of an op type.
    public func currentOpType(_ type: String) -> OpTypeSpec? {
        opIndex[type]?.max { $0.key < $1.key }.map { ops[$0.value] }
    }

    init(name: String, version: Int, entities: [EntitySpec], ops: [OpTypeSpec], plan: PlanSpec?, caps: [FreeTierCap] = [],
         fingerprint: String, upcasters: [Upcaster] = []) {
        self.caps = caps
        self.upcasters = upcasters
        var index: [String: Int] = [:]
        for (offset, upcaster) in upcasters.enumerated() { index["\(upcaster.fromType)@\(upcaster.fromVersion)"] = offset }
        self.upcasterIndex = index
        self.name = name
        self.version = version
        self.entities = entities
        self.ops = ops
        self.plan = plan
        self.fingerprint = fingerprint
        self.entityIndex = Dictionary(uniqueKeysWithValues: entities.enumerated().map { ($1.name, $0) })
        var opIndex: [String: [Int: Int]] = [:]
        for (number, op) in ops.enumerated() { opIndex[op.type, default: [:]][op.version] = number }
        self.opIndex = opIndex
    }
}
