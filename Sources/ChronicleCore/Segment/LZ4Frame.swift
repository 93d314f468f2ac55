import CLZ4
import Foundation

/// Whole-buffer LZ4 *frame* compression (the format the `lz4` command-line tool
/// reads and writes), with the content checksum on and the content size
/// recorded, so damage is detected and a reader can size its buffer up front.
///
/// ```swift
/// let frame = LZ4Frame.compress(body)
/// let again = try LZ4Frame.decompress(frame, maxBytes: 64 << 20)   // == body
/// ```
///
/// See <https://github.com/lz4/lz4/blob/dev/doc/lz4_Frame_format.md>.
public enum LZ4Frame {
    /// The magic number every LZ4 frame starts with (little-endian on the wire).
    public static let magic: UInt32 = 0x184D_2204

    /// Compresses `bytes` into one LZ4 frame (64 KB linked blocks, fast level,
    /// content size and xxHash-32 content checksum recorded).
    public static func compress(_ bytes: [UInt8]) -> [UInt8] {
        var preferences = LZ4F_preferences_t()
        preferences.frameInfo.blockSizeID = LZ4F_max64KB
        preferences.frameInfo.blockMode = LZ4F_blockLinked
        preferences.frameInfo.contentChecksumFlag = LZ4F_contentChecksumEnabled
        preferences.frameInfo.contentSize = UInt64(bytes.count)
        preferences.compressionLevel = 0
        let bound = LZ4F_compressFrameBound(bytes.count, &preferences)
        return [UInt8](unsafeUninitializedCapacity: bound) { out, initialized in
            let written = bytes.withUnsafeBytes { source in
                LZ4F_compressFrame(out.baseAddress, bound, source.baseAddress, source.count, &preferences)
            }
            // With a destination of the documented bound the call cannot fail.
            precondition(LZ4F_isError(written) == 0, "LZ4F_compressFrame failed: \(errorName(written))")
            initialized = written
        }
    }

    /// Decompresses exactly one LZ4 frame that must fill `bytes`.
    ///
    /// Refuses, with a `ChronicleError` and never a crash or a hang: bytes that
    /// are not an LZ4 frame (`malformed_frame`), a truncated frame or bytes after
    /// its end (`malformed_frame`), a header, block or content checksum mismatch
    /// (`segment_checksum`), a frame without a content checksum when
    /// `requireChecksum` is set (`malformed_frame`), and output beyond `maxBytes`,
    /// whether declared in the header or discovered while decoding
    /// (`segment_too_large`).
    public static func decompress(_ bytes: [UInt8], maxBytes: Int, requireChecksum: Bool = true)
        throws(ChronicleError) -> [UInt8]
    {
        try bytes.withUnsafeBytes { source in
            Result { () throws(ChronicleError) in try decompress(source, maxBytes: maxBytes, requireChecksum: requireChecksum) }
        }.get()
    }

    /// Decompresses one frame from any contiguous bytes (`Data`, a buffer pointer, …).
    public static func decompress(_ bytes: some ContiguousBytes, maxBytes: Int, requireChecksum: Bool = true)
        throws(ChronicleError) -> [UInt8]
    {
        try bytes.withUnsafeBytes { source in
            Result { () throws(ChronicleError) in try decompress(source, maxBytes: maxBytes, requireChecksum: requireChecksum) }
        }.get()
    }

    private static func decompress(_ source: UnsafeRawBufferPointer, maxBytes: Int, requireChecksum: Bool)
        throws(ChronicleError) -> [UInt8]
    {
        precondition(maxBytes >= 0, "maxBytes must not be negative")
        var context: OpaquePointer?
        guard LZ4F_isError(LZ4F_createDecompressionContext(&context, UInt32(LZ4F_VERSION))) == 0, let context else {
            preconditionFailure("LZ4F_createDecompressionContext failed (out of memory)")
        }
        defer { LZ4F_freeDecompressionContext(context) }
        let (headerBytes, declared) = try readHeader(context, source, maxBytes: maxBytes, requireChecksum: requireChecksum)
        guard let base = source.baseAddress else { preconditionFailure("a frame with a header has an address") }
        var position = headerBytes

        // One byte more than the declared or allowed size, so running past it
        // shows up as output rather than as a stall. LZ4 cannot expand more than
        // 255-fold, so a header that declares more is not believed up front.
        let allowed = maxBytes == Int.max ? maxBytes : maxBytes + 1
        let ceiling = declared > 0 && Int(declared) < allowed ? Int(declared) + 1 : allowed
        var capacity = min(ceiling, max(64 << 10, source.count.multipliedReportingOverflow(by: 256).partialValue))
        var out = [UInt8](repeating: 0, count: capacity)
        var written = 0
        while true {
            if written == capacity {
                guard capacity < allowed else { throw tooLarge(maxBytes, declared: nil) }
                capacity = capacity > allowed / 2 ? allowed : capacity * 2
                out.append(contentsOf: repeatElement(0, count: capacity - out.count))
            }
            var sourceSize = source.count - position
            var destinationSize = capacity - written
            let hint = out.withUnsafeMutableBytes { destination in
                LZ4F_decompress(context, destination.baseAddress! + written, &destinationSize,
                                base + position, &sourceSize, nil)
            }
            if LZ4F_isError(hint) != 0 { throw frameError(hint) }
            position += sourceSize
            written += destinationSize
            if written > maxBytes { throw tooLarge(maxBytes, declared: nil) }
            if hint == 0 { break }  // the frame is complete and its checksum verified
            if sourceSize == 0 && destinationSize == 0 && written < capacity {
                guard position == source.count else {
                    throw ChronicleError(.malformedFrame, "The LZ4 frame could not be decoded past byte \(position).")
                }
                throw ChronicleError(.malformedFrame, "The LZ4 frame is truncated: it ends after \(source.count) bytes "
                    + "with \(hint) more expected.")
            }
        }
        guard position == source.count else {
            throw ChronicleError(.malformedFrame, "\(source.count - position) unexpected bytes follow the LZ4 frame "
                + "(it ends at byte \(position)).")
        }
        out.removeLast(out.count - written)
        return out
    }

    /// Checks a frame's start and reads its header into `context`: the magic, the header
    /// itself, a content checksum when one is required, the declared size against `maxBytes`.
    /// Returns the header's length and the declared size (0: not recorded). `source` must hold
    /// the whole header when the frame is whole (`LZ4FrameStream` waits for enough bytes).
    static func readHeader(_ context: OpaquePointer, _ source: UnsafeRawBufferPointer, maxBytes: Int, requireChecksum: Bool)
        throws(ChronicleError) -> (headerBytes: Int, declared: UInt64)
    {
        guard source.count >= 4, let base = source.baseAddress else {
            throw ChronicleError(.malformedFrame, "The data is \(source.count) bytes long, too short to be an LZ4 frame.")
        }
        let found = UInt32(littleEndian: source.loadUnaligned(as: UInt32.self))
        guard found == magic else {
            let start = source.prefix(4).map { Hex.encode([$0]) }.joined(separator: " ")
            throw ChronicleError(.malformedFrame, "The data is not an LZ4 frame: it starts with \(start) "
                + "rather than the magic 04 22 4d 18.")
        }
        var info = LZ4F_frameInfo_t()
        var headerBytes = source.count
        let headerResult = LZ4F_getFrameInfo(context, &info, base, &headerBytes)
        if LZ4F_isError(headerResult) != 0 {
            let name = errorName(headerResult)
            if name.contains("frameHeader_incomplete") || name.contains("srcSize_tooSmall") {
                throw ChronicleError(.malformedFrame, "The LZ4 frame is truncated inside its header.")
            }
            throw frameError(headerResult)
        }
        if requireChecksum && info.contentChecksumFlag != LZ4F_contentChecksumEnabled {
            throw ChronicleError(.malformedFrame, "The LZ4 frame has no content checksum, so damage could not be detected.")
        }
        if info.contentSize > UInt64(maxBytes) {
            throw tooLarge(maxBytes, declared: info.contentSize)
        }
        return (headerBytes, info.contentSize)
    }

    static func tooLarge(_ maxBytes: Int, declared: UInt64?) -> ChronicleError {
        if let declared {
            return ChronicleError(.segmentTooLarge, "The LZ4 frame declares \(declared) bytes of content; "
                + "the limit is \(maxBytes).")
        }
        return ChronicleError(.segmentTooLarge, "The LZ4 frame decompresses to more than the \(maxBytes) bytes allowed.")
    }

    static func frameError(_ code: Int) -> ChronicleError {
        let name = errorName(code)
        if name.contains("Checksum_invalid") {
            let which = name.contains("header") ? "header" : name.contains("block") ? "block" : "content"
            return ChronicleError(.segmentChecksum, "The LZ4 frame's \(which) checksum does not match: "
                + "the data was damaged.")
        }
        if name.contains("frameSize_wrong") {
            return ChronicleError(.malformedFrame, "The LZ4 frame's content does not match the size its header declares.")
        }
        return ChronicleError(.malformedFrame, "The LZ4 frame is corrupt (\(name)).")
    }

    static func errorName(_ code: Int) -> String {
        String(cString: LZ4F_getErrorName(code))
    }
}
