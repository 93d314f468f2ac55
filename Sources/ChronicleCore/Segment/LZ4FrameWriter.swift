import CLZ4
import Foundation

/// Compresses one LZ4 frame a piece at a time (the counterpart of `LZ4FrameStream`): a large
/// input (a store file of hundreds of MB) never has to sit in memory, whole or compressed.
/// The frame is the one `LZ4Frame.compress` makes (64 KB linked blocks, fast level, content
/// checksum on), so the `lz4` tool opens it; the content size is recorded when given.
///
/// ```swift
/// let writer = LZ4FrameWriter(contentSize: size)
/// try writer.begin(sink)
/// try writer.feed(piece, sink)   // as often as needed
/// try writer.finish(sink)
/// ```
public final class LZ4FrameWriter {
    private let context: OpaquePointer
    private var preferences = LZ4F_preferences_t()
    private var output: [UInt8] = []
    /// The most one `feed` takes at a time (its output buffer is sized for it).
    public static let pieceBytes = 1 << 20

    /// `level`: LZ4's compression level: 0 the fast one (`lz4 -1`), 3 and up its high-compression
    /// mode (`lz4 -3` …): slower to write, the same speed to read.
    public init(contentSize: UInt64? = nil, level: Int32 = 0) {
        var context: OpaquePointer?
        guard LZ4F_isError(LZ4F_createCompressionContext(&context, UInt32(LZ4F_VERSION))) == 0, let context else {
            preconditionFailure("LZ4F_createCompressionContext failed (out of memory)")
        }
        self.context = context
        preferences.frameInfo.blockSizeID = LZ4F_max64KB
        preferences.frameInfo.blockMode = LZ4F_blockLinked
        preferences.frameInfo.contentChecksumFlag = LZ4F_contentChecksumEnabled
        preferences.frameInfo.contentSize = contentSize ?? 0
        preferences.compressionLevel = level
        output = [UInt8](repeating: 0, count: max(LZ4F_compressBound(Self.pieceBytes, &preferences), 64))
    }

    deinit { LZ4F_freeCompressionContext(context) }

    /// Writes the frame's header.
    public func begin(_ sink: (UnsafeRawBufferPointer) throws -> Void) throws {
        let written = output.withUnsafeMutableBytes { LZ4F_compressBegin(context, $0.baseAddress, $0.count, &preferences) }
        try emit(written, sink)
    }

    /// Compresses `input` (any size; taken in pieces of at most `pieceBytes`).
    public func feed(_ input: UnsafeRawBufferPointer, _ sink: (UnsafeRawBufferPointer) throws -> Void) throws {
        var position = 0
        while position < input.count {
            let count = min(Self.pieceBytes, input.count - position)
            let written = output.withUnsafeMutableBytes {
                LZ4F_compressUpdate(context, $0.baseAddress, $0.count, input.baseAddress! + position, count, nil)
            }
            try emit(written, sink)
            position += count
        }
    }

    /// Flushes what is held and writes the end mark and the content checksum.
    public func finish(_ sink: (UnsafeRawBufferPointer) throws -> Void) throws {
        let written = output.withUnsafeMutableBytes { LZ4F_compressEnd(context, $0.baseAddress, $0.count, nil) }
        try emit(written, sink)
    }

    private func emit(_ written: Int, _ sink: (UnsafeRawBufferPointer) throws -> Void) throws {
        // With an output buffer of the documented bound the calls cannot fail, unless the content
        // size given does not match what was fed (then the frame would be refused on reading).
        if LZ4F_isError(written) != 0 {
            throw ChronicleError(.malformedFrame, "LZ4 compression failed: \(LZ4Frame.errorName(written)).")
        }
        if written > 0 { try output.withUnsafeBytes { try sink(UnsafeRawBufferPointer(rebasing: $0[..<written])) } }
    }
}
