import CSQLite
import ChronicleCore
import ChronicleStore
import ChronicleTesting
import Foundation

/// The compression side of the lifecycle measurement: the sealed segments' bodies taken
/// back out of the store, the `lz4` tool on them, and the snapshot's sizes.
extension LifecycleBenchmark {
    /// Every sealed segment's body (decompressed from its frame) appended to `file`; the same bodies
    /// re-encoded from their decoded ops and LZ4-compressed in process, each step timed on its own.
    func segmentBodies(_ store: DeviceStore, file: String) throws -> (file: String, segments: Int, bytes: Int64,
                                                                      encodeSeconds: Double, compressSeconds: Double) {
        _ = FileManager.default.createFile(atPath: file, contents: nil)
        guard let out = FileHandle(forWritingAtPath: file) else { throw BenchError("lifecycle: cannot write \(file)") }
        defer { try? out.close() }
        var bytes: Int64 = 0, encode: UInt64 = 0, compress: UInt64 = 0
        let segments = try store.segments()
        for info in segments {
            guard let frame = try store.segmentFrame(firstSeq: info.firstSeq) else { throw BenchError("lifecycle: segment \(info.firstSeq) vanished") }
            let body = try LZ4Frame.decompress(frame, maxBytes: SegmentCodec.Limits().maxDecodedBytes)
            guard Int64(body.count) == info.bodyBytes else { throw BenchError("lifecycle: segment \(info.firstSeq) body is \(body.count) bytes, recorded \(info.bodyBytes)") }
            try out.write(contentsOf: body)
            bytes += Int64(body.count)
            let segment = try SegmentCodec.decodeBody(body)
            let t0 = nowNanoseconds()
            let again = SegmentCodec.encodeBody(segment)
            let t1 = nowNanoseconds()
            let compressed = LZ4Frame.compress(body)
            let t2 = nowNanoseconds()
            guard again == body, compressed.count > 0 else { throw BenchError("lifecycle: segment \(info.firstSeq) does not re-encode to the same body") }
            encode += t1 - t0
            compress += t2 - t1
        }
        return (file, segments.count, bytes, Double(encode) / 1e9, Double(compress) / 1e9)
    }

    /// `lz4 -1 -c FILE`, output to /dev/null, `runs` times (seconds of each), then once into a file for its size.
    func runLZ4(_ file: String, runs: Int) throws -> (seconds: [Double], outputBytes: Int64) {
        guard FileManager.default.isExecutableFile(atPath: Self.lz4Tool) else { throw BenchError("lifecycle: \(Self.lz4Tool) is missing (apt-get install lz4)") }
        func lz4(into output: ChildProcess.Output) throws -> Double {
            let t0 = nowNanoseconds()
            let result = try ChildProcess.run(Self.lz4Tool, ["-1", "-c", "-q", file], stdout: output, stderr: .inherit)
            let seconds = Double(nowNanoseconds() - t0) / 1e9
            guard result.status == 0 else { throw BenchError("lifecycle: lz4 exited with status \(result.status)") }
            return seconds
        }
        let seconds = try (0..<runs).map { _ in try lz4(into: .null) }
        let compressed = file + ".lz4"
        _ = try lz4(into: .file(compressed))
        let size = fileBytes(compressed)
        try? FileManager.default.removeItem(atPath: compressed)
        return (seconds, size)
    }

    /// The newest snapshot's frame, its body (LZ4-decompressed, and again decoded and re-encoded), and the lz4 tool on that body.
    func snapshotSizes(_ path: String) throws -> SnapshotSizes {
        let frame = try RawDatabase(path: path, readOnly: true).blob("SELECT body FROM chronicle_snapshots ORDER BY seq DESC LIMIT 1")
        guard let frame else { throw BenchError("lifecycle: the compacted store has no snapshot") }
        let body = try LZ4Frame.decompress(frame, maxBytes: SnapshotCodec.Limits().maxDecodedBytes)
        let snapshot = try SnapshotCodec.decode(frame)
        let reencoded = SnapshotCodec.encodeBody(snapshot)
        let file = directory + "/lifecycle-snapshot-body.bin"
        try Data(body).write(to: URL(fileURLWithPath: file))
        let tool = try runLZ4(file, runs: 0)
        try? FileManager.default.removeItem(atPath: file)
        return SnapshotSizes(seq: snapshot.seq, rows: snapshot.rowCount, frameBytes: Int64(frame.count), bodyBytes: Int64(body.count),
                             reencodedBytes: Int64(reencoded.count), lz4ToolBytes: tool.outputBytes)
    }
}

extension RawDatabase {
    /// The first column of the first row as bytes (nil when there is no row).
    func blob(_ sql: String) throws -> [UInt8]? {
        let statement = try prepare(sql)
        try bind(statement, [])
        defer { sqlite3_reset(statement) }
        let rc = sqlite3_step(statement)
        guard rc == SQLITE_ROW else {
            guard rc == SQLITE_DONE else { throw BenchError("SQLite error \(rc): \(errorMessage)") }
            return nil
        }
        let count = Int(sqlite3_column_bytes(statement, 0))
        guard count > 0, let base = sqlite3_column_blob(statement, 0) else { return [] }
        return Array(UnsafeRawBufferPointer(start: base, count: count))
    }
}
