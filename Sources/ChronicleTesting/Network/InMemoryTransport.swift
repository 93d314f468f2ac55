import ChronicleCore
import ChronicleStore
import ChronicleSync
import Foundation

/// Calls a `SyncEndpoint` (the server's `SyncService`) in the same process.
/// Faults can be injected: refused calls (offline), and responses lost after the
/// server committed (the client sees a timeout; the server has the ops).
public final class InMemoryTransport: SyncTransport {
    public let endpoint: any SyncEndpoint
    public let library: UUID
    public let token: String
    /// Round-trips every segment through the binary codec, as the wire would.
    public let encodeSegments: Bool
    private let faults = Locked(Faults())

    struct Faults {
        var offline = false
        var refuseNext = 0
        var dropResponsesNext = 0
        var requests = 0
    }

    public init(endpoint: any SyncEndpoint, library: UUID, token: String, encodeSegments: Bool = true) {
        self.endpoint = endpoint
        self.library = library
        self.token = token
        self.encodeSegments = encodeSegments
    }

    /// While true every call fails as if there were no network.
    public func setOffline(_ offline: Bool) { faults.withLock { $0.offline = offline } }
    /// The next `count` calls fail before reaching the server.
    public func refuseNext(_ count: Int) { faults.withLock { $0.refuseNext += count } }
    /// The next `count` calls reach the server, which acts on them, but the answer is lost.
    public func dropResponsesNext(_ count: Int) { faults.withLock { $0.dropResponsesNext += count } }
    /// Calls made so far (including failed ones).
    public var requestCount: Int { faults.withLock { $0.requests } }

    private func before() throws(SyncError) -> Bool {
        let (refuse, drop) = faults.withLock { f -> (Bool, Bool) in
            f.requests += 1
            if f.offline { return (true, false) }
            if f.refuseNext > 0 { f.refuseNext -= 1; return (true, false) }
            if f.dropResponsesNext > 0 { f.dropResponsesNext -= 1; return (false, true) }
            return (false, false)
        }
        if refuse { throw .transient(reason: "Could not connect to the server (in-memory transport is offline).", retryAfterSeconds: nil) }
        return drop
    }

    private func roundTrip(_ segment: Segment) throws(SyncError) -> Segment {
        guard encodeSegments else { return segment }
        do {
            return try SegmentCodec.decode(SegmentCodec.encode(segment))
        } catch {
            throw .terminal(ProtocolError(400, ProtocolError.Code(error.code), error.message))
        }
    }

    public func push(_ segment: Segment) async throws(SyncError) -> PushResponse {
        let drop = try before()
        let response: PushResponse
        do {
            response = try await endpoint.push(try roundTrip(segment), token: token)
        } catch let error as ProtocolError {
            throw SyncError.from(error)
        } catch let error as SyncError {
            throw error
        } catch {
            throw .transient(reason: "\(error)", retryAfterSeconds: nil)
        }
        if drop { throw .transient(reason: "The request timed out (the response was lost).", retryAfterSeconds: nil) }
        return response
    }

    public func pull(after cursor: Int64, limit: Int, waitMilliseconds: Int) async throws(SyncError) -> PullPage {
        let drop = try before()
        var page: PullPage
        do {
            page = try await endpoint.pull(library: library, after: cursor, limit: limit, waitMilliseconds: waitMilliseconds, token: token)
        } catch {
            throw SyncError.from(error)
        }
        if drop { throw .transient(reason: "The request timed out (the response was lost).", retryAfterSeconds: nil) }
        page.segment = try roundTrip(page.segment)
        return page
    }

    public func verdict(for entity: UUID) async throws(SyncError) -> Verdict {
        let drop = try before()
        do {
            let verdict = try await endpoint.verdict(library: library, entity: entity, token: token)
            if drop { throw SyncError.transient(reason: "The request timed out (the response was lost).", retryAfterSeconds: nil) }
            return verdict
        } catch let error as ProtocolError {
            throw SyncError.from(error)
        } catch let error as SyncError {
            throw error
        } catch {
            throw .transient(reason: "\(error)", retryAfterSeconds: nil)
        }
    }

    public func startImage(storeFormat: Int64, schemaFingerprint: String, to target: String) async throws(SyncError) -> Bool {
        let drop = try before()
        let frame: [UInt8]?
        do {
            frame = try await endpoint.startImage(library: library, storeFormat: storeFormat, schemaFingerprint: schemaFingerprint, token: token)
        } catch {
            throw SyncError.from(error)
        }
        if drop { throw .transient(reason: "The request timed out (the response was lost).", retryAfterSeconds: nil) }
        guard let frame else { return false }
        do {
            try LZ4FrameFileDecompressor.decompress(frame, to: target)
        } catch {
            throw .transient(reason: "The server's start image could not be read: \(error)", retryAfterSeconds: nil)
        }
        return true
    }

    public func snapshot() async throws(SyncError) -> SnapshotFrame {
        let drop = try before()
        let frame: [UInt8]
        do {
            frame = try await endpoint.snapshot(library: library, token: token)
        } catch {
            throw SyncError.from(error)
        }
        if drop { throw .transient(reason: "The request timed out (the response was lost).", retryAfterSeconds: nil) }
        return SnapshotFrame(bytes: frame)
    }

    /// One blob call through the fault switches: refused before the server, or its answer lost after.
    private func blobCall<T>(_ body: () async throws(ProtocolError) -> T) async throws(SyncError) -> T {
        let drop = try before()
        let answer: T
        do {
            answer = try await body()
        } catch {
            throw SyncError.from(error)
        }
        if drop { throw .transient(reason: "The request timed out (the response was lost).", retryAfterSeconds: nil) }
        return answer
    }

    public func blobStatus(_ blob: BlobRef) async throws(SyncError) -> BlobStatus {
        try await blobCall { () async throws(ProtocolError) in try await endpoint.blobStatus(library: library, blob: blob, token: token) }
    }

    public func putBlob(_ blob: BlobRef, length: Int64, offset: Int64, bytes: [UInt8]) async throws(SyncError) -> BlobStatus {
        try await blobCall { () async throws(ProtocolError) in
            try await endpoint.putBlob(library: library, blob: blob, length: length, offset: offset, bytes: bytes, token: token)
        }
    }

    public func blobRange(_ blob: BlobRef, offset: Int64, count: Int) async throws(SyncError) -> BlobRange {
        try await blobCall { () async throws(ProtocolError) in
            try await endpoint.blobRange(library: library, blob: blob, offset: offset, count: count, token: token)
        }
    }
}
