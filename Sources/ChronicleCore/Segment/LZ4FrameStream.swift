import CLZ4
import Foundation

/// Decompresses one LZ4 frame a piece at a time, so a large frame (a snapshot
/// download) never has to sit in memory whole, compressed or not.
///
/// Feed it the frame's bytes in any pieces; it hands the decompressed bytes to
/// the sink as they come (in runs of at most `outputChunk` bytes), then
/// `finish()` says whether the frame was complete. It refuses what
/// `LZ4Frame.decompress` refuses, with the same codes: bytes that are not a
/// frame, a frame without a content checksum when one is required, a damaged
/// block or content checksum, output past `maxBytes`, bytes after the frame's
/// end, and a frame that stops early.
public final class LZ4FrameStream {
    private let context: OpaquePointer
    private let maxBytes: Int
    private let requireChecksum: Bool
    private var output: [UInt8]
    /// The frame's first bytes, held until its header can be read whole.
    private var pendingHeader: [UInt8] = []
    private var headerRead = false
    /// Compressed bytes taken so far, and decompressed bytes handed out.
    public private(set) var consumed = 0
    public private(set) var produced = 0
    /// True once the frame's end (and its content checksum) went by.
    public private(set) var isComplete = false

    /// The most an LZ4 frame header takes (magic, descriptor, content size, dictionary id, checksum).
    static let headerMax = 19

    public init(maxBytes: Int, requireChecksum: Bool = true, outputChunk: Int = 256 << 10) {
        precondition(maxBytes >= 0 && outputChunk > 0, "maxBytes must not be negative, outputChunk must be positive")
        var context: OpaquePointer?
        guard LZ4F_isError(LZ4F_createDecompressionContext(&context, UInt32(LZ4F_VERSION))) == 0, let context else {
            preconditionFailure("LZ4F_createDecompressionContext failed (out of memory)")
        }
        self.context = context
        self.maxBytes = maxBytes
        self.requireChecksum = requireChecksum
        output = [UInt8](repeating: 0, count: outputChunk)
    }

    deinit { LZ4F_freeDecompressionContext(context) }

    /// Takes the next piece of the frame; calls `sink` with each run of decompressed bytes
    /// (valid only during the call). Errors from `sink` pass through unchanged.
    public func feed(_ input: UnsafeRawBufferPointer, _ sink: (UnsafeRawBufferPointer) throws -> Void) throws {
        guard !input.isEmpty else { return }
        if isComplete {
            throw ChronicleError(.malformedFrame, "\(input.count) unexpected bytes follow the LZ4 frame (it ends at byte \(consumed)).")
        }
        if !headerRead {
            pendingHeader.append(contentsOf: input)
            guard pendingHeader.count >= Self.headerMax else { return }
            let held = pendingHeader
            pendingHeader = []
            try held.withUnsafeBytes { try start($0, sink) }
            return
        }
        try decompress(input, sink)
    }

    /// Says the frame's bytes are all in: throws if it stopped early.
    public func finish(_ sink: (UnsafeRawBufferPointer) throws -> Void) throws {
        if !headerRead {
            let held = pendingHeader
            pendingHeader = []
            try held.withUnsafeBytes { try start($0, sink) }
        }
        guard isComplete else {
            throw ChronicleError(.malformedFrame, "The LZ4 frame is truncated: it ends after \(consumed) bytes.")
        }
    }

    /// Reads the header from the frame's first bytes (at least `headerMax` of them, or all there
    /// is), then decompresses whatever follows it.
    private func start(_ first: UnsafeRawBufferPointer, _ sink: (UnsafeRawBufferPointer) throws -> Void) throws {
        headerRead = true
        let (headerBytes, _) = try LZ4Frame.readHeader(context, first, maxBytes: maxBytes, requireChecksum: requireChecksum)
        consumed = headerBytes
        try decompress(UnsafeRawBufferPointer(rebasing: first[headerBytes...]), sink)
    }

    private func decompress(_ input: UnsafeRawBufferPointer, _ sink: (UnsafeRawBufferPointer) throws -> Void) throws {
        var position = 0
        while true {
            // Also called with nothing left to take: LZ4 holds back output that did not fit.
            var sourceSize = input.count - position
            var destinationSize = output.count
            let hint = output.withUnsafeMutableBytes { destination in
                LZ4F_decompress(context, destination.baseAddress!, &destinationSize,
                                sourceSize == 0 ? nil : input.baseAddress! + position, &sourceSize, nil)
            }
            if LZ4F_isError(hint) != 0 { throw LZ4Frame.frameError(hint) }
            position += sourceSize
            consumed += sourceSize
            if destinationSize > 0 {
                produced += destinationSize
                if produced > maxBytes {
                    throw LZ4Frame.tooLarge(maxBytes, declared: nil)
                }
                try output.withUnsafeBytes { try sink(UnsafeRawBufferPointer(rebasing: $0[..<destinationSize])) }
            }
            if hint == 0 {
                isComplete = true
                if position < input.count {
                    throw ChronicleError(.malformedFrame, "\(input.count - position) unexpected bytes follow the LZ4 frame (it ends at byte \(consumed)).")
                }
                return
            }
            if sourceSize == 0 && destinationSize == 0 {
                guard position == input.count else {
                    throw ChronicleError(.malformedFrame, "The LZ4 frame could not be decoded past byte \(consumed).")
                }
                return   // everything taken and given out: the next piece continues the frame
            }
        }
    }
}
