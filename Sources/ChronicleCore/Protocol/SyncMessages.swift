import Foundation

/// The server's answer for one pushed op (`Schemas/api/openapi.yaml`).
public enum PushOutcome: Sendable, Equatable {
    /// Newly ordered at `serverSeq`.
    case accepted(serverSeq: Int64)
    /// The server already held this op id; this is the original result.
    case duplicate(serverSeq: Int64)
    /// Refused for good: the op never enters the log. A repeat gets the same answer.
    case rejected(code: String, message: String)

    public var serverSeq: Int64? {
        switch self {
        case .accepted(let seq), .duplicate(let seq): seq
        case .rejected: nil
        }
    }
}

/// One op's line in a push response.
public struct PushResult: Sendable, Equatable {
    public var opID: UUID
    public var deviceSeq: Int64
    public var outcome: PushOutcome
    /// For a rejection: the server's state of the entity, so the device can show what stands.
    public var verdict: Verdict?

    public init(opID: UUID, deviceSeq: Int64, outcome: PushOutcome, verdict: Verdict? = nil) {
        self.opID = opID
        self.deviceSeq = deviceSeq
        self.outcome = outcome
        self.verdict = verdict
    }
}

/// The server's answer to a push: a result per op, and the library's head.
public struct PushResponse: Sendable, Equatable {
    /// One result per pushed op, in the order they were sent.
    public var results: [PushResult]
    /// The library's highest serverSeq after the push.
    public var head: Int64

    public init(results: [PushResult], head: Int64) {
        self.results = results
        self.head = head
    }
}

/// A segment's bytes as they are stored or sent: its body (`SegmentCodec.encodeBody`'s
/// layout) and the LZ4 frame around it.
public struct SegmentBytes: Sendable {
    public var body: [UInt8]
    public var frame: [UInt8]

    public init(body: [UInt8], frame: [UInt8]) {
        self.body = body
        self.frame = frame
    }
}

/// One page of the confirmed log.
public struct PullPage: Sendable, Equatable {
    /// Confirmed ops after the requested cursor, contiguous.
    public var segment: Segment
    /// The cursor to ask from next (the last op's serverSeq, or the request's cursor when empty).
    public var nextCursor: Int64
    /// More ops are waiting after `nextCursor`.
    public var more: Bool
    /// The library's highest serverSeq when the page was read.
    public var head: Int64
    /// The seq of the server's newest snapshot, if it has one: a device far behind (or new)
    /// may start from it instead of replaying every op.
    public var snapshotSeq: Int64?
    /// `segment`'s bytes as they came over the wire, when it came as a framed segment (or,
    /// from a server, as it stores them). A device keeps them as a sealed segment without
    /// encoding the ops again. Not part of a page's equality.
    public var encoded: SegmentBytes?
    /// The op the server holds at the requested cursor, where it holds it op by op (not sealed):
    /// a device holding another op there went on from a history the server no longer has (its
    /// data restored from a backup), and goes back to where the two agree
    /// (`Chronicle-After-Op` over HTTP).
    public var afterOpID: UUID?
    public static let afterOpHeader = "Chronicle-After-Op"
    /// The incarnation of the server's copy of the library (`ServerLibrary.incarnation`): it
    /// changes when the server's data is restored from a backup. A device that synced with
    /// another one compares its whole history with the server's before it pulls on
    /// (`Chronicle-Incarnation` over HTTP; nil from a server that does not send it).
    public var incarnation: UUID?
    public static let incarnationHeader = "Chronicle-Incarnation"
    /// Where the server's state was carried over from a snapshot of an earlier schema version
    /// when the server was updated (history before that snapshot was gone): the head at that
    /// moment, where the server wrote a snapshot of the new shape. Such a state lacks what only
    /// the log could give, so a device whose state did not come from the server's since then
    /// starts over from the server's snapshot (`Chronicle-State-Carried-Over-At` over HTTP;
    /// nil otherwise).
    public var stateCarriedOverAt: Int64?
    public static let stateCarriedOverHeader = "Chronicle-State-Carried-Over-At"

    public init(segment: Segment, nextCursor: Int64, more: Bool, head: Int64, snapshotSeq: Int64? = nil,
                encoded: SegmentBytes? = nil) {
        self.segment = segment
        self.nextCursor = nextCursor
        self.more = more
        self.head = head
        self.snapshotSeq = snapshotSeq
        self.encoded = encoded
    }

    public static func == (a: PullPage, b: PullPage) -> Bool {
        a.segment == b.segment && a.nextCursor == b.nextCursor && a.more == b.more && a.head == b.head && a.snapshotSeq == b.snapshotSeq
            && a.afterOpID == b.afterOpID && a.incarnation == b.incarnation && a.stateCarriedOverAt == b.stateCarriedOverAt
    }
}

/// The server's state of one entity: what settles a rejected op on the device.
public struct Verdict: Sendable, Equatable {
    public var entityID: UUID
    /// nil when the server has no such entity.
    public var entityType: String?
    public var deleted: Bool
    public var fields: [String: Value]
    public var sets: [String: [Value]]
    /// The last serverSeq that touched the entity (0 if none): a device that has pulled
    /// that far shows exactly this state.
    public var lastSeq: Int64
    /// The library's head when the verdict was read.
    public var head: Int64

    public var exists: Bool { entityType != nil }

    public init(entityID: UUID, entityType: String?, deleted: Bool, fields: [String: Value], sets: [String: [Value]],
                lastSeq: Int64, head: Int64) {
        self.entityID = entityID
        self.entityType = entityType
        self.deleted = deleted
        self.fields = fields
        self.sets = sets
        self.lastSeq = lastSeq
        self.head = head
    }
}

/// A request-level refusal: HTTP status, a stable code and a sentence
/// (plus the expected and actual values when there are two to compare).
public struct ProtocolError: Error, Sendable, Equatable, CustomStringConvertible {
    public var status: Int
    public var code: Code
    public var message: String
    /// For 429 and 503: how long the client should wait before trying again.
    public var retryAfterSeconds: Double?
    /// For `device_seq_reused`: the first deviceSeq the batch used again for an op the server
    /// does not hold, and the last deviceSeq the server holds of that device
    /// (`Chronicle-Reused-Device-Seq`, `Chronicle-Last-Device-Seq` over HTTP). `device_seq_gap`
    /// carries `lastDeviceSeq` too: a device that holds its next op as confirmed learns that the
    /// server lost it (its data restored from a backup).
    public var reusedDeviceSeq: Int64?
    public var lastDeviceSeq: Int64?
    /// For `cursor_ahead`: the library's last seq on the server (`Chronicle-Head` over HTTP).
    public var serverHead: Int64?
    /// For `cursor_too_old` (410): the op the server holds at the refused cursor, as a pull page
    /// names it (`PullPage.afterOpID`, `Chronicle-After-Op` over HTTP). A device that holds
    /// another op there went on from history the server lost, and queues its own ops from that
    /// history again before it starts from the snapshot.
    public var afterOpID: UUID?
    /// What the server's log says beside this refusal (a SQLite or PostgreSQL message, a file's
    /// path): never sent. The answer names the request's id, under which the log has it.
    public var detail: String?

    public init(_ status: Int, _ code: Code, _ message: String, retryAfterSeconds: Double? = nil) {
        self.status = status
        self.code = code
        self.message = message
        self.retryAfterSeconds = retryAfterSeconds
    }

    /// The HTTP headers that carry `reusedDeviceSeq` and `lastDeviceSeq`, and `serverHead`.
    public static let reusedDeviceSeqHeader = "Chronicle-Reused-Device-Seq"
    public static let lastDeviceSeqHeader = "Chronicle-Last-Device-Seq"
    public static let headHeader = "Chronicle-Head"

    public static func deviceSeqReused(device: String, reused: Int64, last: Int64) -> ProtocolError {
        var error = ProtocolError(409, .deviceSeqReused, """
            Device \(device) already pushed ops up to deviceSeq \(last), and this batch numbers a new op \(reused): \
            the device's store is an older copy of one that went on syncing (restored from a backup, or copied). \
            Number its unsent ops from \(last + 1) and push them again; nothing was written.
            """)
        error.reusedDeviceSeq = reused
        error.lastDeviceSeq = last
        return error
    }

    public init(_ status: Int, _ error: ChronicleError) {
        self.init(status, Code(error.code), error.message)
    }

    /// A refusal whose sentence is `message` and whose internal `detail` goes to the log only.
    public init(_ status: Int, _ code: Code, _ message: String, detail: String, retryAfterSeconds: Double? = nil) {
        self.init(status, code, message, retryAfterSeconds: retryAfterSeconds)
        self.detail = detail
    }

    public var description: String { "\(status) \(code): \(message)" }
}

/// The sync API as a device sees it, whatever carries it (HTTP, or an in-memory
/// call in tests and the simulator). Every call carries the device's bearer token.
public protocol SyncEndpoint: Sendable {
    func push(_ segment: Segment, token: String) async throws(ProtocolError) -> PushResponse
    func pull(library: UUID, after cursor: Int64, limit: Int, waitMilliseconds: Int, token: String) async throws(ProtocolError) -> PullPage
    func verdict(library: UUID, entity: UUID, token: String) async throws(ProtocolError) -> Verdict
    /// The newest snapshot of the library, as an LZ4 frame (`SnapshotCodec`); 404 when there is none.
    func snapshot(library: UUID, token: String) async throws(ProtocolError) -> [UInt8]
    /// The library's start image (one LZ4 frame of a device store, `StartImageInfo`) for a store of
    /// `storeFormat` and a schema of `schemaFingerprint`; nil where there is none for them.
    func startImage(library: UUID, storeFormat: Int64, schemaFingerprint: String, token: String) async throws(ProtocolError) -> [UInt8]?
    /// What the server holds of a blob (`BlobStatus`): a device resumes its upload from `received`.
    func blobStatus(library: UUID, blob: BlobRef, token: String) async throws(ProtocolError) -> BlobStatus
    /// Stores the chunk of a blob of `length` bytes that starts at `offset`, which must be what the
    /// server holds of it (`received`); the last one completes it once its SHA-256 matches.
    func putBlob(library: UUID, blob: BlobRef, length: Int64, offset: Int64, bytes: [UInt8], token: String) async throws(ProtocolError) -> BlobStatus
    /// Up to `count` bytes of a complete blob from `offset` (at most `BlobLimits.rangeBytesMax`).
    func blobRange(library: UUID, blob: BlobRef, offset: Int64, count: Int, token: String) async throws(ProtocolError) -> BlobRange
}

extension SyncEndpoint {
    /// Endpoints that serve no start images (test doubles) answer as a server without one.
    public func startImage(library: UUID, storeFormat: Int64, schemaFingerprint: String, token: String) async throws(ProtocolError) -> [UInt8]? { nil }
}
