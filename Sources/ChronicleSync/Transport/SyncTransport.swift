import ChronicleCore
import Foundation

/// Why a sync call failed, sorted by what the engine does about it.
public enum SyncError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Try again later from the same position: no route, refused, timeout, 5xx, 429.
    case transient(reason: String, retryAfterSeconds: Double?)
    /// The server refused the request itself (a 4xx): retrying the same request cannot help.
    case terminal(ProtocolError)

    public var description: String {
        switch self {
        case .transient(let reason, _): reason
        case .terminal(let error): error.message + " [\(error.code)]"
        }
    }

    /// How the engine classifies a server answer: 5xx, 429 and 408 are worth retrying.
    public static func from(_ error: ProtocolError) -> SyncError {
        if error.status >= 500 || error.status == 429 || error.status == 408 {
            return .transient(reason: "The server answered \(error.status) (\(error.code)): \(error.message)", retryAfterSeconds: error.retryAfterSeconds)
        }
        return .terminal(error)
    }
}

/// How a device reaches the server. Two implementations: `HTTPTransport` (the
/// real one) and `InMemoryTransport` (tests and the simulator); one shared test
/// suite runs against both.
public protocol SyncTransport: Sendable {
    /// Sends a batch of outbox ops (in deviceSeq order); the answer has one result per op.
    func push(_ segment: Segment) async throws(SyncError) -> PushResponse
    /// Confirmed ops after `cursor`; with `waitMilliseconds` > 0 the server holds the
    /// request until ops arrive or the wait runs out.
    func pull(after cursor: Int64, limit: Int, waitMilliseconds: Int) async throws(SyncError) -> PullPage
    /// The server's state of one entity.
    func verdict(for entity: UUID) async throws(SyncError) -> Verdict
    /// The library's newest snapshot (a device behind the retention horizon, or a new one, starts from it),
    /// as its LZ4 frame: large ones come as a temporary file, read by `DeviceStore.bootstrap(from:)`
    /// as it goes; the caller discards it afterwards.
    func snapshot() async throws(SyncError) -> SnapshotFrame
    /// The library's start image (`StartImageInfo`: the newest snapshot as a device store, sent as
    /// one LZ4 frame) for a store of `storeFormat` and a schema of `schemaFingerprint`, downloaded
    /// and decompressed into a new file at `target` (`DeviceStore.startImagePath`); false, with no
    /// file, where the server has none for them.
    func startImage(storeFormat: Int64, schemaFingerprint: String, to target: String) async throws(SyncError) -> Bool
    /// What the server holds of a blob: an upload goes on from its `received`.
    func blobStatus(_ blob: BlobRef) async throws(SyncError) -> BlobStatus
    /// Sends the chunk of a blob of `length` bytes that starts at `offset`.
    func putBlob(_ blob: BlobRef, length: Int64, offset: Int64, bytes: [UInt8]) async throws(SyncError) -> BlobStatus
    /// Up to `count` bytes of a complete blob from `offset`.
    func blobRange(_ blob: BlobRef, offset: Int64, count: Int) async throws(SyncError) -> BlobRange
}

extension SyncTransport {
    /// Transports that cannot fetch snapshots (simple test doubles) answer as a server without one.
    public func snapshot() async throws(SyncError) -> SnapshotFrame {
        throw .terminal(ProtocolError(404, .noSnapshot, "This transport does not fetch snapshots."))
    }

    /// Transports that cannot fetch start images answer as a server without one.
    public func startImage(storeFormat: Int64, schemaFingerprint: String, to target: String) async throws(SyncError) -> Bool { false }

    /// Transports that carry no blobs (simple test doubles) answer as a server that serves none.
    public func blobStatus(_ blob: BlobRef) async throws(SyncError) -> BlobStatus { throw Self.noBlobs }
    public func putBlob(_ blob: BlobRef, length: Int64, offset: Int64, bytes: [UInt8]) async throws(SyncError) -> BlobStatus { throw Self.noBlobs }
    public func blobRange(_ blob: BlobRef, offset: Int64, count: Int) async throws(SyncError) -> BlobRange { throw Self.noBlobs }
    private static var noBlobs: SyncError { .terminal(ProtocolError(404, .blobsNotCarried, "This transport does not carry blobs.")) }
}
