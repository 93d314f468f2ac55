import Foundation

/// An immutable, contiguous run of one library's ops: the unit of transfer
/// (sync push and pull bodies) and of archival.
///
/// A segment is either *confirmed* (every op has `serverSeq` and `serverTime`,
/// and the seqs are contiguous and ascending) or *unconfirmed* (no op has
/// either, as in a push of outbox ops). It never mixes the two, never holds
/// two ops with the same `opID`, and every op belongs to `libraryID`.
///
/// ```swift
/// let segment = try Segment(libraryID: library, ops: confirmedOps)
/// let body = SegmentCodec.encode(segment)          // an LZ4 frame
/// let back = try SegmentCodec.decode(body)
/// assert(back == segment && back.firstSeq == confirmedOps.first?.serverSeq)
/// ```
public struct Segment: Sendable, Equatable {
    public var libraryID: UUID
    public var ops: [Op]

    /// True when the ops carry server order; false for an empty segment.
    public var isConfirmed: Bool { ops.first?.serverSeq != nil }
    /// The first op's `serverSeq`; nil when unconfirmed or empty.
    public var firstSeq: Int64? { ops.first?.serverSeq }
    /// The last op's `serverSeq`; nil when unconfirmed or empty.
    public var lastSeq: Int64? { ops.last?.serverSeq }

    /// Checks the segment rules and throws `malformed_segment` (or
    /// `wrong_library`) naming the first op that breaks one.
    public init(libraryID: UUID, ops: [Op]) throws(ChronicleError) {
        try Self.validate(libraryID: libraryID, ops: ops)
        self.init(validatedLibraryID: libraryID, ops: ops)
    }

    /// For decoders that have already enforced every rule while reading.
    init(validatedLibraryID libraryID: UUID, ops: [Op]) {
        self.libraryID = libraryID
        self.ops = ops
    }

    static func validate(libraryID: UUID, ops: [Op]) throws(ChronicleError) {
        guard let first = ops.first else { return }
        let confirmed = first.serverSeq != nil
        var previousSeq: Int64 = 0
        var seen = Set<UUID>(minimumCapacity: ops.count)
        for (index, op) in ops.enumerated() {
            guard op.libraryID == libraryID else {
                throw ChronicleError(.wrongLibrary, "Op \(index) (\(op.opID.lowercased)) belongs to library "
                    + "\(op.libraryID.lowercased), not to the segment's library \(libraryID.lowercased).")
            }
            guard (op.serverSeq == nil) == (op.serverTime == nil) else {
                throw ChronicleError(.malformedSegment, "Op \(index) (\(op.opID.lowercased)) has only one of serverSeq "
                    + "and serverTime; a confirmed op has both, an unconfirmed op neither.")
            }
            if let seq = op.serverSeq {
                guard confirmed else { throw mixed(index, op) }
                if index == 0 {
                    guard seq >= 0 else {
                        throw ChronicleError(.malformedSegment, "Op 0 has the negative serverSeq \(seq).")
                    }
                } else {
                    guard previousSeq < Int64.max, seq == previousSeq + 1 else {
                        throw ChronicleError(.malformedSegment, "Op \(index) has serverSeq \(seq) after \(previousSeq); "
                            + "a segment's server seqs are contiguous and ascending.")
                    }
                }
                previousSeq = seq
            } else if confirmed {
                throw mixed(index, op)
            }
            guard seen.insert(op.opID).inserted else {
                throw ChronicleError(.malformedSegment, "Op \(index) repeats the op id \(op.opID.lowercased).")
            }
            for (key, value) in op.payload {
                if case .real(let d) = value, !d.isFinite {
                    throw ChronicleError(.malformedSegment, "Op \(index)'s payload field '\(key)' is \(d); "
                        + "a segment carries only finite reals.")
                }
            }
        }
    }

    private static func mixed(_ index: Int, _ op: Op) -> ChronicleError {
        ChronicleError(.malformedSegment, "Op \(index) (\(op.opID.lowercased)) is "
            + (op.serverSeq == nil ? "unconfirmed" : "confirmed") + " but op 0 is not; "
            + "a segment's ops are all confirmed or all unconfirmed.")
    }
}
