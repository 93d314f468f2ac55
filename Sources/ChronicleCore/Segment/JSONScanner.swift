import Foundation

/// A strict, non-recursive JSON tokenizer over UTF-8 bytes (RFC 8259).
///
/// Callers drive it through the shape they expect, so nesting never goes
/// deeper than that shape and nothing is built that will be thrown away.
/// Unlike `JSONSerialization` on Linux, it tells `1` from `1.0`: a number with
/// a fraction or an exponent is a real, any other an integer (which must fit
/// in 64 bits).
struct JSONScanner {
    let bytes: UnsafeRawBufferPointer
    private(set) var offset = 0
    let subject: String

    init(_ bytes: UnsafeRawBufferPointer, subject: String = "JSON segment") {
        self.bytes = bytes
        self.subject = subject
    }

    func error(_ sentence: String, at position: Int? = nil) -> ChronicleError {
        ChronicleError(.malformedSegment, "The \(subject) is malformed at byte \(position ?? offset): \(sentence)")
    }

    // MARK: - Structure

    mutating func skipWhitespace() {
        while offset < bytes.count {
            switch bytes[offset] {
            case 0x20, 0x0A, 0x0D, 0x09: offset += 1
            default: return
            }
        }
    }

    /// The next significant byte, not consumed; nil at the end.
    mutating func peek() -> UInt8? {
        skipWhitespace()
        return offset < bytes.count ? bytes[offset] : nil
    }

    mutating func isAtEnd() -> Bool { peek() == nil }

    /// Consumes `byte` if it comes next.
    mutating func consume(_ byte: UInt8) -> Bool {
        guard peek() == byte else { return false }
        offset += 1
        return true
    }

    mutating func expect(_ byte: UInt8, _ what: String) throws(ChronicleError) {
        guard consume(byte) else { throw error("expected \(what), found \(describeNext()).") }
    }

    /// After a member or element: true for `,` (another follows), false for the closing byte.
    mutating func another(closing: UInt8, in container: @autoclosure () -> String) throws(ChronicleError) -> Bool {
        if consume(UInt8(ascii: ",")) { return true }
        if consume(closing) { return false }
        throw error("expected ',' or '\(Character(Unicode.Scalar(closing)))' in \(container()), found \(describeNext()).")
    }

    /// `"key":`, returning the key.
    mutating func key(in container: @autoclosure () -> String) throws(ChronicleError) -> String {
        guard peek() == UInt8(ascii: "\"") else { throw error("expected a key in \(container()), found \(describeNext()).") }
        let key = try string()
        try expect(UInt8(ascii: ":"), "':' after the key \"\(key)\"")
        return key
    }

    /// What comes next, for messages: "an object", "the number 12", "the end of the input".
    mutating func describeNext() -> String {
        guard let byte = peek() else { return "the end of the input" }
        switch byte {
        case UInt8(ascii: "{"): return "an object"
        case UInt8(ascii: "["): return "an array"
        case UInt8(ascii: "\""): return "a string"
        case UInt8(ascii: "t"), UInt8(ascii: "f"): return "a boolean"
        case UInt8(ascii: "n"): return "null"
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return "a number"
        case 0x21...0x7E: return "'\(Character(Unicode.Scalar(byte)))'"
        default: return "the byte 0x" + String(byte, radix: 16)
        }
    }

    /// Skips one value of any shape, checking its grammar (objects and arrays at most
    /// 64 deep); returns the byte range it took, for a reader of that part.
    @discardableResult
    mutating func skipValue(depth: Int = 0) throws(ChronicleError) -> Range<Int> {
        guard depth < 64 else { throw error("values are nested more than 64 deep.") }
        _ = peek()
        let start = offset
        switch peek() {
        case UInt8(ascii: "{"):
            offset += 1
            if !consume(UInt8(ascii: "}")) {
                repeat {
                    _ = try key(in: "an object")
                    try skipValue(depth: depth + 1)
                } while try another(closing: UInt8(ascii: "}"), in: "an object")
            }
        case UInt8(ascii: "["):
            offset += 1
            if !consume(UInt8(ascii: "]")) {
                repeat { try skipValue(depth: depth + 1) } while try another(closing: UInt8(ascii: "]"), in: "an array")
            }
        default:
            _ = try scalar("a value")
        }
        return start..<offset
    }

    /// An object of scalars, `{"key":scalar,…}`, each key once: an op's payload.
    mutating func flatObject() throws(ChronicleError) -> Payload {
        try expect(UInt8(ascii: "{"), "'{'")
        var payload = Payload()
        if consume(UInt8(ascii: "}")) { return payload }
        repeat {
            let keyStart = offset
            let key = try key(in: "a payload")
            let value = try scalar("the payload field '\(key)'")
            guard payload.updateValue(value, forKey: key) == nil else {
                throw error("the payload names the key '\(key)' twice.", at: keyStart)
            }
        } while try another(closing: UInt8(ascii: "}"), in: "a payload")
        return payload
    }

    // MARK: - Scalars

    /// A string, number, boolean or null; `name` says whose value it is when
    /// an object or array (or anything else) stands there instead.
    mutating func scalar(_ name: @autoclosure () -> String) throws(ChronicleError) -> Value {
        switch peek() ?? 0 {
        case UInt8(ascii: "\""): return .text(try string())
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try number()
        default: throw error("\(name()) must be a string, number, boolean or null, not \(describeNext()).")
        }
    }

    private mutating func literal(_ word: StaticString) throws(ChronicleError) {
        let count = word.utf8CodeUnitCount
        guard count <= bytes.count - offset,
              memcmp(bytes.baseAddress! + offset, word.utf8Start, count) == 0 else {
            throw error("expected '\(word)'.")
        }
        offset += count
    }

    /// A number per the JSON grammar: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`.
    mutating func number() throws(ChronicleError) -> Value {
        let start = offset
        let negative = bytes[offset] == UInt8(ascii: "-")
        if negative { offset += 1 }
        let integerStart = offset
        try digits("a digit")
        if bytes[integerStart] == UInt8(ascii: "0") && offset - integerStart > 1 {
            throw error("a number may not have leading zeros.", at: start)
        }
        let integerEnd = offset
        var isReal = false
        if offset < bytes.count && bytes[offset] == UInt8(ascii: ".") {
            isReal = true
            offset += 1
            try digits("a digit after the decimal point")
        }
        if offset < bytes.count && (bytes[offset] | 0x20) == UInt8(ascii: "e") {
            isReal = true
            offset += 1
            if offset < bytes.count && (bytes[offset] == UInt8(ascii: "+") || bytes[offset] == UInt8(ascii: "-")) { offset += 1 }
            try digits("a digit in the exponent")
        }
        if !isReal {
            // Accumulate negatively so Int64.min parses.
            var value: Int64 = 0
            for i in integerStart..<integerEnd {
                let (times10, o1) = value.multipliedReportingOverflow(by: 10)
                let (next, o2) = times10.subtractingReportingOverflow(Int64(bytes[i] &- UInt8(ascii: "0")))
                guard !o1 && !o2 else { throw error("the integer does not fit in 64 bits.", at: start) }
                value = next
            }
            if negative { return .integer(value) }
            guard value != Int64.min else { throw error("the integer does not fit in 64 bits.", at: start) }
            return .integer(-value)
        }
        let text = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<offset]), as: UTF8.self)
        guard let real = Double(text), real.isFinite else {
            throw error("the number \(text) is out of range for a 64-bit real.", at: start)
        }
        return .real(real)
    }

    private mutating func digits(_ what: StaticString) throws(ChronicleError) {
        let start = offset
        while offset < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[offset]) { offset += 1 }
        guard offset > start else { throw error("expected \(what) in a number.") }
    }

    /// A string: valid UTF-8, no raw control characters, escapes per RFC 8259
    /// (a `\u` surrogate must be half of a pair).
    mutating func string() throws(ChronicleError) -> String {
        let start = offset
        offset += 1  // the opening quote, checked by the caller
        let contentStart = offset
        while offset < bytes.count {
            let byte = bytes[offset]
            if byte == UInt8(ascii: "\"") {
                let raw = UnsafeRawBufferPointer(rebasing: bytes[contentStart..<offset])
                offset += 1
                guard let text = ByteReader.string(validating: raw) else {
                    throw error("the string is not valid UTF-8.", at: start)
                }
                return text
            }
            if byte == UInt8(ascii: "\\") { return try escapedString(start: start, contentStart: contentStart) }
            guard byte >= 0x20 else { throw error("a string holds the raw control character 0x\(String(byte, radix: 16)).") }
            offset += 1
        }
        throw error("the string never ends.", at: start)
    }

    private mutating func escapedString(start: Int, contentStart: Int) throws(ChronicleError) -> String {
        var out: [UInt8] = Array(UnsafeRawBufferPointer(rebasing: bytes[contentStart..<offset]))
        out.reserveCapacity(out.count + 32)
        while offset < bytes.count {
            let byte = bytes[offset]
            switch byte {
            case UInt8(ascii: "\""):
                offset += 1
                guard let text = String(validating: out, as: UTF8.self) else {
                    throw error("the string is not valid UTF-8.", at: start)
                }
                return text
            case UInt8(ascii: "\\"):
                guard offset + 1 < bytes.count else { break }
                let escape = bytes[offset + 1]
                offset += 2
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(escape)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try hex4()
                    if (0xD800...0xDBFF).contains(scalar) {
                        guard offset + 1 < bytes.count, bytes[offset] == UInt8(ascii: "\\"), bytes[offset + 1] == UInt8(ascii: "u") else {
                            throw error("a \\u escape holds an unpaired surrogate.")
                        }
                        offset += 2
                        let low = try hex4()
                        guard (0xDC00...0xDFFF).contains(low) else { throw error("a \\u escape holds an unpaired surrogate.") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00...0xDFFF).contains(scalar) {
                        throw error("a \\u escape holds an unpaired surrogate.")
                    }
                    guard let unicode = Unicode.Scalar(scalar) else { throw error("a \\u escape is not a Unicode scalar.") }
                    out.append(contentsOf: UTF8.encode(unicode)!)
                default:
                    throw error("'\\\(Character(Unicode.Scalar(escape)))' is not a JSON escape.", at: offset - 2)
                }
                continue
            case 0..<0x20:
                throw error("a string holds the raw control character 0x\(String(byte, radix: 16)).")
            default:
                out.append(byte)
                offset += 1
                continue
            }
            break
        }
        throw error("the string never ends.", at: start)
    }

    private mutating func hex4() throws(ChronicleError) -> UInt32 {
        guard offset + 4 <= bytes.count else { throw error("a \\u escape is cut short.") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard let nibble = Hex.value(of: bytes[offset]) else { throw error("a \\u escape needs four hex digits.") }
            value = value << 4 | UInt32(nibble)
            offset += 1
        }
        return value
    }
}
