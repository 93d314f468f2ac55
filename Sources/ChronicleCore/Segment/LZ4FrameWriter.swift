import CLZ4
import Foundation
#if canImport(Glibc)
import Glibc
#endif

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

    /// Compresses the file at `source` into a new file at `destination` (replaced if there),
    /// made durable (fsync) before this returns. Returns the frame's size in bytes.
    @discardableResult
    public static func compressFile(_ source: String, to destination: String, level: Int32 = 0) throws -> Int64 {
        guard let input = FileHandle(forReadingAtPath: source) else {
            throw ChronicleError(.fileUnreadable, "\(source) cannot be read.")
        }
        defer { try? input.close() }
        let size = (try? FileManager.default.attributesOfItem(atPath: source)[.size] as? NSNumber)?.uint64Value
        try? FileManager.default.removeItem(atPath: destination)
        guard FileManager.default.createFile(atPath: destination, contents: nil, attributes: [.posixPermissions: 0o600]), let output = FileHandle(forWritingAtPath: destination) else {
            throw ChronicleError(.fileUnreadable, "\(destination) cannot be written.")
        }
        defer { try? output.close() }
        let writer = LZ4FrameWriter(contentSize: size, level: level)
        var written: Int64 = 0
        let sink: (UnsafeRawBufferPointer) throws -> Void = { bytes in
            try output.write(contentsOf: Data(bytes))
            written += Int64(bytes.count)
        }
        try writer.begin(sink)
        while let piece = try input.read(upToCount: pieceBytes), !piece.isEmpty {
            try piece.withUnsafeBytes { try writer.feed($0, sink) }
        }
        try writer.finish(sink)
        try output.synchronize()
        return written
    }
}

/// Decompresses one LZ4 frame into a new file a piece at a time (a start image as it downloads):
/// `feed` the frame's bytes in any pieces, then `finish`. The frame's faults are
/// `LZ4FrameStream`'s; a full disk is `disk_full`, another write failure `file_unreadable`.
public final class LZ4FrameFileDecompressor {
    public let path: String
    private let fd: Int32
    private let stream = LZ4FrameStream(maxBytes: Int.max / 2, outputChunk: 4 << 20)

    /// Creates (or empties) the file at `path`.
    public init(creating path: String) throws {
        self.path = path
        // Data of the library (a start image): its owner's alone, as every file Chronicle keeps.
        fd = Glibc.open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw ChronicleError(.fileUnreadable, "\(path) cannot be written: \(String(cString: strerror(errno))).") }
    }

    deinit { close(fd) }

    public func feed(_ bytes: UnsafeRawBufferPointer) throws {
        try stream.feed(bytes) { try write($0) }
    }

    /// Says the frame is all in: throws if it stopped early or its checksum does not match.
    public func finish() throws {
        try stream.finish { try write($0) }
    }

    /// Decompresses a whole frame held in memory into a new file at `destination`; on failure
    /// nothing is left there.
    public static func decompress(_ frame: [UInt8], to destination: String) throws {
        do {
            let output = try LZ4FrameFileDecompressor(creating: destination)
            try frame.withUnsafeBytes { try output.feed($0) }
            try output.finish()
        } catch {
            try? FileManager.default.removeItem(atPath: destination)
            throw error
        }
    }

    /// Decompresses the frame in the file at `source` into a new file at `destination`, in plain
    /// reads of a few MB (through `FileHandle` and `Data` this took three times as long).
    public static func decompressFile(_ source: String, to destination: String) throws {
        let input = Glibc.open(source, O_RDONLY | O_CLOEXEC)
        guard input >= 0 else { throw ChronicleError(.fileUnreadable, "\(source) cannot be read: \(String(cString: strerror(errno))).") }
        defer { close(input) }
        let output = try LZ4FrameFileDecompressor(creating: destination)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 4 << 20, alignment: 16)
        defer { buffer.deallocate() }
        while true {
            let n = Glibc.read(input, buffer.baseAddress, buffer.count)
            if n < 0 {
                if errno == EINTR { continue }
                throw ChronicleError(.fileUnreadable, "\(source) cannot be read: \(String(cString: strerror(errno))).")
            }
            if n == 0 { break }
            try output.feed(UnsafeRawBufferPointer(rebasing: buffer[..<n]))
        }
        try output.finish()
    }

    private func write(_ bytes: UnsafeRawBufferPointer) throws {
        var written = 0
        while written < bytes.count {
            let n = Glibc.write(fd, bytes.baseAddress! + written, bytes.count - written)
            if n < 0 {
                if errno == EINTR { continue }
                if errno == ENOSPC { throw ChronicleError(.diskFull, "The disk is full; \(path) could not be written. Free some space and try again.") }
                throw ChronicleError(.fileUnreadable, "\(path) cannot be written: \(String(cString: strerror(errno))).")
            }
            written += n
        }
    }
}
