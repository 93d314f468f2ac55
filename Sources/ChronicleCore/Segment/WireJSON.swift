import Foundation

/// The JSON form of a `Segment`, for reading sync traffic with `curl`.
///
/// ```json
/// {"libraryID":"…","ops":[
/// {"opID":"…","libraryID":"…","deviceID":"…","deviceSeq":1,"type":"article.save","version":1,
///  "entityID":"…","payload":{"title":"T","url":"https://e.com"},"deviceTime":1700000000000,
///  "baseSeq":0,"serverSeq":5,"serverTime":1700000000123}
/// ]}
/// ```
///
/// `serverSeq` and `serverTime` are omitted for unconfirmed ops; ids are
/// lowercase; payload keys are sorted; a real always carries a fraction or an
/// exponent (`1.0`, `1e+300`) and reads back as a real, so types survive the
/// round trip exactly. Decoding is strict (unknown, missing or repeated keys
/// and wrong types are `malformed_segment` errors naming the key) and bounded
/// by the same `SegmentCodec.Limits` as the binary form.
public enum WireJSON {
    public static let mediaType = "application/json"

    // MARK: - Encoding

    public static func encode(_ segment: Segment) -> [UInt8] {
        var out = JSONWriter(capacity: 64 + segment.ops.count * 400)
        out.raw("{\"libraryID\":")
        out.uuid(segment.libraryID)
        out.raw(",\"ops\":[")
        for (position, op) in segment.ops.enumerated() {
            out.raw(position == 0 ? "\n{\"opID\":" : ",\n{\"opID\":")
            out.uuid(op.opID)
            out.raw(",\"libraryID\":")
            out.uuid(op.libraryID)
            out.raw(",\"deviceID\":")
            out.uuid(op.deviceID)
            out.raw(",\"deviceSeq\":")
            out.integer(op.deviceSeq)
            out.raw(",\"type\":")
            out.string(op.type)
            out.raw(",\"version\":")
            out.integer(Int64(op.version))
            out.raw(",\"entityID\":")
            out.uuid(op.entityID)
            out.raw(",\"payload\":{")
            for (index, entry) in op.payload.sorted(by: { $0.key < $1.key }).enumerated() {
                if index > 0 { out.raw(",") }
                out.string(entry.key)
                out.raw(":")
                out.value(entry.value)
            }
            out.raw("},\"deviceTime\":")
            out.integer(op.deviceTime)
            out.raw(",\"baseSeq\":")
            out.integer(op.baseSeq)
            if let serverSeq = op.serverSeq, let serverTime = op.serverTime {
                out.raw(",\"serverSeq\":")
                out.integer(serverSeq)
                out.raw(",\"serverTime\":")
                out.integer(serverTime)
            }
            out.raw("}")
        }
        out.raw(segment.ops.isEmpty ? "]}" : "\n]}")
        return out.bytes
    }

    // MARK: - Decoding

    public static func decode(_ bytes: [UInt8], limits: SegmentCodec.Limits = .init()) throws(ChronicleError) -> Segment {
        try bytes.withUnsafeBytes { buffer in
            Result { () throws(ChronicleError) in try decode(buffer, limits: limits) }
        }.get()
    }

    /// Decodes from any contiguous bytes (an HTTP body's `Data`, …).
    public static func decode(_ bytes: some ContiguousBytes, limits: SegmentCodec.Limits = .init()) throws(ChronicleError) -> Segment {
        try bytes.withUnsafeBytes { buffer in
            Result { () throws(ChronicleError) in try decode(buffer, limits: limits) }
        }.get()
    }

    private static func decode(_ buffer: UnsafeRawBufferPointer, limits: SegmentCodec.Limits) throws(ChronicleError) -> Segment {
        limits.checkValid()
        guard buffer.count <= limits.maxDecodedBytes else {
            throw ChronicleError(.segmentTooLarge, "The JSON segment is \(buffer.count) bytes; the limit is \(limits.maxDecodedBytes).")
        }
        var scanner = JSONScanner(buffer)
        var libraryID: UUID?
        var ops: [Op]?
        try scanner.expect(UInt8(ascii: "{"), "the segment object")
        if !scanner.consume(UInt8(ascii: "}")) {
            repeat {
                let keyStart = scanner.offset
                let key = try scanner.key(in: "the segment object")
                switch key {
                case "libraryID":
                    guard libraryID == nil else { throw scanner.error("the key 'libraryID' appears twice.", at: keyStart) }
                    libraryID = try uuid(&scanner, "libraryID")
                case "ops":
                    guard ops == nil else { throw scanner.error("the key 'ops' appears twice.", at: keyStart) }
                    ops = try readOps(&scanner, limits)
                default:
                    throw scanner.error("the segment object has the unknown key '\(key)'.", at: keyStart)
                }
            } while try scanner.another(closing: UInt8(ascii: "}"), in: "the segment object")
        }
        guard scanner.isAtEnd() else { throw scanner.error("unexpected bytes follow the segment object.") }
        guard let libraryID else { throw ChronicleError(.malformedSegment, "The JSON segment lacks the required key 'libraryID'.") }
        guard let ops else { throw ChronicleError(.malformedSegment, "The JSON segment lacks the required key 'ops'.") }
        return try Segment(libraryID: libraryID, ops: ops)
    }

    private static func readOps(_ scanner: inout JSONScanner, _ limits: SegmentCodec.Limits) throws(ChronicleError) -> [Op] {
        guard scanner.peek() == UInt8(ascii: "[") else {
            throw scanner.error("'ops' must be an array, not \(scanner.describeNext()).")
        }
        try scanner.expect(UInt8(ascii: "["), "'['")
        var ops: [Op] = []
        if scanner.consume(UInt8(ascii: "]")) { return ops }
        repeat {
            guard ops.count < limits.maxOps else {
                throw ChronicleError(.segmentTooLarge, "The JSON segment holds more than \(limits.maxOps) ops.")
            }
            let start = scanner.offset
            ops.append(try readOp(&scanner, index: ops.count))
            guard scanner.offset - start <= limits.maxOpBytes else {
                throw ChronicleError(.segmentTooLarge, "Op \(ops.count - 1) is \(scanner.offset - start) bytes of JSON; "
                    + "the limit is \(limits.maxOpBytes).")
            }
        } while try scanner.another(closing: UInt8(ascii: "]"), in: "'ops'")
        return ops
    }

    /// The keys of an op object, in the order `encode` writes them.
    private enum Field: Int, CaseIterable {
        case opID, libraryID, deviceID, deviceSeq, type, version, entityID, payload, deviceTime, baseSeq, serverSeq, serverTime

        static let byName: [String: Field] = Dictionary(uniqueKeysWithValues: allCases.map { ("\($0)", $0) })
        static let required: [Field] = [.opID, .libraryID, .deviceID, .deviceSeq, .type, .version, .entityID, .payload,
                                        .deviceTime, .baseSeq]
    }

    private static func readOp(_ scanner: inout JSONScanner, index: Int) throws(ChronicleError) -> Op {
        guard scanner.peek() == UInt8(ascii: "{") else {
            throw scanner.error("op \(index) must be an object, not \(scanner.describeNext()).")
        }
        try scanner.expect(UInt8(ascii: "{"), "'{'")
        let nil16 = UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
        var op = Op(opID: nil16, libraryID: nil16, deviceID: nil16, deviceSeq: 0, type: "", version: 0,
                    entityID: nil16, payload: [:], deviceTime: 0, baseSeq: 0)
        var seen: UInt16 = 0
        if !scanner.consume(UInt8(ascii: "}")) {
            repeat {
                let keyStart = scanner.offset
                let key = try scanner.key(in: "op \(index)")
                guard let field = Field.byName[key] else {
                    throw scanner.error("op \(index) has the unknown key '\(key)'.", at: keyStart)
                }
                guard seen & (1 << field.rawValue) == 0 else {
                    throw scanner.error("op \(index) has the key '\(key)' twice.", at: keyStart)
                }
                seen |= 1 << field.rawValue
                switch field {
                case .opID: op.opID = try uuid(&scanner, key)
                case .libraryID: op.libraryID = try uuid(&scanner, key)
                case .deviceID: op.deviceID = try uuid(&scanner, key)
                case .deviceSeq: op.deviceSeq = try integer(&scanner, key)
                case .type: op.type = try string(&scanner, key)
                case .version:
                    let at = scanner.offset
                    guard let version = Int(exactly: try integer(&scanner, key)) else {
                        throw scanner.error("'version' does not fit this platform's Int.", at: at)
                    }
                    op.version = version
                case .entityID: op.entityID = try uuid(&scanner, key)
                case .payload: op.payload = try payload(&scanner)
                case .deviceTime: op.deviceTime = try integer(&scanner, key)
                case .baseSeq: op.baseSeq = try integer(&scanner, key)
                case .serverSeq: op.serverSeq = try integer(&scanner, key)
                case .serverTime: op.serverTime = try integer(&scanner, key)
                }
            } while try scanner.another(closing: UInt8(ascii: "}"), in: "op \(index)")
        }
        for field in Field.required where seen & (1 << field.rawValue) == 0 {
            throw ChronicleError(.malformedSegment, "Op \(index) of the JSON segment lacks the required key '\(field)'.")
        }
        return op
    }

    private static func payload(_ scanner: inout JSONScanner) throws(ChronicleError) -> Payload {
        guard scanner.peek() == UInt8(ascii: "{") else {
            throw scanner.error("'payload' must be an object, not \(scanner.describeNext()).")
        }
        return try scanner.flatObject()
    }

    // MARK: - Typed fields

    private static func integer(_ scanner: inout JSONScanner, _ key: String) throws(ChronicleError) -> Int64 {
        let at = scanner.offset
        guard case .integer(let value) = try scanner.scalar("'\(key)'") else {
            throw scanner.error("'\(key)' must be an integer (no fraction or exponent).", at: at)
        }
        return value
    }

    private static func string(_ scanner: inout JSONScanner, _ key: String) throws(ChronicleError) -> String {
        let at = scanner.offset
        guard case .text(let value) = try scanner.scalar("'\(key)'") else {
            throw scanner.error("'\(key)' must be a string.", at: at)
        }
        return value
    }

    private static func uuid(_ scanner: inout JSONScanner, _ key: String) throws(ChronicleError) -> UUID {
        let at = scanner.offset
        guard let id = UUID(text: try string(&scanner, key)) else {
            throw scanner.error("'\(key)' must be a UUID like \"00000000-0000-4000-8000-000000000000\".", at: at)
        }
        return id
    }
}

// MARK: - Writer

/// Appends compact JSON straight to UTF-8 bytes.
struct JSONWriter {
    var bytes: [UInt8] = []

    init(capacity: Int) { bytes.reserveCapacity(capacity) }

    mutating func raw(_ text: StaticString) {
        bytes.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    /// JSON written elsewhere, as it is.
    mutating func raw(json: [UInt8]) { bytes.append(contentsOf: json) }

    mutating func uuid(_ id: UUID) {
        bytes.append(UInt8(ascii: "\""))
        var text = id.lowercased
        text.withUTF8 { bytes.append(contentsOf: $0) }
        bytes.append(UInt8(ascii: "\""))
    }

    mutating func integer(_ value: Int64) {
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes: room for 20 digits
        withUnsafeMutableBytes(of: &digits) { buffer in
            var magnitude = value.magnitude
            var i = buffer.count
            repeat {
                i -= 1
                buffer[i] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
            } while magnitude > 0
            if value < 0 { bytes.append(UInt8(ascii: "-")) }
            bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[i...]))
        }
    }

    /// A real always carries a fraction or an exponent, so it reads back as a real.
    mutating func real(_ value: Double) {
        precondition(value.isFinite, "a segment carries only finite reals")
        if value == 0 {
            value.sign == .minus ? raw("-0.0") : raw("0.0")
            return
        }
        var text = value.description  // the shortest form that reads back as the same double
        text.withUTF8 { bytes.append(contentsOf: $0) }
        if !text.utf8.contains(where: { $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "e") || $0 == UInt8(ascii: "E") }) {
            raw(".0")
        }
    }

    mutating func value(_ value: Value) {
        switch value {
        case .null: raw("null")
        case .bool(let b): b ? raw("true") : raw("false")
        case .integer(let i): integer(i)
        case .real(let d): real(d)
        case .text(let s): string(s)
        }
    }

    mutating func string(_ text: String) {
        bytes.append(UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { utf8 in
            var runStart = 0
            for (i, byte) in utf8.enumerated() where byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<i]))
                runStart = i + 1
                switch byte {
                case UInt8(ascii: "\""): raw("\\\"")
                case UInt8(ascii: "\\"): raw("\\\\")
                case 0x0A: raw("\\n")
                case 0x0D: raw("\\r")
                case 0x09: raw("\\t")
                default:
                    let hex: StaticString = "0123456789abcdef"
                    raw("\\u00")
                    bytes.append(hex.utf8Start[Int(byte >> 4)])
                    bytes.append(hex.utf8Start[Int(byte & 0x0F)])
                }
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart...]))
        }
        bytes.append(UInt8(ascii: "\""))
    }
}
