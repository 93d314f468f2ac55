import Foundation

extension CanonicalJSON {
    /// Parses a flat JSON object of scalars straight from UTF-8 bytes.
    ///
    /// Replaying a large log is dominated by decoding payloads, so this reads
    /// the bytes directly rather than going through `JSONSerialization` and
    /// `NSNumber` (which also turns some 64-bit integers into doubles). What
    /// it refuses is diagnosed by `JSONSerialization` for a precise message.
    public static func decodePayload(utf8 bytes: UnsafeRawBufferPointer) throws(ChronicleError) -> Payload {
        try parse(bytes).get()
    }

    private static func parse(_ bytes: UnsafeRawBufferPointer) -> Result<Payload, ChronicleError> {
        var parser = FlatParser(bytes: bytes)
        if let payload = parser.parseObject() { return .success(payload) }
        return .failure(diagnose(bytes))
    }

    /// Parses a flat JSON object of scalars.
    public static func decodePayload(_ text: String) throws(ChronicleError) -> Payload {
        var copy = text
        return try copy.withUTF8 { parse(UnsafeRawBufferPointer($0)) }.get()
    }

    private static func diagnose(_ bytes: UnsafeRawBufferPointer) -> ChronicleError {
        guard let object = try? JSONSerialization.jsonObject(with: Data(bytes), options: [.fragmentsAllowed]) else {
            return ChronicleError(.malformedPayload, "The payload is not valid JSON.")
        }
        guard let dictionary = object as? [String: Any] else {
            return ChronicleError(.malformedPayload, "The payload must be a JSON object.")
        }
        for (key, value) in dictionary.sorted(by: { $0.key < $1.key }) where value is [Any] || value is [String: Any] {
            return ChronicleError(.malformedPayload, "The payload field '\(key)' must be a string, number, boolean or null.")
        }
        return ChronicleError(.malformedPayload, "The payload could not be read as a flat JSON object.")
    }
}

/// A fast path for `{"key":scalar,…}`. Returns nil rather than guessing.
private struct FlatParser {
    let bytes: UnsafeRawBufferPointer
    var index = 0

    init(bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    private var current: UInt8? { index < bytes.count ? bytes[index] : nil }

    private mutating func skipSpace() {
        while let c = current, c == 0x20 || c == 0x0A || c == 0x0D || c == 0x09 { index += 1 }
    }

    private mutating func atEnd() -> Bool {
        skipSpace()
        return index == bytes.count
    }

    mutating func parseObject() -> Payload? {
        skipSpace()
        guard current == UInt8(ascii: "{") else { return nil }
        index += 1
        var payload = Payload()
        skipSpace()
        if current == UInt8(ascii: "}") { index += 1; return atEnd() ? payload : nil }
        while true {
            skipSpace()
            guard let key = parseString() else { return nil }
            skipSpace()
            guard current == UInt8(ascii: ":") else { return nil }
            index += 1
            skipSpace()
            guard let value = parseValue() else { return nil }
            payload[key] = value
            skipSpace()
            switch current {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "}"): index += 1; return atEnd() ? payload : nil
            default: return nil
            }
        }
    }

    private mutating func parseValue() -> Value? {
        switch current {
        case UInt8(ascii: "\""): return parseString().map(Value.text)
        case UInt8(ascii: "t"): return literal("true") ? .bool(true) : nil
        case UInt8(ascii: "f"): return literal("false") ? .bool(false) : nil
        case UInt8(ascii: "n"): return literal("null") ? .null : nil
        default: return parseNumber()
        }
    }

    private mutating func literal(_ word: StaticString) -> Bool {
        let count = word.utf8CodeUnitCount
        guard index + count <= bytes.count else { return false }
        for offset in 0..<count where bytes[index + offset] != word.utf8Start[offset] { return false }
        index += count
        return true
    }

    private mutating func parseNumber() -> Value? {
        let start = index
        var isReal = false
        while let c = current, Self.isNumberByte(c) {
            if c == UInt8(ascii: ".") || c == UInt8(ascii: "e") || c == UInt8(ascii: "E") { isReal = true }
            index += 1
        }
        guard index > start else { return nil }
        let text = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        if !isReal, let integer = Int64(text) { return .integer(integer) }
        guard let real = Double(text), real.isFinite else { return nil }
        return .real(real)
    }

    private static func isNumberByte(_ c: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(c) || c == UInt8(ascii: "-") || c == UInt8(ascii: "+")
            || c == UInt8(ascii: ".") || c == UInt8(ascii: "e") || c == UInt8(ascii: "E")
    }

    private mutating func parseString() -> String? {
        guard current == UInt8(ascii: "\"") else { return nil }
        index += 1
        let start = index
        var escaped = false
        while let c = current, c != UInt8(ascii: "\"") {
            if c == UInt8(ascii: "\\") { escaped = true; index += 2 } else { index += 1 }
        }
        guard index < bytes.count else { return nil }
        let raw = UnsafeRawBufferPointer(rebasing: bytes[start..<index])
        index += 1
        return escaped ? Self.unescape(raw) : String(decoding: raw, as: UTF8.self)
    }

    private static func unescape(_ raw: UnsafeRawBufferPointer) -> String? {
        var out = [UInt8]()
        out.reserveCapacity(raw.count)
        var i = 0
        var pendingHigh: UInt32?
        func appendScalar(_ value: UInt32) -> Bool {
            guard let scalar = Unicode.Scalar(value) else { return false }
            out.append(contentsOf: Array(String(Character(scalar)).utf8))
            return true
        }
        while i < raw.count {
            let c = raw[i]
            guard c == UInt8(ascii: "\\") else {
                if pendingHigh != nil { return nil }
                out.append(c)
                i += 1
                continue
            }
            guard i + 1 < raw.count else { return nil }
            let e = raw[i + 1]
            i += 2
            switch e {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(e)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "u"):
                guard i + 4 <= raw.count,
                      let unit = UInt32(String(decoding: UnsafeRawBufferPointer(rebasing: raw[i..<i + 4]), as: UTF8.self), radix: 16) else { return nil }
                i += 4
                if (0xD800...0xDBFF).contains(unit) {
                    pendingHigh = unit
                    continue
                }
                if (0xDC00...0xDFFF).contains(unit) {
                    guard let high = pendingHigh else { return nil }
                    pendingHigh = nil
                    guard appendScalar(0x10000 + ((high - 0xD800) << 10) + (unit - 0xDC00)) else { return nil }
                    continue
                }
                guard appendScalar(unit) else { return nil }
            default: return nil
            }
            if pendingHigh != nil { return nil }
        }
        return pendingHigh == nil ? String(decoding: out, as: UTF8.self) : nil
    }
}
