import Foundation

/// Appends little-endian integers, LEB128 varints, UUIDs and UTF-8 to a byte array.
///
/// The counterpart of `ByteReader`; varints are always written in their
/// shortest form, which the reader insists on, so encodings are canonical.
struct ByteWriter {
    private(set) var bytes: [UInt8]

    init(capacity: Int = 256) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    var count: Int { bytes.count }

    mutating func reserve(_ additional: Int) {
        bytes.reserveCapacity(bytes.count + additional)
    }

    @inline(__always)
    mutating func u8(_ value: UInt8) { bytes.append(value) }

    mutating func u16(_ value: UInt16) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func u32(_ value: UInt32) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    @inline(__always)
    mutating func uuid(_ value: UUID) {
        withUnsafeBytes(of: value.uuid) { bytes.append(contentsOf: $0) }
    }

    mutating func float64(_ value: Double) {
        withUnsafeBytes(of: value.bitPattern.littleEndian) { bytes.append(contentsOf: $0) }
    }

    @inline(__always)
    mutating func varUInt(_ value: UInt64) {
        var v = value
        while v >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        bytes.append(UInt8(truncatingIfNeeded: v))
    }

    /// Zig-zag: small magnitudes of either sign take few bytes.
    @inline(__always)
    mutating func varInt(_ value: Int64) {
        varUInt(UInt64(bitPattern: (value << 1) ^ (value >> 63)))
    }

    /// The varint length, then the UTF-8 bytes.
    mutating func lengthPrefixedUTF8(_ text: String) {
        var text = text
        text.withUTF8 { utf8 in
            varUInt(UInt64(utf8.count))
            bytes.append(contentsOf: utf8)
        }
    }

    mutating func append(_ raw: UnsafeRawBufferPointer) { bytes.append(contentsOf: raw) }

    /// How many bytes `varUInt(value)` writes.
    static func varUIntSize(_ value: UInt64) -> Int {
        value == 0 ? 1 : (64 - value.leadingZeroBitCount + 6) / 7
    }
}
