import Foundation

/// A bounds-checked cursor over little-endian bytes and LEB128 varints.
///
/// Every read checks the remaining length first and throws instead of
/// trapping, so a decoder built on it cannot be crashed by its input. The
/// buffer is borrowed: use the reader only inside the `withUnsafeBytes` that
/// produced it.
struct ByteReader {
    let bytes: UnsafeRawBufferPointer
    private(set) var offset = 0
    /// Where `bytes` starts in the whole input, for messages (a window of a stream).
    var base = 0
    /// Set when a read failed because the bytes ran out: a streaming reader then waits for more.
    private(set) var ranShort = false
    /// What is being read, for messages ("segment").
    let subject: String
    let code: ChronicleError.Code

    init(_ bytes: UnsafeRawBufferPointer, subject: String = "segment", code: ChronicleError.Code = .malformedSegment) {
        self.bytes = bytes
        self.subject = subject
        self.code = code
    }

    var remaining: Int { bytes.count - offset }
    var isAtEnd: Bool { offset == bytes.count }

    func error(_ sentence: String) -> ChronicleError {
        ChronicleError(code, "The \(subject) is malformed at byte \(base + offset): \(sentence)")
    }

    @inline(__always)
    private mutating func need(_ count: Int, _ what: StaticString) throws(ChronicleError) {
        guard count <= remaining else {
            ranShort = true
            throw ChronicleError(code, "The \(subject) ends early: \(what) needs \(count) bytes at byte \(base + offset), "
                + "but only \(remaining) remain.")
        }
    }

    @inline(__always)
    mutating func u8(_ what: StaticString = "a byte") throws(ChronicleError) -> UInt8 {
        try need(1, what)
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func u16(_ what: StaticString) throws(ChronicleError) -> UInt16 {
        try need(2, what)
        defer { offset += 2 }
        return UInt16(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt16.self))
    }

    mutating func u32(_ what: StaticString) throws(ChronicleError) -> UInt32 {
        try need(4, what)
        defer { offset += 4 }
        return UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self))
    }

    @inline(__always)
    mutating func uuid(_ what: StaticString) throws(ChronicleError) -> UUID {
        try need(16, what)
        defer { offset += 16 }
        return UUID(uuid: bytes.loadUnaligned(fromByteOffset: offset, as: uuid_t.self))
    }

    mutating func float64(_ what: StaticString) throws(ChronicleError) -> Double {
        try need(8, what)
        defer { offset += 8 }
        return Double(bitPattern: UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self)))
    }

    /// An unsigned LEB128 varint of at most 10 bytes, in its shortest form.
    @inline(__always)
    mutating func varUInt(_ what: StaticString) throws(ChronicleError) -> UInt64 {
        // The one-byte case is most of a segment: ids into tables, small deltas.
        if offset < bytes.count, bytes[offset] < 0x80 {
            defer { offset += 1 }
            return UInt64(bytes[offset])
        }
        return try varUIntSlow(what)
    }

    private mutating func varUIntSlow(_ what: StaticString) throws(ChronicleError) -> UInt64 {
        let start = offset
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            guard offset < bytes.count else {
                ranShort = true
                throw ChronicleError(code, "The \(subject) ends early inside \(what) (a varint starting at byte \(base + start)).")
            }
            let byte = bytes[offset]
            offset += 1
            if shift == 63 && byte > 1 {
                throw ChronicleError(code, "The \(subject) is malformed at byte \(base + start): \(what) is a varint "
                    + "that overflows 64 bits.")
            }
            result |= UInt64(byte & 0x7F) << shift
            if byte < 0x80 {
                if byte == 0 && offset - start > 1 {
                    throw ChronicleError(code, "The \(subject) is malformed at byte \(base + start): \(what) is a varint "
                        + "with redundant trailing zero bytes.")
                }
                return result
            }
            shift += 7
        }
    }

    /// A zig-zag encoded signed varint.
    @inline(__always)
    mutating func varInt(_ what: StaticString) throws(ChronicleError) -> Int64 {
        let raw = try varUInt(what)
        return Int64(bitPattern: (raw >> 1) ^ (0 &- (raw & 1)))
    }

    /// A varint that counts or indexes something, checked against `limit` before
    /// anyone allocates for it.
    @inline(__always)
    mutating func count(_ what: StaticString, atMost limit: Int) throws(ChronicleError) -> Int {
        let start = offset
        let raw = try varUInt(what)
        guard raw <= UInt64(limit) else {
            offset = start
            throw error("\(what) is \(raw), more than the \(limit) allowed here.")
        }
        return Int(raw)
    }

    mutating func skip(_ count: Int, _ what: StaticString) throws(ChronicleError) -> UnsafeRawBufferPointer {
        try need(count, what)
        defer { offset += count }
        return UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + count])
    }

    /// `count` bytes that must be valid UTF-8.
    mutating func utf8(_ count: Int, _ what: StaticString) throws(ChronicleError) -> String {
        let raw = try skip(count, what)
        guard let text = Self.string(validating: raw) else {
            offset -= count
            throw error("\(what) is not valid UTF-8.")
        }
        return text
    }

    /// Valid UTF-8 as a `String`, nil otherwise. ASCII (ids, URLs, keys) skips
    /// the generic validator, which costs more than the copy itself.
    static func string(validating raw: UnsafeRawBufferPointer) -> String? {
        var i = 0
        var high: UInt64 = 0
        while i + 8 <= raw.count {
            high |= raw.loadUnaligned(fromByteOffset: i, as: UInt64.self)
            i += 8
        }
        while i < raw.count {
            high |= UInt64(raw[i])
            i += 1
        }
        if high & 0x8080_8080_8080_8080 == 0 {
            return String(decoding: raw, as: UTF8.self)
        }
        return String(validating: raw.assumingMemoryBound(to: UInt8.self), as: UTF8.self)
    }
}
