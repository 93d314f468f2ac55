import CLZ4
import Foundation

/// Writes the fuzzers' seed inputs: valid segments and snapshots of various
/// shapes, each as an LZ4 frame (several frame layouts), as a bare body and,
/// for segments, as JSON, plus a few near misses (future version, no content
/// checksum, truncations). Deterministic: the same files on every run.
///
/// Usage: `fuzz-seeds SEGMENT_DIR SNAPSHOT_DIR` (built by `fuzz.sh`).
@main
struct FuzzSeeds {
    static func main() throws {
        let arguments = CommandLine.arguments
        guard arguments.count == 3 else {
            FileHandle.standardError.write(Data("usage: fuzz-seeds SEGMENT_DIR SNAPSHOT_DIR\n".utf8))
            exit(2)
        }
        var segments = SeedWriter(directory: URL(fileURLWithPath: arguments[1]))
        var snapshots = SeedWriter(directory: URL(fileURLWithPath: arguments[2]))
        for (name, segment) in SeedShapes.segments() {
            let body = SegmentCodec.encodeBody(segment)
            try segments.write("\(name).body", body)
            try segments.write("\(name).json", WireJSON.encode(segment))
            try segments.write("\(name).chsg", SegmentCodec.encode(segment))
            for (layout, frame) in SeedFrames.variants(of: body) { try segments.write("\(name).\(layout).chsg", frame) }
        }
        for (name, bytes) in SeedShapes.segmentNearMisses() { try segments.write(name, bytes) }
        for (name, snapshot) in SeedShapes.snapshots() {
            let body = SnapshotCodec.encodeBody(snapshot)
            try snapshots.write("\(name).body", body)
            try snapshots.write("\(name).chsn", SnapshotCodec.encode(snapshot))
            for (layout, frame) in SeedFrames.variants(of: body) { try snapshots.write("\(name).\(layout).chsn", frame) }
        }
        for (name, bytes) in SeedShapes.snapshotNearMisses() { try snapshots.write(name, bytes) }
        print("fuzz-seeds: \(segments.count) segment seeds, \(snapshots.count) snapshot seeds")
    }
}

struct SeedWriter {
    let directory: URL
    private(set) var count = 0

    init(directory: URL) { self.directory = directory }

    mutating func write(_ name: String, _ bytes: [UInt8]) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try Data(bytes).write(to: directory.appendingPathComponent(name))
        count += 1
    }
}

// MARK: - Frames

/// The same body in the frame layouts a reader must accept (and one it must refuse).
enum SeedFrames {
    static func variants(of body: [UInt8]) -> [(String, [UInt8])] {
        [
            ("nosize", frame(body, contentSize: false)),
            ("blockcrc", frame(body, blockChecksum: true)),
            ("independent-4blocks", frame(body, independent: true, chunks: 4)),
            ("linked-3blocks-hc", frame(body, chunks: 3, level: 9)),
            ("nocrc", frame(body, contentChecksum: false)),
        ]
    }

    /// One LZ4 frame; `chunks` > 1 flushes after each chunk so the frame holds several blocks.
    static func frame(_ body: [UInt8], contentSize: Bool = true, contentChecksum: Bool = true, blockChecksum: Bool = false,
                      independent: Bool = false, chunks: Int = 1, level: Int32 = 0) -> [UInt8] {
        var preferences = LZ4F_preferences_t()
        preferences.frameInfo.blockSizeID = LZ4F_max64KB
        preferences.frameInfo.blockMode = independent ? LZ4F_blockIndependent : LZ4F_blockLinked
        preferences.frameInfo.contentChecksumFlag = contentChecksum ? LZ4F_contentChecksumEnabled : LZ4F_noContentChecksum
        preferences.frameInfo.blockChecksumFlag = blockChecksum ? LZ4F_blockChecksumEnabled : LZ4F_noBlockChecksum
        preferences.frameInfo.contentSize = contentSize ? UInt64(body.count) : 0
        preferences.compressionLevel = level

        var context: OpaquePointer?
        precondition(LZ4F_isError(LZ4F_createCompressionContext(&context, UInt32(LZ4F_VERSION))) == 0)
        defer { LZ4F_freeCompressionContext(context) }
        let capacity = 64 + LZ4F_compressBound(body.count, &preferences) * (chunks + 2)
        var out = [UInt8](repeating: 0, count: capacity)
        var written = 0
        out.withUnsafeMutableBytes { destination in
            func check(_ result: Int) {
                precondition(LZ4F_isError(result) == 0, String(cString: LZ4F_getErrorName(result)))
                written += result
            }
            check(LZ4F_compressBegin(context, destination.baseAddress, capacity, &preferences))
            let step = max(1, (body.count + chunks - 1) / chunks)
            var start = 0
            body.withUnsafeBytes { source in
                while start < body.count {
                    let end = min(body.count, start + step)
                    check(LZ4F_compressUpdate(context, destination.baseAddress! + written, capacity - written,
                                              source.baseAddress! + start, end - start, nil))
                    check(LZ4F_flush(context, destination.baseAddress! + written, capacity - written, nil))
                    start = end
                }
            }
            check(LZ4F_compressEnd(context, destination.baseAddress! + written, capacity - written, nil))
        }
        return Array(out[..<written])
    }
}

// MARK: - Shapes

enum SeedShapes {
    static let library = UUID(uuidString: "00000000-0000-4000-8000-00000000000a")!
    static let devices = [
        UUID(uuidString: "00000000-0000-4000-8000-0000000000d1")!,
        UUID(uuidString: "00000000-0000-4000-8000-0000000000d2")!,
        Op.serverDeviceID,
    ]

    static func id(_ n: Int) -> UUID {
        UUID(uuidString: String(format: "%08lx-0000-4000-8000-%012lx", n >> 16, n))!
    }

    static let edgeValues: Payload = [
        "null": .null, "yes": .bool(true), "no": .bool(false),
        "min": .integer(.min), "max": .integer(.max), "zero": .integer(0), "minusOne": .integer(-1),
        "tenth": .real(0.1), "negativeZero": .real(-0.0), "huge": .real(1e300), "one": .real(1.0),
        "tiny": .real(.leastNonzeroMagnitude), "pi": .real(-3.141592653589793),
        "empty": .text(""), "emoji": .text("🧪 naïve café 日本語 👩‍👩‍👧"), "controls": .text("a\u{0}b\n\t\"\\\u{1F}/\u{7F}"),
        "": .text("an empty key"),
    ]

    static func op(_ n: Int, device: Int, deviceSeq: Int64, type: String, version: Int = 1, payload: Payload,
                   time: Int64, baseSeq: Int64, serverSeq: Int64? = nil, serverTime: Int64? = nil) -> Op {
        Op(opID: id(0x1000 + n), libraryID: library, deviceID: devices[device], deviceSeq: deviceSeq, type: type,
           version: version, entityID: id(0x2000 + n % 3), payload: payload, deviceTime: time, baseSeq: baseSeq,
           serverSeq: serverSeq, serverTime: serverTime)
    }

    /// Read-it-later traffic from three devices; confirmed from `firstSeq` when given.
    static func traffic(count: Int, firstSeq: Int64?) -> [Op] {
        let types = ["article.save", "article.tag", "highlight.create", "progress.set"]
        var seqs = [Int64](repeating: 0, count: devices.count)
        return (0..<count).map { i in
            let device = (i * 7 + i / 3) % devices.count
            seqs[device] += 1
            let payload: Payload
            switch i % 4 {
            case 0: payload = ["url": .text("https://example.com/\(i)"), "title": .text("Title \(i)")]
            case 1: payload = ["tag": .text(["swift", "design", "to-read"][i % 3])]
            case 2: payload = ["quote": .text("a line worth keeping"), "position": .integer(Int64(i * 40)), "color": .null]
            default: payload = ["fraction": .real(Double(i) / 7), "done": .bool(i % 2 == 0)]
            }
            let seq = firstSeq.map { $0 + Int64(i) }
            return op(i, device: device, deviceSeq: seqs[device], type: types[i % 4], payload: payload,
                      time: 1_717_000_000_000 + Int64(i) * 61_000, baseSeq: Int64(i / 2),
                      serverSeq: seq, serverTime: seq.map { 1_717_000_000_500 + $0 * 13 })
        }
    }

    static func edges(confirmed: Bool) -> [Op] {
        [
            op(0, device: 0, deviceSeq: .max, type: "kitchen.sink", version: .max, payload: edgeValues, time: .min,
               baseSeq: .max, serverSeq: confirmed ? .max - 2 : nil, serverTime: confirmed ? .min : nil),
            op(1, device: 0, deviceSeq: .min, type: "", version: -1, payload: [:], time: .max, baseSeq: .min,
               serverSeq: confirmed ? .max - 1 : nil, serverTime: confirmed ? .max : nil),
            op(2, device: 2, deviceSeq: 0, type: "ü\u{0}", version: 0, payload: ["emoji": .text("🙂")], time: 0, baseSeq: 0,
               serverSeq: confirmed ? .max : nil, serverTime: confirmed ? 0 : nil),
        ]
    }

    static func segments() -> [(String, Segment)] {
        func make(_ ops: [Op]) -> Segment { try! Segment(libraryID: library, ops: ops) }
        return [
            ("empty", make([])),
            ("doc-example", make([op(0, device: 0, deviceSeq: 7, type: "article.tag", payload: ["tag": .text("swift")],
                                     time: 1_717_000_000_000, baseSeq: 3, serverSeq: 42, serverTime: 1_717_000_000_500)])),
            ("one-unconfirmed", make(traffic(count: 1, firstSeq: nil))),
            ("seq-zero", make(traffic(count: 2, firstSeq: 0))),
            ("traffic-5-unconfirmed", make(traffic(count: 5, firstSeq: nil))),
            ("traffic-5-confirmed", make(traffic(count: 5, firstSeq: 1_001))),
            ("traffic-16-confirmed", make(traffic(count: 16, firstSeq: 1))),
            ("edges-unconfirmed", make(edges(confirmed: false))),
            ("edges-confirmed", make(edges(confirmed: true))),
        ]
    }

    static func segmentNearMisses() -> [(String, [UInt8])] {
        let body = SegmentCodec.encodeBody(segments()[1].1)
        var future = body
        future[4] = 2
        var flags = body
        flags[6] = 0x03
        return [
            ("future-version.body", future),
            ("future-version.chsg", LZ4Frame.compress(future)),
            ("unknown-flags.body", flags),
            ("truncated.body", Array(body.dropLast(5))),
            ("truncated.chsg", Array(SegmentCodec.encode(segments()[1].1).dropLast(3))),
            ("json-uppercase-ids.json", Array(String(decoding: WireJSON.encode(segments()[1].1), as: UTF8.self)
                .uppercased().replacingOccurrences(of: "\"OPID\"", with: "\"opID\"").utf8)),
            ("json-escapes.json", Array(#"{"libraryID":"00000000-0000-4000-8000-00000000000a","ops":[{"opID":"00000000-0000-4000-8000-000000000001","libraryID":"00000000-0000-4000-8000-00000000000a","deviceID":"00000000-0000-4000-8000-0000000000d1","deviceSeq":1,"type":"a\u00e9\ud83d\ude00\b\f\/","version":1,"entityID":"00000000-0000-4000-8000-000000000002","payload":{"r":2.5e-08,"e":1E+300,"z":-0.0,"i":-9223372036854775808,"n":null,"t":true},"deviceTime":0,"baseSeq":0}]}"#.utf8)),
        ]
    }

    static func snapshots() -> [(String, Snapshot)] {
        let articles = Snapshot.Table(name: "articles", columns: ["id", "title", "progress", "deleted_at"], rows: (0..<6).map { i in
            [.text(id(i).lowercased), .text("Title \(i)"), .real(Double(i) / 6), i % 3 == 0 ? .integer(1_717_000_000_000) : .null]
        })
        let tags = Snapshot.Table(name: "article_tags", columns: ["article_id", "tag"], rows: (0..<4).map { i in
            [.text(id(i).lowercased), .text(["swift", "design"][i % 2])]
        })
        let edges = Snapshot.Table(name: "edges", columns: ["v"], rows: [
            [.null], [.integer(.min)], [.integer(.max)], [.integer(0)], [.real(-0.0)], [.real(.leastNonzeroMagnitude)],
            [.real(1e300)], [.text("")], [.text("🧪 naïve\u{0}\n")],
        ])
        let conflicts = Snapshot.Table(name: "chronicle_conflicts", columns: ["entity_id", "field", "value", "op_id"], rows: [])
        func make(_ seq: Int64, _ tables: [Snapshot.Table], name: String = "readitlater", version: Int = 3) -> Snapshot {
            Snapshot(libraryID: library, seq: seq, schemaName: name, schemaVersion: version,
                     schemaFingerprint: String(repeating: "0123456789abcdef", count: 4), tables: tables)
        }
        return [
            ("no-tables", make(0, [])),
            ("empty-tables", make(12, [Snapshot.Table(name: "articles", columns: ["id"], rows: []), conflicts])),
            ("readitlater", make(1_234, [articles, tags, conflicts])),
            ("edges", Snapshot(libraryID: Op.serverDeviceID, seq: .max, schemaName: "", schemaVersion: Int(Int32.max),
                               schemaFingerprint: "", tables: [edges])),
            ("fieldservice", make(77, [Snapshot.Table(name: "jobs", columns: ["id", "notes", "stock"], rows: [
                [.text(id(9).lowercased), .text("replace the valve"), .integer(-3)],
            ])], name: "fieldservice", version: 1)),
        ]
    }

    static func snapshotNearMisses() -> [(String, [UInt8])] {
        let body = SnapshotCodec.encodeBody(snapshots()[2].1)
        var future = body
        future[4] = 2
        var flags = body
        flags[6] = 1
        return [
            ("future-version.body", future),
            ("future-version.chsn", LZ4Frame.compress(future)),
            ("unknown-flags.body", flags),
            ("truncated.body", Array(body.dropLast(7))),
            ("truncated.chsn", Array(SnapshotCodec.encode(snapshots()[2].1).dropLast(2))),
        ]
    }
}
