import Foundation

/// One immutable, typed, versioned change: the op envelope.
///
/// ```swift
/// let op = Op(opID: UUID(), libraryID: lib, deviceID: me, deviceSeq: 7,
///             type: "article.tag", version: 1, entityID: article,
///             payload: ["tag": .text("swift")], deviceTime: now, baseSeq: cursor)
/// ```
public struct Op: Sendable, Hashable {
    /// Made on the device; the idempotency key.
    public var opID: UUID
    public var libraryID: UUID
    public var deviceID: UUID
    /// Gap-free per device, starting at 1.
    public var deviceSeq: Int64
    public var type: String
    public var version: Int
    /// Made on the device that created the row.
    public var entityID: UUID
    public var payload: Payload
    /// The author's clock in milliseconds since 1970: shown to people, and
    /// compared only with the same device's own earlier times.
    public var deviceTime: Int64
    /// The author's cursor when it wrote the op.
    public var baseSeq: Int64
    /// Set once the server has ordered the op.
    public var serverSeq: Int64?
    public var serverTime: Int64?

    /// Ops authored by the server itself (parsed text, plan changes) carry this device id.
    public static let serverDeviceID = UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))

    public init(opID: UUID, libraryID: UUID, deviceID: UUID, deviceSeq: Int64, type: String, version: Int,
                entityID: UUID, payload: Payload, deviceTime: Int64, baseSeq: Int64,
                serverSeq: Int64? = nil, serverTime: Int64? = nil) {
        self.opID = opID
        self.libraryID = libraryID
        self.deviceID = deviceID
        self.deviceSeq = deviceSeq
        self.type = type
        self.version = version
        self.entityID = entityID
        self.payload = payload
        self.deviceTime = deviceTime
        self.baseSeq = baseSeq
        self.serverSeq = serverSeq
        self.serverTime = serverTime
    }

    public var isServerAuthored: Bool { deviceID == Op.serverDeviceID }

    /// `type@version`, as the log and audit print it.
    public var typeAndVersion: String { "\(type)@\(version)" }
}

extension UUID {
    /// The lowercase text form the store uses in every id column.
    /// (Foundation's `uuidString` goes through `snprintf`; this is the hot path of bulk apply.)
    public var lowercased: String {
        let digits: StaticString = "0123456789abcdef"
        return withUnsafeBytes(of: uuid) { bytes in
            String(unsafeUninitializedCapacity: 36) { out in
                var o = 0
                for i in 0..<16 {
                    if i == 4 || i == 6 || i == 8 || i == 10 { out[o] = UInt8(ascii: "-"); o += 1 }
                    out[o] = digits.utf8Start[Int(bytes[i] >> 4)]
                    out[o + 1] = digits.utf8Start[Int(bytes[i] & 0x0F)]
                    o += 2
                }
                return 36
            }
        }
    }

    /// Parses the 36-character text form (either case); nil for anything else.
    public init?(text: String) {
        var text = text
        guard let parsed = text.withUTF8({ UUID(utf8: UnsafeRawBufferPointer($0)) }) else { return nil }
        self = parsed
    }

    /// Parses the 36-character text form from its UTF-8 bytes (a database column read in
    /// place, without making a `String` first); nil for anything else.
    public init?(utf8: UnsafeRawBufferPointer) {
        guard utf8.count == 36 else { return nil }
        var value: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        let parsed = withUnsafeMutableBytes(of: &value) { out -> Bool in
            var b = 0
            var i = 0
            var bad: UInt8 = 0
            while i < 36 {
                if i == 8 || i == 13 || i == 18 || i == 23 {
                    if utf8[i] != UInt8(ascii: "-") { return false }
                    i += 1
                    continue
                }
                let high = Hex.nibble(utf8[i]), low = Hex.nibble(utf8[i + 1])
                bad |= (high | low) & 0xF0
                out[b] = high << 4 | (low & 0x0F)
                b += 1
                i += 2
            }
            return bad == 0
        }
        guard parsed else { return nil }
        self.init(uuid: value)
    }
}
