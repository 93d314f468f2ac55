import Foundation

/// One immutable, typed, versioned change: the envelope of DESIGN.md's "Words".
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
    public var lowercased: String { uuidString.lowercased() }
}
