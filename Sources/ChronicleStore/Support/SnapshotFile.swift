import ChronicleCore
import Foundation

/// A snapshot's frame in a file (a download, or one an operator names), read a piece at a time.
public struct SnapshotFile: SnapshotFrameSource {
    public let path: String
    /// Removed by `discard()`: a download the caller no longer needs.
    public let temporary: Bool

    public init(path: String, temporary: Bool) {
        self.path = path
        self.temporary = temporary
    }

    public func byteCount() throws -> Int {
        do {
            return (try FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.intValue ?? 0
        } catch {
            throw ChronicleError(.malformedSnapshot, "The snapshot file \(path) cannot be read: \(error.localizedDescription)")
        }
    }

    public func forEachPiece(pieceBytes: Int, _ body: (UnsafeRawBufferPointer) throws -> Void) throws {
        guard let file = fopen(path, "rb") else {
            throw ChronicleError(.malformedSnapshot, "The snapshot file \(path) cannot be opened: \(String(cString: strerror(errno))).")
        }
        defer { fclose(file) }
        var piece = [UInt8](repeating: 0, count: pieceBytes)
        while true {
            let count = piece.withUnsafeMutableBytes { fread($0.baseAddress, 1, pieceBytes, file) }
            if count > 0 { try piece.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[..<count])) } }
            if count < pieceBytes {
                if ferror(file) != 0 { throw ChronicleError(.malformedSnapshot, "The snapshot file \(path) could not be read to its end.") }
                return
            }
        }
    }

    public func discard() {
        if temporary { try? FileManager.default.removeItem(atPath: path) }
    }
}

extension SnapshotFrame {
    /// The frame in the file at `path`; `temporary`: `discard()` removes the file.
    public init(file path: String, temporary: Bool) {
        self.init(source: SnapshotFile(path: path, temporary: temporary))
    }
}
