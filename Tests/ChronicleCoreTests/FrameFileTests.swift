import ChronicleCore
import ChronicleStore
import Foundation
import Testing

/// The store's file side of Core's frames: a snapshot's frame read from a file
/// (`SnapshotFile`), and LZ4 frames compressed from and decompressed into files.
@Suite struct SnapshotFileTests {
    @Test func aFrameInAFileReadsLikeOneInMemory() throws {
        let snapshot = StreamingDecodeTests.snapshot(seed: 5)
        let bytes = SnapshotCodec.encode(snapshot)
        let path = NSTemporaryDirectory() + "chronicle-snapshot-test-\(UUID().uuidString)"
        #expect(FileManager.default.createFile(atPath: path, contents: Data(bytes)))
        let frame = SnapshotFrame(file: path, temporary: true)
        var collect = StreamingDecodeTests.Collect()
        let header = try SnapshotCodec.read(frame, into: &collect)
        #expect(header.seq == snapshot.seq && collect.snapshot() == snapshot)
        #expect(try frame.byteCount() == bytes.count)
        #expect(try frame.decode() == snapshot)
        frame.discard()
        #expect(!FileManager.default.fileExists(atPath: path))
        // A damaged file is refused, whatever the visitor saw before the checksum.
        var damaged = bytes
        damaged[damaged.count / 2] ^= 0x20
        var seen = StreamingDecodeTests.Collect()
        #expect(chronicleError { try SnapshotCodec.read(SnapshotFrame(bytes: damaged), into: &seen) } != nil)
    }
}

/// `LZ4FrameWriter` (a frame written a piece at a time, as the server writes a start image) and
/// `LZ4FrameFileDecompressor` (one read into a file as it downloads): the frames are ones
/// `LZ4Frame` and the `lz4` tool read, at the fast and high-compression levels alike, and a
/// damaged or cut frame is refused.
@Suite struct LZ4FrameFileTests {
    @Test(arguments: [Int32(0), 3])
    func aFileCompressedInPiecesReadsBackAnyWay(level: Int32) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-lz4w-\(UUID().lowercased)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // Over the writer's piece size, so it is taken in several.
        let original = StreamingDecodeTests.sample(LZ4FrameWriter.pieceBytes * 2 + 12_345, seed: 7)
        try Data(original).write(to: URL(fileURLWithPath: directory + "/in"))
        let size = try LZ4FrameWriter.compressFile(directory + "/in", to: directory + "/in.lz4", level: level)
        let frame = [UInt8](try Data(contentsOf: URL(fileURLWithPath: directory + "/in.lz4")))
        #expect(Int64(frame.count) == size && frame.count < original.count)
        #expect(try LZ4Frame.decompress(frame, maxBytes: original.count) == original)
        #expect(try LZ4Tool.run(["-d", "-c", "-q"], input: frame) == original)

        // Into a file, in pieces of odd sizes.
        let out = try LZ4FrameFileDecompressor(creating: directory + "/out")
        var offset = 0, step = 1
        while offset < frame.count {
            let end = min(frame.count, offset + step)
            try frame[offset..<end].withUnsafeBytes { try out.feed($0) }
            offset = end
            step = step * 7 % 100_003 + 1
        }
        try out.finish()
        #expect([UInt8](try Data(contentsOf: URL(fileURLWithPath: directory + "/out"))) == original)

        // Cut short, or a byte changed: refused.
        let cut = try LZ4FrameFileDecompressor(creating: directory + "/cut")
        try frame[..<(frame.count / 2)].withUnsafeBytes { try cut.feed($0) }
        #expect(throws: ChronicleError.self) { try cut.finish() }
        var damaged = frame
        damaged[frame.count / 2] ^= 0x40
        let bad = try LZ4FrameFileDecompressor(creating: directory + "/bad")
        #expect(throws: ChronicleError.self) {
            try damaged.withUnsafeBytes { try bad.feed($0) }
            try bad.finish()
        }
    }
}
