import ChronicleCore
import Foundation

/// Confirmed ops encoded as one segment, ready to be stored (`LogLifecycle.storeSegment`), or as
/// one block of the device's hot log (`chronicle_log_blocks`, unframed).
package struct EncodedSegment: Sendable {
    package var firstSeq: Int64
    package var lastSeq: Int64
    package var body: [UInt8]
    /// The body in an LZ4 frame, as stored (empty for a log block).
    package var frame: [UInt8]
    /// `SegmentFilter` of the entities the ops touch.
    var filter: [UInt8]
    /// The newest server time among the ops.
    var newestTime: Int64 = 0

    var opCount: Int64 { lastSeq - firstSeq + 1 }

    package init(firstSeq: Int64, lastSeq: Int64, body: [UInt8], frame: [UInt8], filter: [UInt8], newestTime: Int64 = 0) {
        (self.firstSeq, self.lastSeq, self.body, self.frame, self.filter, self.newestTime) = (firstSeq, lastSeq, body, frame, filter, newestTime)
    }
}

/// One sealed segment's bookkeeping (its ops stay in `body`, an LZ4 frame).
public struct SegmentInfo: Sendable, Equatable {
    public var firstSeq: Int64
    public var lastSeq: Int64
    public var opCount: Int64
    /// Compressed bytes in the store.
    public var frameBytes: Int64
    /// Uncompressed segment body bytes.
    public var bodyBytes: Int64
    /// SHA-256 (hex) of the previous segment's digest followed by this body: a gap,
    /// a reorder or a changed byte anywhere breaks the chain.
    public var digest: String
    public var previousDigest: String
}

extension DeviceStore {

    /// The sealed segments, oldest first.
    public func segments() throws -> [SegmentInfo] {
        try read { db in
            try db.query("SELECT first_seq, last_seq, op_count, length(body), body_bytes, digest, previous_digest FROM chronicle_segments ORDER BY first_seq") {
                SegmentInfo(firstSeq: $0.int(0), lastSeq: $0.int(1), opCount: $0.int(2), frameBytes: $0.int(3), bodyBytes: $0.int(4),
                            digest: $0.text(5), previousDigest: $0.text(6))
            }
        }
    }

    /// The raw LZ4 frame of the segment starting at `firstSeq` (what `lz4 -d` opens).
    public func segmentFrame(firstSeq: Int64) throws -> [UInt8]? {
        try read { db in
            try db.query("SELECT body FROM chronicle_segments WHERE first_seq = ?1", [.integer(firstSeq)]) { row in
                row.withBytes(0) { Array($0) }
            }.first
        }
    }

}
