import Foundation

extension Schema {
    /// Checks an op's payload against its op type and returns the payload in
    /// canonical form (ids lowercased, whole reals as integers for integer fields).
    ///
    /// What needs the store (does the entity exist, is it deleted) is checked
    /// by the store; everything that needs only the schema is checked here.
    public func validate(type: String, version: Int, payload: Payload, serverAuthored: Bool)
        throws(ChronicleError) -> (spec: OpTypeSpec, payload: Payload) {
        guard let spec = opType(type, version: version) else {
            if ops.contains(where: { $0.type == type }) {
                throw ChronicleError(.unknownOpType, "Op type '\(type)' has no version \(version) in schema \(name) v\(self.version).")
            }
            throw ChronicleError(.unknownOpType, "Unknown op type '\(type)' in schema \(name).")
        }
        let entity = entity(spec.entity)!
        var normalized = Payload(minimumCapacity: payload.count)
        switch spec.action {
        case .create, .upsert, .set:
            // Checked unsorted (this runs for every op a server accepts); the error names the
            // first offender in sorted order, as it always did.
            if payload.keys.contains(where: { !spec.fields.contains($0) }) {
                let key = payload.keys.sorted().first { !spec.fields.contains($0) }!
                throw ChronicleError(.unknownField, "'\(type)' has no field '\(key)'; it takes \(spec.fields.joined(separator: ", ")).")
            }
            if spec.required.contains(where: { payload[$0] == nil || payload[$0]!.isNull }) {
                let key = spec.required.sorted().first { payload[$0] == nil || payload[$0]!.isNull }!
                throw ChronicleError(.missingField, "'\(type)' needs '\(key)'.")
            }
            if spec.action == .set, payload.isEmpty {
                throw ChronicleError(.missingField, "'\(type)' needs at least one of \(spec.fields.joined(separator: ", ")).")
            }
            for (key, value) in payload {
                let field = entity.field(key)!
                if field.rule == .serverOnly, !serverAuthored {
                    throw ChronicleError(.serverOnlyField, "'\(entity.name).\(key)' is decided by the server; a device cannot set it.")
                }
                normalized[key] = try check(value, for: field, in: entity, required: spec.required.contains(key))
            }
        case .add, .remove, .increment:
            let key = spec.valueKey!
            if payload.count > 1 || (payload.count == 1 && payload[key] == nil) {
                let extra = payload.keys.sorted().first { $0 != key }!
                throw ChronicleError(.unknownField, "'\(type)' has no field '\(extra)'; it takes \(key).")
            }
            guard let value = payload[key], !value.isNull else {
                throw ChronicleError(.missingField, "'\(type)' needs '\(key)'.")
            }
            let field = entity.field(spec.field!)!
            normalized[key] = try check(value, for: field, in: entity, required: true, isDelta: spec.action == .increment)
        case .delete, .restore:
            if let extra = payload.keys.sorted().first {
                throw ChronicleError(.unknownField, "'\(type)' takes no fields, but was given '\(extra)'.")
            }
        }
        return (spec, normalized)
    }

    private func check(_ value: Value, for field: FieldSpec, in entity: EntitySpec, required: Bool,
                       isDelta: Bool = false) throws(ChronicleError) -> Value {
        // Built only for an error: this runs for every field of every op.
        var label: String { "\(entity.name).\(field.name)" }
        if value.isNull {
            if required { throw ChronicleError(.missingField, "'\(label)' cannot be null.") }
            return .null
        }
        func invalid(_ what: String) -> ChronicleError { ChronicleError(.invalidValue, "'\(label)' \(what).") }
        switch field.type {
        case .text, .url:
            guard let text = value.textValue else { throw invalid("must be a string") }
            // Lengths are in characters. A character takes at least one UTF-8 byte, so the byte
            // count settles most checks without walking the text's grapheme clusters.
            let bytes = text.utf8.count
            if let minLength = field.minLength, bytes < minLength || (minLength > 1 && text.count < minLength) {
                throw invalid(minLength == 1 ? "cannot be empty" : "must be at least \(minLength) characters")
            }
            if let maxLength = field.maxLength, bytes > maxLength, case let count = text.count, count > maxLength {
                throw invalid("must be at most \(maxLength) characters (got \(count))")
            }
            if let allowed = field.enumValues, !allowed.contains(text) {
                throw invalid("must be one of \(allowed.joined(separator: ", ")) (got \(CanonicalJSON.quote(text)))")
            }
            if field.type == .url, !Schema.isWebURL(text) {
                throw invalid("must be an http or https URL with a host (got \(CanonicalJSON.quote(text)))")
            }
            return .text(text)
        case .integer, .timestamp:
            guard let i = value.integerValue, value.textValue == nil else { throw invalid("must be a whole number") }
            if case .bool = value { throw invalid("must be a whole number") }
            if !isDelta { try checkRange(Double(i), field, label) }
            return .integer(i)
        case .real:
            guard let d = value.realValue, d.isFinite else { throw invalid("must be a finite number") }
            if !isDelta { try checkRange(d, field, label) }
            return .real(d)
        case .boolean:
            guard case .bool(let b) = value else { throw invalid("must be true or false") }
            return .bool(b)
        case .id:
            guard let text = value.textValue, let uuid = UUID(uuidString: text) else { throw invalid("must be a UUID") }
            return .text(uuid.lowercased)
        }
    }

    private func checkRange(_ d: Double, _ field: FieldSpec, _ label: String) throws(ChronicleError) {
        if let minimum = field.minimum, d < minimum {
            throw ChronicleError(.invalidValue, "'\(label)' must be at least \(CanonicalJSON.format(minimum).replacingOccurrences(of: ".0", with: "")) (got \(CanonicalJSON.format(d))).")
        }
        if let maximum = field.maximum, d > maximum {
            throw ChronicleError(.invalidValue, "'\(label)' must be at most \(CanonicalJSON.format(maximum).replacingOccurrences(of: ".0", with: "")) (got \(CanonicalJSON.format(d))).")
        }
    }

    /// An absolute http(s) URL with a host and no spaces.
    public static func isWebURL(_ text: String) -> Bool {
        guard !containsWhitespace(text), let components = URLComponents(string: text),
              let scheme = components.scheme?.lowercased(), scheme == "http" || scheme == "https",
              let host = components.host, !host.isEmpty else { return false }
        return true
    }

    /// `text.contains { $0.isWhitespace }`, with ASCII text read byte by byte: there a
    /// character is whitespace exactly when it starts with a tab, line feed, vertical tab,
    /// form feed, carriage return or space.
    static func containsWhitespace(_ text: String) -> Bool {
        var ascii = true
        for byte in text.utf8 {
            if byte >= 0x80 { ascii = false; break }
            if byte == 0x20 || (0x09...0x0D).contains(byte) { return true }
        }
        return ascii ? false : text.contains { $0.isWhitespace }
    }
}

extension Schema {
    /// The row ids an op's payload names (fields that reference another entity, and a
    /// set op's value when its set holds ids), with the field that names each.
    public func references(of spec: OpTypeSpec, payload: Payload) -> [(field: FieldSpec, id: String)] {
        guard let entity = entity(spec.entity) else { return [] }
        var found: [(field: FieldSpec, id: String)] = []
        for (key, value) in payload.sorted(by: { $0.key < $1.key }) {
            guard case .text(let text) = value else { continue }
            if let field = entity.field(key), field.references != nil, spec.fields.contains(key) { found.append((field, text)) }
        }
        if let valueKey = spec.valueKey, let field = spec.field.flatMap(entity.field), field.references != nil,
           case .text(let text)? = payload[valueKey] {
            found.append((field, text))
        }
        return found
    }
}
