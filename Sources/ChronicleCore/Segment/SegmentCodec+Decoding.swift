import Foundation

/// Reads one version-1 body. Every rule of `Segment.init` is enforced while
/// reading, plus the format's own: canonical varints, in-range table indexes,
/// unique table entries, no trailing bytes.
struct SegmentBodyDecoder {
    private var reader: ByteReader
    private let limits: SegmentCodec.Limits

    /// The smallest op record: two ids, seven one-byte varints (device, deviceSeq,
    /// type, version, deviceTime, baseSeq, payload count).
    static let minimumOpBytes = 16 + 16 + 7

    init(_ bytes: UnsafeRawBufferPointer, limits: SegmentCodec.Limits) {
        limits.checkValid()
        reader = ByteReader(bytes)
        self.limits = limits
    }

    mutating func decode() throws(ChronicleError) -> Segment {
        let (libraryID, ops) = try decodeOps(ofEntity: nil)
        return Segment(validatedLibraryID: libraryID, ops: ops)
    }

    /// Reads the whole body with every check; `entity` (when given) keeps only that entity's
    /// ops, skipping the other ops' payloads without building them.
    mutating func decodeOps(ofEntity entity: UUID?) throws(ChronicleError) -> (libraryID: UUID, ops: [Op]) {
        let header = try readHeader()
        let strings = try readStrings()
        let devices = try readDevices()
        let firstSeq = header.confirmed ? try readFirstServerSeq(opCount: header.opCount) : 0
        let ops = try readOps(header, firstSeq: firstSeq, strings: strings, devices: devices, ofEntity: entity)
        guard reader.isAtEnd else {
            throw reader.error("\(reader.remaining) unexpected bytes follow the last op.")
        }
        return (header.libraryID, ops)
    }

    /// What the body's header says: its library, whether its ops are confirmed, how many it holds.
    private struct Header {
        var libraryID: UUID
        var confirmed: Bool
        var opCount: Int
    }

    /// Reads and checks the header: the body's size, the magic, the format version, the flags,
    /// the library id and the op count (within the limits and the bytes left).
    private mutating func readHeader() throws(ChronicleError) -> Header {
        guard reader.bytes.count <= limits.maxDecodedBytes else {
            throw ChronicleError(.segmentTooLarge, "The segment body is \(reader.bytes.count) bytes; "
                + "the limit is \(limits.maxDecodedBytes).")
        }
        let magic = try reader.u32("the magic")
        guard magic == UInt32(littleEndian: 0x4753_4843) else {  // "CHSG"
            throw ChronicleError(.malformedSegment, "The data is not a Chronicle segment body: it does not start with \"CHSG\".")
        }
        let version = try reader.u16("the format version")
        guard version <= SegmentCodec.formatVersion else {
            throw ChronicleError(.futureSegmentVersion, "This segment is format version \(version); this build reads "
                + "segment format versions up to \(SegmentCodec.formatVersion). Update the app to read it.")
        }
        guard version >= 1 else { throw ChronicleError(.malformedSegment, "The segment has format version 0, which does not exist.") }
        let flags = try reader.u16("the flags")
        guard flags & ~SegmentCodec.Flag.known == 0 else {
            throw ChronicleError(.malformedSegment, "The segment sets unknown flags 0x" + String(flags, radix: 16)
                + " (format version 1 defines only bit 0, confirmed).")
        }
        let confirmed = flags & SegmentCodec.Flag.confirmed != 0
        let libraryID = try reader.uuid("the library id")

        let opCount = try reader.count("the op count", atMost: Int.max)
        guard opCount <= limits.maxOps else {
            throw ChronicleError(.segmentTooLarge, "The segment holds \(opCount) ops; the limit is \(limits.maxOps).")
        }
        guard opCount <= reader.remaining / SegmentBodyDecoder.minimumOpBytes else {
            throw reader.error("it declares \(opCount) ops but only \(reader.remaining) bytes remain.")
        }
        if confirmed && opCount == 0 { throw reader.error("an empty segment is marked confirmed.") }
        return Header(libraryID: libraryID, confirmed: confirmed, opCount: opCount)
    }

    /// A confirmed body's first serverSeq, with room after it for `opCount` contiguous seqs.
    private mutating func readFirstServerSeq(opCount: Int) throws(ChronicleError) -> Int64 {
        let raw = try reader.varUInt("the first serverSeq")
        guard raw <= UInt64(Int64.max) - UInt64(opCount - 1) else {
            throw reader.error("the first serverSeq \(raw) is negative or leaves no room for \(opCount) contiguous seqs.")
        }
        return Int64(raw)
    }

    /// Reads the body's ops (each delta-coded against the previous op of its device), checking
    /// each one's size and that no op id repeats; keeps only `entity`'s when it is given.
    private mutating func readOps(_ header: Header, firstSeq: Int64, strings: [String], devices: [UUID],
                                  ofEntity entity: UUID?) throws(ChronicleError) -> [Op] {
        let (libraryID, confirmed, opCount) = (header.libraryID, header.confirmed, header.opCount)
        var ops: [Op] = []
        ops.reserveCapacity(entity == nil ? opCount : 0)
        var seen = Set<UUID>(minimumCapacity: opCount)
        var previous = [SegmentCodec.PerDevice](repeating: .init(), count: devices.count)
        var serverTime: Int64 = 0
        for position in 0..<opCount {
            let start = reader.offset
            let opID = try reader.uuid("an op id")
            let device = try index("the device index", count: devices.count)
            let deviceSeq = try previous[device].deviceSeq &+ reader.varInt("deviceSeq")
            let type = try strings[index("the type index", count: strings.count)]
            guard let version = Int(exactly: try reader.varInt("the op version")) else {
                throw reader.error("the op version does not fit this platform's Int.")
            }
            let entityID = try reader.uuid("the entity id")
            let deviceTime = try previous[device].deviceTime &+ reader.varInt("deviceTime")
            let baseSeq = try previous[device].baseSeq &+ reader.varInt("baseSeq")
            previous[device] = .init(deviceSeq: deviceSeq, deviceTime: deviceTime, baseSeq: baseSeq)
            if confirmed { serverTime = try serverTime &+ reader.varInt("serverTime") }
            let wanted = entity == nil || entity == entityID
            let payload = wanted ? try readPayload(strings) : [:]
            if !wanted { try skipPayload(strings) }
            guard reader.offset - start <= limits.maxOpBytes else {
                throw ChronicleError(.segmentTooLarge, "Op \(position) (\(opID.lowercased)) is \(reader.offset - start) "
                    + "bytes; the limit is \(limits.maxOpBytes).")
            }
            guard seen.insert(opID).inserted else {
                throw ChronicleError(.malformedSegment, "Op \(position) repeats the op id \(opID.lowercased).")
            }
            guard wanted else { continue }
            ops.append(Op(opID: opID, libraryID: libraryID, deviceID: devices[device], deviceSeq: deviceSeq, type: type,
                          version: version, entityID: entityID, payload: payload, deviceTime: deviceTime, baseSeq: baseSeq,
                          serverSeq: confirmed ? firstSeq + Int64(position) : nil,
                          serverTime: confirmed ? serverTime : nil))
        }
        return ops
    }

    // MARK: - Tables

    private mutating func readStrings() throws(ChronicleError) -> [String] {
        let count = try reader.count("the string count", atMost: reader.remaining)
        var strings: [String] = []
        strings.reserveCapacity(count)
        var unique = Set<String>(minimumCapacity: count)
        for _ in 0..<count {
            let start = reader.offset
            let length = try reader.count("a string's length", atMost: reader.remaining)
            let string = try reader.utf8(length, "a string in the table")
            guard unique.insert(string).inserted else {
                throw ChronicleError(.malformedSegment, "The segment's string table repeats \"\(string)\" at byte \(start).")
            }
            strings.append(string)
        }
        return strings
    }

    private mutating func readDevices() throws(ChronicleError) -> [UUID] {
        let count = try reader.count("the device count", atMost: reader.remaining / 16)
        var devices: [UUID] = []
        devices.reserveCapacity(count)
        var unique = Set<UUID>(minimumCapacity: count)
        for _ in 0..<count {
            let device = try reader.uuid("a device id")
            guard unique.insert(device).inserted else {
                throw ChronicleError(.malformedSegment, "The segment's device table repeats \(device.lowercased).")
            }
            devices.append(device)
        }
        return devices
    }

    @inline(__always)
    private mutating func index(_ what: StaticString, count: Int) throws(ChronicleError) -> Int {
        let raw = try reader.varUInt(what)
        guard raw < UInt64(count) else {
            throw reader.error("\(what) \(raw) is out of range (the table has \(count) entries).")
        }
        return Int(raw)
    }

    // MARK: - Payload

    private mutating func readPayload(_ strings: [String]) throws(ChronicleError) -> Payload {
        // Each entry takes at least two bytes (key index, tag).
        let count = try reader.count("the payload count", atMost: min(reader.remaining, limits.maxOpBytes) / 2)
        var payload = Payload(minimumCapacity: count)
        for _ in 0..<count {
            let key = try strings[index("a payload key index", count: strings.count)]
            payload[key] = try readValue(key)
        }
        guard payload.count == count else {
            throw reader.error("a payload names the same key twice.")
        }
        return payload
    }

    /// Moves past a payload with the checks `readPayload` makes on its shape (not its text's UTF-8).
    private mutating func skipPayload(_ strings: [String]) throws(ChronicleError) {
        let count = try reader.count("the payload count", atMost: min(reader.remaining, limits.maxOpBytes) / 2)
        for _ in 0..<count {
            let key = try strings[index("a payload key index", count: strings.count)]
            let tag = try reader.u8("a value tag")
            switch tag {
            case SegmentCodec.Tag.null, SegmentCodec.Tag.false, SegmentCodec.Tag.true: break
            case SegmentCodec.Tag.integer: _ = try reader.varInt("an integer value")
            case SegmentCodec.Tag.real: _ = try reader.skip(8, "a real value")
            case SegmentCodec.Tag.text:
                let length = try reader.varUInt("a text length")
                guard length <= UInt64(limits.maxOpBytes) else {
                    throw ChronicleError(.segmentTooLarge, "The payload field '\(key)' holds \(length) bytes of text; "
                        + "one op may take at most \(limits.maxOpBytes).")
                }
                _ = try reader.skip(Int(length), "a text value")
            default:
                throw reader.error("the payload field '\(key)' has the unknown value tag \(tag).")
            }
        }
    }

    @inline(__always)
    private mutating func readValue(_ key: String) throws(ChronicleError) -> Value {
        let tag = try reader.u8("a value tag")
        switch tag {
        case SegmentCodec.Tag.null: return .null
        case SegmentCodec.Tag.false: return .bool(false)
        case SegmentCodec.Tag.true: return .bool(true)
        case SegmentCodec.Tag.integer: return .integer(try reader.varInt("an integer value"))
        case SegmentCodec.Tag.real:
            let d = try reader.float64("a real value")
            guard d.isFinite else { throw reader.error("the payload field '\(key)' is \(d); only finite reals are allowed.") }
            return .real(d)
        case SegmentCodec.Tag.text:
            let length = try reader.varUInt("a text length")
            guard length <= UInt64(limits.maxOpBytes) else {
                throw ChronicleError(.segmentTooLarge, "The payload field '\(key)' holds \(length) bytes of text; "
                    + "one op may take at most \(limits.maxOpBytes).")
            }
            return .text(try reader.utf8(Int(length), "a text value"))
        default:
            throw reader.error("the payload field '\(key)' has the unknown value tag \(tag).")
        }
    }
}
