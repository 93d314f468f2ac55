import ChronicleCore
import Foundation

/// What a start image holds and was made for (the JSON file beside it).
///
/// A start image is the device store a new device would make from the library's newest
/// snapshot (`DeviceStore.bootstrap(from:)`: the snapshot's rows, the read and search indexes,
/// the phrase indexes complete, the snapshot's frame kept), built once by the server and kept
/// as one LZ4 frame of the store's file. A new device of the same store format and schema
/// takes it whole (`DeviceStore.adoptStartImage`) instead of building those indexes itself;
/// any other device starts from the snapshot as before. It is derived data: deleted, it is
/// built again; never backed up.
public struct StartImageInfo: Codable, Sendable, Equatable {
    public var libraryID: UUID
    /// The snapshot it was made from, and the op the server held at that seq.
    public var seq: Int64
    public var baseOpID: UUID?
    /// The incarnation of the server's file it was made from (`ServerLibrary.incarnation`).
    public var incarnation: UUID
    public var storeFormat: Int64
    public var schemaName: String
    public var schemaVersion: Int
    public var schemaFingerprint: String
    /// The LZ4 frame's size, and the store file's inside it.
    public var imageBytes: Int64
    public var storeBytes: Int64
    public var buildSeconds: Double
    public var builtAt: Int64

    /// The device id a start image's store is made with; the device that takes it writes its own.
    public static let placeholderDevice = UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
    /// The media type of the image's HTTP body.
    public static let mediaType = "application/vnd.chronicle.store-image+lz4"

    public init(libraryID: UUID, seq: Int64, baseOpID: UUID?, incarnation: UUID, storeFormat: Int64, schemaName: String,
                schemaVersion: Int, schemaFingerprint: String, imageBytes: Int64, storeBytes: Int64, buildSeconds: Double, builtAt: Int64) {
        (self.libraryID, self.seq, self.baseOpID, self.incarnation) = (libraryID, seq, baseOpID, incarnation)
        (self.storeFormat, self.schemaName, self.schemaVersion, self.schemaFingerprint) = (storeFormat, schemaName, schemaVersion, schemaFingerprint)
        (self.imageBytes, self.storeBytes, self.buildSeconds, self.builtAt) = (imageBytes, storeBytes, buildSeconds, builtAt)
    }
}
