import ChronicleCore
import CLZ4
import Foundation
#if canImport(Glibc)
import Glibc
#endif

// LZ4 frames to and from files: the file side of Core's `LZ4FrameWriter` and `LZ4FrameStream`.

extension LZ4FrameWriter {
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
