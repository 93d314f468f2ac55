/// Large files (an episode's audio, a job's photos and signatures) travel beside the ops, not
/// in them: an op names a file by its content address (`BlobRef`, written into fields such as
/// `blob_ref` and `audio_ref`), and the bytes go up in chunks that resume where they stopped and
/// come down in ranges (`Schemas/api/openapi.yaml`, "Blobs"). They never hold up the outbox.

/// A file's content address: the SHA-256 of its bytes, written `sha256:<64 lowercase hex>`.
///
/// ```swift
/// let ref = BlobRef.of(Array("hello".utf8))
/// ref.description    // "sha256:2cf24dba…"
/// BlobRef("SHA256:2CF24DBA…") == ref
/// ```
public struct BlobRef: Hashable, Sendable, CustomStringConvertible, Comparable {
    /// The digest as 64 lowercase hex digits.
    public let hex: String

    /// Reads `sha256:<hex>` or the 64 hex digits alone, in either case; nil for anything else.
    public init?(_ text: String) {
        var body = Substring(text)
        if body.count == 71, body.prefix(7).lowercased() == "sha256:" { body = body.dropFirst(7) }
        guard body.utf8.count == 64, body.utf8.allSatisfy({ Self.isHexDigit($0) }) else { return nil }
        hex = body.lowercased()
    }

    /// The address of a 32-byte SHA-256 digest.
    public init(digest: [UInt8]) {
        precondition(digest.count == 32, "a SHA-256 digest has 32 bytes, not \(digest.count)")
        hex = digest.map { byte in byte < 16 ? "0" + String(byte, radix: 16) : String(byte, radix: 16) }.joined()
    }

    /// The address of `bytes`.
    public static func of(_ bytes: [UInt8]) -> BlobRef {
        let hasher = SHA256Hasher()
        hasher.update(bytes)
        return BlobRef(digest: hasher.finalize())
    }

    public var description: String { "sha256:" + hex }

    public static func < (a: BlobRef, b: BlobRef) -> Bool { a.hex < b.hex }

    private static func isHexDigit(_ c: UInt8) -> Bool {
        (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66)
    }

    /// The sentence for text that is not a blob address.
    public static func badRefMessage(_ text: String) -> String {
        "'\(text.prefix(80))' is not a blob address; write it as sha256: followed by the 64 hex digits of the file's SHA-256."
    }
}

/// What the server holds of one blob (`GET /v1/libraries/{library}/blobs/{blob}/status`, and the
/// answer to each uploaded chunk): a device resumes an upload from `received`.
public struct BlobStatus: Codable, Sendable, Equatable {
    /// `sha256:<hex>`.
    public var blob: String
    /// The length the upload declared; nil while nothing of it has arrived.
    public var length: Int64?
    /// Bytes the server holds, from the start: the next chunk starts here.
    public var received: Int64
    /// Every byte arrived and their SHA-256 is the address: the blob can be downloaded.
    public var complete: Bool

    public init(blob: BlobRef, length: Int64?, received: Int64, complete: Bool) {
        self.blob = blob.description
        self.length = length
        self.received = received
        self.complete = complete
    }
}

/// A downloaded range of a blob: its bytes, where they start, and the blob's whole length.
public struct BlobRange: Sendable, Equatable {
    public var offset: Int64
    public var bytes: [UInt8]
    public var length: Int64

    public init(offset: Int64, bytes: [UInt8], length: Int64) {
        self.offset = offset
        self.bytes = bytes
        self.length = length
    }
}

/// The caps on blobs, the same on both sides; past them a request is refused with a stable code.
public enum BlobLimits {
    /// Bytes of one uploaded chunk (`chunk_too_large`); a device sends chunks of `transferBytes`.
    public static let chunkBytesMax = 8 << 20
    /// The chunks a store keeps a blob in (device and server alike: each uploaded chunk is one row).
    public static let chunkBytes = 1 << 20
    /// What a device sends in one chunk, and asks for in one range: fewer, larger requests (the
    /// per-request cost dominates at 1 MiB), and at most this much sent again after a cut.
    public static let transferBytes = 4 << 20
    /// Bytes one download answer carries; a longer range is answered with its first this many
    /// bytes (`Content-Range` says which).
    public static let rangeBytesMax = 8 << 20
    /// The largest blob (`blob_too_large`): 2 GiB.
    public static let blobBytesMax: Int64 = 2 << 30
    /// The media type of chunks and ranges.
    public static let mediaType = "application/octet-stream"
    /// The header naming an uploaded chunk's blob length (the `length` query parameter, for curl).
    public static let lengthHeader = "Chronicle-Blob-Length"
}
