import Foundation

/// The binary encoding of a `Segment`, format version 1, inside an LZ4 frame.
///
/// The byte layout is specified in `Schemas/segment/segment-v1.md`; in short:
/// a 24-byte header (`CHSG`, version, flags, library id), the op count, a
/// string table (op types and payload keys), a device table, the first
/// `serverSeq` when confirmed, then one record per op with per-device deltas.
///
/// ```swift
/// let body = SegmentCodec.encode(segment)      // Content-Type: SegmentCodec.mediaType
/// let back = try SegmentCodec.decode(body)     // throws malformed_segment, segment_checksum, …
/// ```
///
/// Decoding is strict and bounded: every count is checked against `Limits` and
/// the bytes that remain before anything is allocated, and a malformed,
/// truncated, damaged or future-version input is refused with a
/// `ChronicleError`, never misread and never a crash.
public enum SegmentCodec {
    public static let formatVersion: UInt16 = 1
    /// The HTTP `Content-Type` of an encoded (LZ4-framed) segment.
    public static let mediaType = "application/vnd.chronicle.segment"
    /// `CHSG`, the first four bytes of a decompressed body.
    static let magic: (UInt8, UInt8, UInt8, UInt8) = (0x43, 0x48, 0x53, 0x47)

    /// Flags, a `u16` after the version.
    enum Flag {
        static let confirmed: UInt16 = 1 << 0
        static let known: UInt16 = confirmed
    }

    /// The tag byte in front of every payload value.
    enum Tag {
        static let null: UInt8 = 0
        static let `false`: UInt8 = 1
        static let `true`: UInt8 = 2
        static let integer: UInt8 = 3
        static let real: UInt8 = 4
        static let text: UInt8 = 5
    }

    /// What a decoder accepts at most. Producers keep segments within the
    /// defaults (split runs of ops into segments of at most `maxOps`).
    public struct Limits: Sendable, Equatable {
        /// Ops in one segment.
        public var maxOps: Int
        /// Bytes of one op's binary record (or, in the JSON form, of its JSON object).
        public var maxOpBytes: Int
        /// Bytes of the decompressed body (and of a JSON body).
        public var maxDecodedBytes: Int

        public init(maxOps: Int = 10_000, maxOpBytes: Int = 262_144, maxDecodedBytes: Int = 64 << 20) {
            self.maxOps = maxOps
            self.maxOpBytes = maxOpBytes
            self.maxDecodedBytes = maxDecodedBytes
        }

        /// Negative limits are a programming error, not an input error.
        func checkValid() {
            precondition(maxOps >= 0 && maxOpBytes >= 0 && maxDecodedBytes >= 0, "segment limits must not be negative")
        }
    }

    // MARK: - Framed

    /// The segment's body inside an LZ4 frame (content checksum on, content size recorded).
    public static func encode(_ segment: Segment) -> [UInt8] {
        LZ4Frame.compress(encodeBody(segment))
    }

    /// Decompresses (at most `limits.maxDecodedBytes`) and decodes one segment.
    public static func decode(_ bytes: [UInt8], limits: Limits = Limits()) throws(ChronicleError) -> Segment {
        try decodeBody(LZ4Frame.decompress(bytes, maxBytes: limits.maxDecodedBytes), limits: limits)
    }

    /// Decodes one framed segment from any contiguous bytes (an HTTP body's `Data`, …).
    public static func decode(_ bytes: some ContiguousBytes, limits: Limits = Limits()) throws(ChronicleError) -> Segment {
        try decodeBody(LZ4Frame.decompress(bytes, maxBytes: limits.maxDecodedBytes), limits: limits)
    }

    // MARK: - Body

    /// The uncompressed body. The same segment always gives the same bytes.
    ///
    /// The segment must keep the rules its initializer checked: a caller that
    /// mutated `ops` into a mixed, gapped or foreign run, or put a non-finite
    /// real in a payload, traps here rather than sending something the other
    /// side would misread.
    public static func encodeBody(_ segment: Segment) -> [UInt8] {
        let ops = segment.ops
        let confirmed = segment.isConfirmed
        let firstSeq = segment.firstSeq ?? 0

        var strings: [String] = []
        var stringIndex: [String: Int] = [:]
        var devices: [UUID] = []
        var deviceIndex: [UUID: Int] = [:]
        var previous: [PerDevice] = []
        var serverTime: Int64 = 0

        func index(of string: String) -> Int {
            if let found = stringIndex[string] { return found }
            strings.append(string)
            stringIndex[string] = strings.count - 1
            return strings.count - 1
        }

        var body = ByteWriter(capacity: ops.count * 72 + 64)
        for (position, op) in ops.enumerated() {
            precondition(op.libraryID == segment.libraryID, "op \(position) belongs to another library")
            precondition((op.serverSeq != nil) == confirmed && (op.serverTime != nil) == confirmed,
                         "op \(position) mixes confirmed and unconfirmed ops")
            precondition(!confirmed || op.serverSeq == firstSeq + Int64(position), "op \(position) breaks serverSeq contiguity")

            let device: Int
            if let found = deviceIndex[op.deviceID] {
                device = found
            } else {
                device = devices.count
                devices.append(op.deviceID)
                deviceIndex[op.deviceID] = device
                previous.append(PerDevice())
            }
            body.uuid(op.opID)
            body.varUInt(UInt64(device))
            body.varInt(op.deviceSeq &- previous[device].deviceSeq)
            body.varUInt(UInt64(index(of: op.type)))
            body.varInt(Int64(op.version))
            body.uuid(op.entityID)
            body.varInt(op.deviceTime &- previous[device].deviceTime)
            body.varInt(op.baseSeq &- previous[device].baseSeq)
            previous[device] = PerDevice(deviceSeq: op.deviceSeq, deviceTime: op.deviceTime, baseSeq: op.baseSeq)
            if confirmed, let time = op.serverTime {
                body.varInt(time &- serverTime)
                serverTime = time
            }
            body.varUInt(UInt64(op.payload.count))
            if op.payload.count == 1, let entry = op.payload.first {
                body.varUInt(UInt64(index(of: entry.key)))
                write(entry.value, to: &body)
            } else {
                // Sorted keys: a dictionary's order differs from run to run.
                for (key, value) in op.payload.sorted(by: { $0.key < $1.key }) {
                    body.varUInt(UInt64(index(of: key)))
                    write(value, to: &body)
                }
            }
        }

        var out = ByteWriter(capacity: body.count + 64 + strings.count * 16 + devices.count * 17)
        out.u8(magic.0); out.u8(magic.1); out.u8(magic.2); out.u8(magic.3)
        out.u16(formatVersion)
        out.u16(confirmed ? Flag.confirmed : 0)
        out.uuid(segment.libraryID)
        out.varUInt(UInt64(ops.count))
        out.varUInt(UInt64(strings.count))
        for string in strings { out.lengthPrefixedUTF8(string) }
        out.varUInt(UInt64(devices.count))
        for device in devices { out.uuid(device) }
        if confirmed { out.varUInt(UInt64(firstSeq)) }
        body.bytes.withUnsafeBytes { out.append($0) }
        return out.bytes
    }

    private static func write(_ value: Value, to out: inout ByteWriter) {
        switch value {
        case .null: out.u8(Tag.null)
        case .bool(let b): out.u8(b ? Tag.true : Tag.false)
        case .integer(let i): out.u8(Tag.integer); out.varInt(i)
        case .real(let d):
            precondition(d.isFinite, "a segment carries only finite reals")
            out.u8(Tag.real)
            out.float64(d)
        case .text(let s): out.u8(Tag.text); out.lengthPrefixedUTF8(s)
        }
    }

    /// The last values seen for one device: the base of its next op's deltas.
    struct PerDevice {
        var deviceSeq: Int64 = 0
        var deviceTime: Int64 = 0
        var baseSeq: Int64 = 0
    }

    /// Decodes an uncompressed body (see `encodeBody`).
    public static func decodeBody(_ bytes: [UInt8], limits: Limits = Limits()) throws(ChronicleError) -> Segment {
        try bytes.withUnsafeBytes { buffer in
            Result { () throws(ChronicleError) in try decodeBody(buffer, limits: limits) }
        }.get()
    }

    /// The ops of one entity in an uncompressed body, in order, with the library the body
    /// belongs to: the body is read with every check `decodeBody` makes, but only that
    /// entity's payloads are built (an audit reading a sealed segment).
    public static func decodeOps(ofEntity entity: UUID, body: [UInt8], limits: Limits = Limits()) throws(ChronicleError)
        -> (libraryID: UUID, ops: [Op]) {
        try body.withUnsafeBytes { buffer in
            Result { () throws(ChronicleError) in
                var decoder = SegmentBodyDecoder(buffer, limits: limits)
                return try decoder.decodeOps(ofEntity: entity)
            }
        }.get()
    }

    /// Decodes an uncompressed body from a borrowed buffer.
    public static func decodeBody(_ buffer: UnsafeRawBufferPointer, limits: Limits = Limits()) throws(ChronicleError) -> Segment {
        var decoder = SegmentBodyDecoder(buffer, limits: limits)
        return try decoder.decode()
    }
}
