import ChronicleCore
import Foundation
import Testing

/// The piece-by-piece readers a snapshot download goes through: `LZ4FrameStream` and
/// `SnapshotBodyReader`. Whatever the piece sizes, they give what the whole-buffer decoders
/// give, and refuse what those refuse.
@Suite struct StreamingDecodeTests {

    /// Bytes that compress somewhat: words from a small vocabulary with random noise.
    static func sample(_ count: Int, seed: UInt64) -> [UInt8] {
        var rng = SplitMix64(seed: seed)
        let words = ["offline", "first", "sync", "segment", "snapshot", "chronicle", "库", "🙂"].map { Array($0.utf8) }
        var out: [UInt8] = []
        while out.count < count {
            if rng.below(4) == 0 { out.append(UInt8(truncatingIfNeeded: rng.next())) } else { out += words[rng.below(words.count)] }
        }
        return Array(out.prefix(count))
    }

    /// Feeds `bytes` to `feed` in random pieces of 1…`largest` bytes.
    static func inPieces(_ bytes: [UInt8], seed: UInt64, largest: Int, _ feed: (UnsafeRawBufferPointer) throws -> Void) throws {
        var rng = SplitMix64(seed: seed)
        try bytes.withUnsafeBytes { raw in
            var start = 0
            while start < raw.count {
                let end = min(raw.count, start + 1 + rng.below(largest))
                try feed(UnsafeRawBufferPointer(rebasing: raw[start..<end]))
                start = end
            }
        }
    }

    static func inflate(_ frame: [UInt8], seed: UInt64, largest: Int, maxBytes: Int = 1 << 26, outputChunk: Int = 4096) throws -> [UInt8] {
        let stream = LZ4FrameStream(maxBytes: maxBytes, outputChunk: outputChunk)
        var out: [UInt8] = []
        try inPieces(frame, seed: seed, largest: largest) { piece in try stream.feed(piece) { out.append(contentsOf: $0) } }
        try stream.finish { out.append(contentsOf: $0) }
        return out
    }

    @Test(arguments: [1, 7, 19, 300, 70_000])
    func aFrameInAnyPiecesGivesItsBytes(largestPiece: Int) throws {
        for (index, size) in [0, 1, 100, 65_536, 300_001].enumerated() {
            let bytes = Self.sample(size, seed: UInt64(index))
            let frame = LZ4Frame.compress(bytes)
            #expect(try Self.inflate(frame, seed: UInt64(largestPiece), largest: largestPiece) == bytes, "size \(size)")
        }
    }

    @Test func aBrokenFrameIsRefusedPieceByPieceAsWhole() throws {
        let bytes = Self.sample(200_000, seed: 3)
        let frame = LZ4Frame.compress(bytes)
        // Every truncation (a sample of them: the header, block boundaries, the checksum).
        for cut in Array(0..<40) + stride(from: 40, to: frame.count, by: 997).map({ $0 }) + [frame.count - 4, frame.count - 1] {
            let error = chronicleError { _ = try Self.inflate(Array(frame[..<cut]), seed: UInt64(cut), largest: 5_000) }
            #expect(error?.code == .malformedFrame, "cut at \(cut): \(String(describing: error))")
        }
        // Bytes after the end.
        #expect(chronicleError { _ = try Self.inflate(frame + [0, 1, 2], seed: 1, largest: 5_000) }?.code == .malformedFrame)
        // A damaged byte in the content: never the wrong bytes.
        for position in stride(from: 20, to: frame.count - 4, by: 4_999) {
            var damaged = frame
            damaged[position] ^= 0x55
            do {
                let out = try Self.inflate(damaged, seed: UInt64(position), largest: 3_000)
                Issue.record("a damaged byte at \(position) decoded to \(out.count) bytes")
            } catch let error as ChronicleError {
                #expect([.segmentChecksum, .malformedFrame].contains(error.code), "\(error)")
            }
        }
        // Not a frame; no content checksum; too large.
        #expect(chronicleError { _ = try Self.inflate(Array("not a frame at all, really".utf8), seed: 1, largest: 3) }?.code == .malformedFrame)
        #expect(chronicleError { _ = try Self.inflate(frame, seed: 1, largest: 5_000, maxBytes: bytes.count - 1) }?.code == .segmentTooLarge)
        #expect(try Self.inflate(frame, seed: 1, largest: 5_000, maxBytes: bytes.count) == bytes)
    }

    // MARK: - Snapshot bodies

    static func snapshot(seed: UInt64) -> Snapshot {
        var rng = SplitMix64(seed: seed)
        let tables = (0..<4).map { t in
            Snapshot.Table(name: "table\(t)", columns: ["id", "n", "x", "text"], rows: (0..<(t * 37 + rng.below(50))).map { r in
                [.text("row-\(r)"), .integer(Int64(bitPattern: rng.next()) >> rng.below(64)), rng.below(3) == 0 ? .null : .real(Double(r) / 7),
                 .text(String(decoding: sample(rng.below(4) == 0 ? 9_000 : rng.below(40), seed: rng.next()).filter { $0 < 0x80 }, as: UTF8.self))]
            })
        }
        return Snapshot(libraryID: UUID(), seq: Int64(rng.below(1_000_000)), schemaName: "readitlater", schemaVersion: 3,
                        schemaFingerprint: "f\(seed)", tables: tables)
    }

    struct Collect: SnapshotVisitor {
        var header: SnapshotHeader?
        var tables: [Snapshot.Table] = []
        var failAtRow: Int?
        var rows = 0
        mutating func header(_ header: SnapshotHeader) throws { self.header = header }
        mutating func table(_ name: String, columns: [String], rowCount: Int) throws {
            tables.append(Snapshot.Table(name: name, columns: columns, rows: []))
        }
        mutating func row(_ values: [Value]) throws {
            rows += 1
            if rows == failAtRow { throw CancellationError() }
            tables[tables.count - 1].rows.append(values)
        }
        func snapshot() -> Snapshot? {
            header.map { Snapshot(libraryID: $0.libraryID, seq: $0.seq, schemaName: $0.schemaName, schemaVersion: $0.schemaVersion,
                                  schemaFingerprint: $0.schemaFingerprint, tables: tables) }
        }
    }

    @Test(arguments: [1, 13, 4_096, 100_000])
    func aBodyInAnyPiecesGivesTheSnapshot(largestPiece: Int) throws {
        for seed in 1...4 as ClosedRange<UInt64> {
            let snapshot = Self.snapshot(seed: seed)
            let body = SnapshotCodec.encodeBody(snapshot)
            var reader = SnapshotBodyReader()
            var collect = Collect()
            try Self.inPieces(body, seed: seed &* 31, largest: largestPiece) { try reader.feed($0, into: &collect) }
            try reader.finish(into: &collect)
            #expect(collect.snapshot() == snapshot, "seed \(seed)")
            #expect(reader.offset == body.count)
        }
    }

    @Test func everyTruncatedBodyIsRefusedWhenItEnds() throws {
        let body = SnapshotCodec.encodeBody(Self.snapshot(seed: 9))
        for cut in stride(from: 0, to: body.count, by: max(1, body.count / 300)) {
            var reader = SnapshotBodyReader()
            var collect = Collect()
            let error = chronicleError {
                try Self.inPieces(Array(body[..<cut]), seed: UInt64(cut), largest: 2_000) { try reader.feed($0, into: &collect) }
                try reader.finish(into: &collect)
            }
            #expect(error?.code == .malformedSnapshot, "cut at \(cut)")
            // The whole-buffer decoder refuses the same prefix.
            #expect(chronicleError { _ = try SnapshotCodec.decodeBody(Array(body[..<cut])) }?.code == .malformedSnapshot)
        }
        var reader = SnapshotBodyReader()
        var collect = Collect()
        #expect(chronicleError { try Self.inPieces(body + [7], seed: 1, largest: 999) { try reader.feed($0, into: &collect) } }?.code == .malformedSnapshot)
    }

    @Test func aVisitorErrorStopsTheReadAndPassesThrough() throws {
        let frame = SnapshotFrame(Self.snapshot(seed: 2))
        var collect = Collect(failAtRow: 10)
        #expect(throws: CancellationError.self) { try SnapshotCodec.read(frame, into: &collect) }
        #expect(collect.rows == 10)
    }
}
