extension ChronicleError.Code {
    /// A segment body (binary or JSON) breaks the format: wrong magic, truncated,
    /// trailing bytes, a bad index, invalid UTF-8, a gap in `serverSeq`, a
    /// duplicate op id, a wrong JSON type or key.
    public static let malformedSegment = ChronicleError.Code(rawValue: "malformed_segment")
    /// The bytes are not a well-formed LZ4 frame: bad magic, truncated, trailing
    /// bytes after the frame, or a corrupt block.
    public static let malformedFrame = ChronicleError.Code(rawValue: "malformed_frame")
    /// An LZ4 frame's header, block or content checksum does not match: the bytes
    /// were damaged in transit or at rest.
    public static let segmentChecksum = ChronicleError.Code(rawValue: "segment_checksum")
    /// The segment was written by a newer format version than this build reads.
    public static let futureSegmentVersion = ChronicleError.Code(rawValue: "future_segment_version")
    /// A decoded size, an op count or one op is over the decoder's limits
    /// (this is also how decompression bombs are refused).
    public static let segmentTooLarge = ChronicleError.Code(rawValue: "segment_too_large")
}
