import Foundation

extension Schema {
    /// Parses and checks a schema file's JSON text.
    ///
    /// Checks that every name is a plain SQL identifier, that op types name
    /// real fields with actions that fit their rules, and that search indexes
    /// name text fields; a bad schema is refused with `invalid_schema`.
    public static func load(json text: String) throws(ChronicleError) -> Schema {
        let root = try jsonObject(text)
        guard let name = root["schema"] as? String, isIdentifier(name) else { throw invalid("The schema needs a 'schema' name.") }
        guard let version = root["version"] as? Int, version >= 1 else { throw invalid("The schema needs a positive 'version'.") }
        let entities = try parseEntities(root["entities"] as? [[String: Any]] ?? [])
        let entityByName = Dictionary(uniqueKeysWithValues: entities.map { ($0.name, $0) })
        let ops = try parseOpTypes(root["ops"] as? [[String: Any]] ?? [], entityByName: entityByName)
        let plan = try parsePlan(root["plan"] as? [String: Any], entities: entities, entityByName: entityByName)
        let upcasters = try parseUpcasters(root["upcasters"] as? [[String: Any]] ?? [], ops: ops)
        let caps = try parseCaps(root["caps"], entityByName: entityByName)
        return Schema(name: name, version: version, entities: entities, ops: ops, plan: plan, caps: caps,
                      fingerprint: fingerprint(text), upcasters: upcasters)
    }

    /// The `caps` array: each names an entity, optionally one of its id fields (`per`), and a
    /// `maximum` of zero or more.
    private static func parseCaps(_ raw: Any?, entityByName: [String: EntitySpec]) throws(ChronicleError) -> [FreeTierCap] {
        guard let raw else { return [] }
        guard let list = raw as? [[String: Any]] else { throw invalid("'caps' must be an array of objects.") }
        var caps: [FreeTierCap] = []
        for (index, cap) in list.enumerated() {
            let at = "caps[\(index)]"
            guard let entityName = cap["entity"] as? String, let entity = entityByName[entityName] else {
                throw invalid("\(at) must name one of the schema's entities in 'entity'.")
            }
            guard let maximum = cap["maximum"] as? Int, maximum >= 0 else {
                throw invalid("\(at) needs a 'maximum' of zero or more rows.")
            }
            let per = cap["per"] as? String
            if cap["per"] != nil, per == nil || entity.field(per!)?.references == nil {
                throw invalid("\(at): 'per' must be one of \(entityName)'s id fields (a field that references another entity).")
            }
            let key = (entityName, per)
            guard !caps.contains(where: { ($0.entity, $0.per) == key }) else {
                throw invalid("\(at) caps \(entityName)\(per.map { " per \($0)" } ?? "") a second time.")
            }
            caps.append(FreeTierCap(entity: entityName, per: per, maximum: maximum))
        }
        return caps
    }

    /// An `invalid_schema` error with `message`.
    private static func invalid(_ message: String) -> ChronicleError { ChronicleError(.invalidSchema, message) }

    /// The schema text as a JSON object, or `invalid_schema` when it is not JSON or not an object.
    private static func jsonObject(_ text: String) throws(ChronicleError) -> [String: Any] {
        do {
            guard let object = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] else {
                throw ChronicleError(.invalidSchema, "A schema must be a JSON object.")
            }
            return object
        } catch let error as ChronicleError {
            throw error
        } catch {
            throw ChronicleError(.invalidSchema, "The schema is not valid JSON: \(error.localizedDescription)")
        }
    }

    // MARK: - Entities

    /// The `entities` array: each entity with its fields and search indexes, names unique,
    /// and every `references` naming an entity of the schema.
    private static func parseEntities(_ raws: [[String: Any]]) throws(ChronicleError) -> [EntitySpec] {
        var entities: [EntitySpec] = []
        for raw in raws { entities.append(try parseEntity(raw)) }
        guard Set(entities.map(\.name)).count == entities.count else { throw invalid("The schema repeats an entity name.") }
        let entityByName = Dictionary(uniqueKeysWithValues: entities.map { ($0.name, $0) })
        for entity in entities {
            for field in entity.fields where field.references != nil {
                guard field.type == .id, entityByName[field.references!] != nil else {
                    throw invalid("Field '\(entity.name).\(field.name)' references '\(field.references!)', which is not an entity.")
                }
            }
        }
        return entities
    }

    /// One entity: its name, its fields (names unique), then its search indexes over them.
    private static func parseEntity(_ raw: [String: Any]) throws(ChronicleError) -> EntitySpec {
        guard let entityName = raw["name"] as? String, isIdentifier(entityName) else {
            throw invalid("Every entity needs a lowercase identifier 'name'.")
        }
        var fields: [FieldSpec] = []
        for f in raw["fields"] as? [[String: Any]] ?? [] { fields.append(try parseField(f, entity: entityName)) }
        guard Set(fields.map(\.name)).count == fields.count else { throw invalid("Entity '\(entityName)' repeats a field name.") }
        var search: [SearchIndexSpec] = []
        for s in raw["search"] as? [[String: Any]] ?? [] {
            search.append(try parseSearchIndex(s, entity: entityName, fields: fields))
        }
        return EntitySpec(name: entityName, fields: fields, search: search)
    }

    /// One field of `entityName`: a valid, unreserved name, a type, and a merge rule that fits the type.
    private static func parseField(_ f: [String: Any], entity entityName: String) throws(ChronicleError) -> FieldSpec {
        guard let fieldName = f["name"] as? String, isIdentifier(fieldName),
              !reservedColumns.contains(fieldName), !fieldName.contains("__") else {
            throw invalid("Entity '\(entityName)' has a field without a valid name (reserved: \(reservedColumns.sorted())).")
        }
        guard let type = (f["type"] as? String).flatMap(FieldType.init(rawValue:)) else {
            throw invalid("Field '\(entityName).\(fieldName)' needs a 'type' (text, url, integer, real, boolean, timestamp, id).")
        }
        guard let rule = (f["rule"] as? String).flatMap(MergeRule.init(rawValue:)) else {
            throw invalid("Field '\(entityName).\(fieldName)' needs a merge 'rule' (\(MergeRule.allCases.map(\.rawValue).joined(separator: ", "))).")
        }
        if rule == .counter, type != .integer, type != .real {
            throw invalid("Counter field '\(entityName).\(fieldName)' must be an integer or real.")
        }
        if rule == .forwardOnly, type != .integer, type != .real, type != .timestamp {
            throw invalid("Forward-only field '\(entityName).\(fieldName)' must be numeric.")
        }
        return FieldSpec(
            name: fieldName, type: type, rule: rule,
            enumValues: f["enum"] as? [String],
            minimum: (f["min"] as? NSNumber)?.doubleValue,
            maximum: (f["max"] as? NSNumber)?.doubleValue,
            minLength: f["minLength"] as? Int,
            maxLength: f["maxLength"] as? Int,
            references: f["references"] as? String)
    }

    /// One search index of `entityName`: over text fields of it, or over the values of one set
    /// field; one weight per field; an owner that is an id field.
    private static func parseSearchIndex(_ s: [String: Any], entity entityName: String,
                                         fields: [FieldSpec]) throws(ChronicleError) -> SearchIndexSpec {
        guard let index = s["index"] as? String, isIdentifier(index) else { throw invalid("A search index of '\(entityName)' needs an 'index' name.") }
        let setField = s["set"] as? String
        let indexFields = setField.map { _ in ["value"] } ?? (s["fields"] as? [String] ?? [])
        guard !indexFields.isEmpty else { throw invalid("Search index '\(index)' names no fields.") }
        if let setField {
            guard let spec = fields.first(where: { $0.name == setField }), spec.isSet else {
                throw invalid("Search index '\(index)' names '\(setField)', which is not a set field of '\(entityName)'.")
            }
        } else {
            for field in indexFields {
                guard let spec = fields.first(where: { $0.name == field }), !spec.isSet,
                      [.text, .url].contains(spec.type) else {
                    throw invalid("Search index '\(index)' names '\(field)', which is not a text field of '\(entityName)'.")
                }
            }
        }
        let weights = (s["weights"] as? [NSNumber])?.map(\.doubleValue) ?? Array(repeating: 1, count: indexFields.count)
        guard weights.count == indexFields.count else { throw invalid("Search index '\(index)' needs one weight per field.") }
        let owner = s["owner"] as? String
        if let owner, fields.first(where: { $0.name == owner })?.type != .id {
            throw invalid("Search index '\(index)' has owner '\(owner)', which is not an id field.")
        }
        let holdsDocuments = setField == nil && indexFields.contains { name in
            (fields.first { $0.name == name }?.maxLength ?? 0) > SearchIndexSpec.documentLengthMin
        }
        return SearchIndexSpec(index: index, fields: indexFields, setField: setField, weights: weights,
                               requiresPremium: s["requiresPremium"] as? Bool ?? false, owner: owner,
                               holdsDocuments: holdsDocuments)
    }

    // MARK: - Op types

    /// The `ops` array: each op type checked against its entity, type@version pairs unique.
    private static func parseOpTypes(_ raws: [[String: Any]],
                                     entityByName: [String: EntitySpec]) throws(ChronicleError) -> [OpTypeSpec] {
        var ops: [OpTypeSpec] = []
        for raw in raws { ops.append(try parseOpType(raw, entityByName: entityByName)) }
        guard Set(ops.map { "\($0.type)@\($0.version)" }).count == ops.count else { throw invalid("The schema repeats an op type version.") }
        return ops
    }

    /// One op type: a type and version, a known entity, an action, defaults for fields the
    /// entity has, and the fields its action needs.
    private static func parseOpType(_ raw: [String: Any],
                                    entityByName: [String: EntitySpec]) throws(ChronicleError) -> OpTypeSpec {
        guard let type = raw["type"] as? String, !type.isEmpty, let opVersion = raw["version"] as? Int, opVersion >= 1 else {
            throw invalid("Every op type needs a 'type' and a positive 'version'.")
        }
        let label = "\(type)@\(opVersion)"
        guard let entityName = raw["entity"] as? String, let entity = entityByName[entityName] else {
            throw invalid("Op type '\(label)' names no known 'entity'.")
        }
        guard let action = (raw["action"] as? String).flatMap(OpAction.init(rawValue:)) else {
            throw invalid("Op type '\(label)' needs an 'action'.")
        }
        let opFields = raw["fields"] as? [String] ?? []
        let required = Set(raw["required"] as? [String] ?? [])
        var defaults = Payload()
        for (key, rawValue) in raw["defaults"] as? [String: Any] ?? [:] {
            guard entity.field(key) != nil else { throw invalid("Op type '\(label)' has a default for unknown field '\(key)'.") }
            do { defaults[key] = try CanonicalJSON.value(fromJSON: rawValue, key: key) } catch { throw invalid("Op type '\(label)': \(error.message)") }
        }
        let field = raw["field"] as? String
        let valueKey = raw["value"] as? String
        try checkAction(action, of: label, entity: entity, fields: opFields, required: required, field: field, valueKey: valueKey)
        return OpTypeSpec(type: type, version: opVersion, entity: entityName, action: action, fields: opFields,
                          required: required, defaults: defaults, field: field, valueKey: valueKey)
    }

    /// Whether op type `label` names what its action needs: settable fields (and lists every
    /// required one) for create, upsert and set; a set field and a value key for add and remove;
    /// a counter field and a value key for increment; a soft-delete field for delete and restore.
    private static func checkAction(_ action: OpAction, of label: String, entity: EntitySpec, fields opFields: [String],
                                    required: Set<String>, field: String?, valueKey: String?) throws(ChronicleError) {
        let entityName = entity.name
        switch action {
        case .create, .upsert, .set:
            for key in opFields {
                guard let spec = entity.field(key), !spec.isSet, spec.rule != .counter else {
                    throw invalid("Op type '\(label)' sets '\(key)', which is not a settable field of '\(entityName)'.")
                }
            }
            guard required.isSubset(of: Set(opFields)) else { throw invalid("Op type '\(label)' requires a field it does not list.") }
        case .add, .remove:
            guard let field, entity.field(field)?.isSet == true, let valueKey, isIdentifier(valueKey) else {
                throw invalid("Op type '\(label)' must name a set 'field' and a 'value' key.")
            }
        case .increment:
            guard let field, entity.field(field)?.rule == .counter, let valueKey, isIdentifier(valueKey) else {
                throw invalid("Op type '\(label)' must name a counter 'field' and a 'value' key.")
            }
        case .delete, .restore:
            guard entity.hasSoftDelete else { throw invalid("Op type '\(label)' needs a 'deleted_at' field on '\(entityName)'.") }
        }
    }

    // MARK: - Plan and upcasters

    /// The `plan` object, when given (an entity, one of its fields, the premium value); it must
    /// be given when any search index requires premium.
    private static func parsePlan(_ p: [String: Any]?, entities: [EntitySpec],
                                  entityByName: [String: EntitySpec]) throws(ChronicleError) -> PlanSpec? {
        var plan: PlanSpec?
        if let p {
            guard let entityName = p["entity"] as? String, let field = p["field"] as? String,
                  entityByName[entityName]?.field(field) != nil, let premium = p["premium"] as? String else {
                throw invalid("The 'plan' must name an entity, one of its fields and the premium value.")
            }
            plan = PlanSpec(entity: entityName, field: field, premium: premium)
        }
        if plan == nil, entities.contains(where: { $0.search.contains(where: \.requiresPremium) }) {
            throw invalid("A search index requires premium but the schema declares no 'plan'.")
        }
        return plan
    }

    /// The `upcasters` array: each from a `type@version` to one of `ops`, with its renames,
    /// drops and values set.
    private static func parseUpcasters(_ raws: [[String: Any]], ops: [OpTypeSpec]) throws(ChronicleError) -> [Upcaster] {
        var upcasters: [Upcaster] = []
        for raw in raws {
            let (fromType, fromVersion) = try upcasterEnd(raw, "from")
            let (toType, toVersion) = try upcasterEnd(raw, "to")
            guard ops.contains(where: { $0.type == toType && $0.version == toVersion }) else {
                throw invalid("Upcaster \(fromType)@\(fromVersion) → \(toType)@\(toVersion) targets an op type this schema version does not have.")
            }
            var set = Payload()
            for (key, rawValue) in raw["set"] as? [String: Any] ?? [:] {
                do { set[key] = try CanonicalJSON.value(fromJSON: rawValue, key: key) } catch { throw invalid("Upcaster from \(fromType)@\(fromVersion): \(error.message)") }
            }
            upcasters.append(Upcaster(fromType: fromType, fromVersion: fromVersion, toType: toType, toVersion: toVersion,
                                      rename: raw["rename"] as? [String: String] ?? [:], drop: raw["drop"] as? [String] ?? [], set: set))
        }
        return upcasters
    }

    /// An upcaster's `from` or `to` (`key`), read as "type@version".
    private static func upcasterEnd(_ raw: [String: Any], _ key: String) throws(ChronicleError) -> (String, Int) {
        guard let text = raw[key] as? String, let at = text.lastIndex(of: "@"), let v = Int(text[text.index(after: at)...]), v >= 1 else {
            throw invalid("Every upcaster needs '\(key)' as \"type@version\".")
        }
        return (String(text[..<at]), v)
    }

    /// Loads a schema's whole history (oldest file first) and returns the newest version
    /// with the upcasters of every step, so ops written under any earlier version read in
    /// the current shape. Each step's upcasters must start from op types of the version
    /// before it; versions must count up by one.
    public static func load(history texts: [String]) throws(ChronicleError) -> Schema {
        var versions: [Schema] = []
        for text in texts { versions.append(try load(json: text)) }
        guard let newest = versions.last else { throw ChronicleError(.invalidSchema, "A schema history needs at least one version.") }
        var chain: [Upcaster] = []
        for (previous, next) in zip(versions, versions.dropFirst()) {
            guard next.name == previous.name, next.version == previous.version + 1 else {
                throw ChronicleError(.invalidSchema, "Schema history must go \(previous.name) v\(previous.version) → v\(previous.version + 1); found \(next.name) v\(next.version).")
            }
            for upcaster in next.upcasters where previous.opType(upcaster.fromType, version: upcaster.fromVersion) == nil {
                throw ChronicleError(.invalidSchema, "\(next.name) v\(next.version): upcaster from \(upcaster.fromType)@\(upcaster.fromVersion), which v\(previous.version) does not have.")
            }
            // Every op type of the previous version is either still current or upcast.
            for op in previous.ops where next.opType(op.type, version: op.version) == nil
                && !next.upcasters.contains(where: { $0.fromType == op.type && $0.fromVersion == op.version }) {
                throw ChronicleError(.invalidSchema, "\(next.name) v\(next.version) drops \(op.type)@\(op.version) without an upcaster; ops of every earlier version must stay readable.")
            }
            chain += next.upcasters
        }
        return Schema(name: newest.name, version: newest.version, entities: newest.entities, ops: newest.ops, plan: newest.plan,
                      caps: newest.caps, fingerprint: newest.fingerprint, upcasters: chain)
    }

    /// The schema's JSON text and the revision of the rules that fold ops into the projection
    /// (`Materializer.rulesRevision`), hashed: a store records it, and rebuilds its projection
    /// when either changed.
    static func fingerprint(_ text: String) -> String {
        SHA256Hasher.hex(text + "\u{0}" + Materializer.rulesRevision)
    }

    /// Columns every entity table has.
    public static let reservedColumns: Set<String> = ["id", "created_at", "rowid", "value"]

    static func isIdentifier(_ s: String) -> Bool {
        guard let first = s.utf8.first, (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(first) else { return false }
        return s.utf8.allSatisfy { c in
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(c) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(c) || c == UInt8(ascii: "_")
        } && s.utf8.count <= 64
    }
}

extension Schema {
    /// The read-it-later reference schema: its whole history (`Schemas/readitlater/v1.json`,
    /// `v2.json`, …), read as the newest version with upcasters from every earlier one.
    public static let readItLater: Schema = builtin(history: ["readitlater/v1.json", "readitlater/v2.json", "readitlater/v3.json"])
    /// The field-service schema, `Schemas/fieldservice/v2.json` (v2: job notes are `mergeOrAsk`).
    public static let fieldService: Schema = builtin(history: ["fieldservice/v1.json", "fieldservice/v2.json"])

    /// Every schema compiled into this build.
    public static var builtIn: [Schema] { [readItLater, fieldService] }

    /// Every schema compiled into this build, by name.
    public static func named(_ name: String) -> Schema? {
        switch name {
        case "readitlater": readItLater
        case "fieldservice": fieldService
        default: nil
        }
    }

    /// A built-in schema as an earlier build of Chronicle had it: its history up to `version`
    /// (an app not updated yet, in tests and simulations); nil past its newest version.
    public static func named(_ name: String, version: Int) -> Schema? {
        guard let newest = named(name), (1...newest.version).contains(version) else { return nil }
        if version == newest.version { return newest }
        return builtin(history: (1...version).map { "\(name)/v\($0).json" })
    }

    private static func builtin(history paths: [String]) -> Schema {
        let texts = paths.map { path -> String in
            guard let text = EmbeddedSchemas.files[path] else { preconditionFailure("Schemas/\(path) was not embedded in the build") }
            return text
        }
        do { return try load(history: texts) } catch { preconditionFailure("Schemas/\(paths.last!) history is invalid: \(error)") }
    }

    private static func builtin(_ path: String) -> Schema {
        guard let text = EmbeddedSchemas.files[path] else { preconditionFailure("Schemas/\(path) was not embedded in the build") }
        do { return try load(json: text) } catch { preconditionFailure("Schemas/\(path) is invalid: \(error)") }
    }
}
