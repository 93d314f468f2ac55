import ChronicleCore
import Foundation
import Testing

/// Replays what libFuzzer kept (`Tests/Fuzz/Corpus/`) and every input it ever
/// crashed on (`Tests/Fuzz/Crashes/`) through the decoders, without the fuzzer,
/// checking the contract `Tools/fuzz/FuzzContract.swift` enforces while
/// fuzzing: each decoder refuses with a `ChronicleError` whose code its format
/// document lists, or returns a value that encodes and decodes back to itself.
/// Refresh the corpus with `bash Tools/fuzz/fuzz.sh` (see `Tools/fuzz/README.md`).
@Suite struct FuzzCorpusTests {
    static let fuzzDirectory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fuzz")

    /// Every file under `Corpus/<target>/` and `Crashes/<target>/`, at any depth, in a stable order.
    static func inputs(_ target: String) -> [URL] {
        ["Corpus", "Crashes"].flatMap { kind -> [URL] in
            let root = fuzzDirectory.appendingPathComponent(kind).appendingPathComponent(target)
            guard let walk = FileManager.default.enumerator(at: root, includingPropertiesForKeys: [.isRegularFileKey]) else {
                return []
            }
            return walk.compactMap { $0 as? URL }
                .filter { (try? $0.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true }
        }.sorted { $0.path < $1.path }
    }

    @Test func theCorpusIsWhereTheFuzzerLeftIt() {
        #expect(Self.inputs("segment").count >= 50, "expected the segment corpus under \(Self.fuzzDirectory.path)/Corpus/segment")
        #expect(Self.inputs("snapshot").count >= 20, "expected the snapshot corpus under \(Self.fuzzDirectory.path)/Corpus/snapshot")
    }

    @Test func everySegmentInputIsRefusedCleanlyOrRoundTrips() throws {
        var accepted = 0
        for file in Self.inputs("segment") {
            let replay = FuzzReplay(file: file.lastPathComponent)
            accepted += try replay.segment(Array(Data(contentsOf: file)))
        }
        // The seeds are valid segments in every form; if none decodes, the corpus is not what it claims.
        #expect(accepted > 0)
    }

    @Test func everySnapshotInputIsRefusedCleanlyOrRoundTrips() throws {
        var accepted = 0
        for file in Self.inputs("snapshot") {
            let replay = FuzzReplay(file: file.lastPathComponent)
            accepted += try replay.snapshot(Array(Data(contentsOf: file)))
        }
        #expect(accepted > 0)
    }
}

/// The decoders' contract for one input, as `Tools/fuzz/FuzzContract.swift`
/// states it, recording an issue (naming the file) where libFuzzer would abort.
private struct FuzzReplay {
    static let segmentCodes: Set<ChronicleError.Code> = [
        .malformedFrame, .segmentChecksum, .segmentTooLarge, .futureSegmentVersion, .malformedSegment,
    ]
    static let jsonCodes: Set<ChronicleError.Code> = [.malformedSegment, .segmentTooLarge, .wrongLibrary]
    static let frameCodes: Set<ChronicleError.Code> = [.malformedFrame, .segmentChecksum, .segmentTooLarge]
    static let snapshotCodes: Set<ChronicleError.Code> = [
        .malformedFrame, .segmentChecksum, .segmentTooLarge, .malformedSnapshot, .futureSnapshotVersion,
    ]
    static let snapshotBodyCodes: Set<ChronicleError.Code> = [.malformedSnapshot, .futureSnapshotVersion]

    static let tightSegmentLimits = SegmentCodec.Limits(maxOps: 3, maxOpBytes: 160, maxDecodedBytes: 1_024)
    static let tightSnapshotLimits: SnapshotCodec.Limits = {
        var limits = SnapshotCodec.Limits()
        limits.maxDecodedBytes = 1_024
        limits.maxTables = 2
        limits.maxColumns = 3
        limits.maxRows = 4
        return limits
    }()

    let file: String

    func fail(_ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
        Issue.record("\(file): \(what)", sourceLocation: sourceLocation)
    }

    func decode<T>(_ decoder: String, _ codes: Set<ChronicleError.Code>, _ body: () throws(ChronicleError) -> T) -> T? {
        do {
            return try body()
        } catch {
            if !codes.contains(error.code) { fail("\(decoder) refused with the undocumented code \(error.code): \(error)") }
            if error.message.isEmpty { fail("\(decoder) refused with an empty message [\(error.code)]") }
            return nil
        }
    }

    func mustDecode<T>(_ decoder: String, _ body: () throws(ChronicleError) -> T) -> T? {
        do {
            return try body()
        } catch {
            fail("\(decoder) refused its own encoding: \(error)")
            return nil
        }
    }

    /// Limits only refuse: what decodes under tight limits decodes to the same value under the defaults.
    func agree<T: Equatable>(tight: T?, full: T?, _ decoder: String) {
        guard let tight else { return }
        if tight != full { fail("\(decoder) decoded differently (or only) under tight limits") }
    }

    // MARK: - Segments

    /// Returns how many of the decoders accepted the input.
    func segment(_ bytes: [UInt8]) -> Int {
        let framed = decode("SegmentCodec.decode", Self.segmentCodes) { () throws(ChronicleError) in
            try SegmentCodec.decode(bytes)
        }
        agree(tight: decode("SegmentCodec.decode (tight limits)", Self.segmentCodes) { () throws(ChronicleError) in
            try SegmentCodec.decode(bytes, limits: Self.tightSegmentLimits)
        }, full: framed, "SegmentCodec.decode")

        let body = decode("SegmentCodec.decodeBody", Self.segmentCodes) { () throws(ChronicleError) in
            try SegmentCodec.decodeBody(bytes)
        }
        agree(tight: decode("SegmentCodec.decodeBody (tight limits)", Self.segmentCodes) { () throws(ChronicleError) in
            try SegmentCodec.decodeBody(bytes, limits: Self.tightSegmentLimits)
        }, full: body, "SegmentCodec.decodeBody")

        for entity in [body?.ops.first?.entityID, UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))].compactMap({ $0 }) {
            let filtered = decode("SegmentCodec.decodeOps(ofEntity:)", Self.segmentCodes) { () throws(ChronicleError) in
                try SegmentCodec.decodeOps(ofEntity: entity, body: bytes)
            }
            if let body, filtered?.libraryID != body.libraryID || filtered?.ops != body.ops.filter({ $0.entityID == entity }) {
                fail("SegmentCodec.decodeOps(ofEntity:) disagrees with decodeBody")
            }
        }

        let json = decode("WireJSON.decode", Self.jsonCodes) { () throws(ChronicleError) in
            try WireJSON.decode(bytes)
        }
        agree(tight: decode("WireJSON.decode (tight limits)", Self.jsonCodes) { () throws(ChronicleError) in
            try WireJSON.decode(bytes, limits: Self.tightSegmentLimits)
        }, full: json, "WireJSON.decode")

        let lenient = decode("LZ4Frame.decompress (checksum optional)", Self.frameCodes) { () throws(ChronicleError) in
            try LZ4Frame.decompress(bytes, maxBytes: 1 << 20, requireChecksum: false)
        }
        agree(tight: decode("LZ4Frame.decompress", Self.frameCodes) { () throws(ChronicleError) in
            try LZ4Frame.decompress(bytes, maxBytes: 1 << 20)
        }, full: lenient, "LZ4Frame.decompress")
        if let lenient {
            let again = mustDecode("LZ4Frame.decompress (round trip)") { () throws(ChronicleError) in
                try LZ4Frame.decompress(LZ4Frame.compress(lenient), maxBytes: 1 << 20)
            }
            if again != lenient { fail("LZ4Frame: decompress(compress(x)) != x") }
        }

        for (decoder, segment) in [("SegmentCodec.decode", framed), ("SegmentCodec.decodeBody", body), ("WireJSON.decode", json)] {
            if let segment { check(segment, from: decoder) }
        }
        return [framed, body, json].count { $0 != nil }
    }

    func check(_ segment: Segment, from decoder: String) {
        do {
            let rebuilt = try Segment(libraryID: segment.libraryID, ops: segment.ops)
            if rebuilt != segment { fail("\(decoder): Segment.init changed a decoded segment") }
        } catch {
            fail("\(decoder) returned a segment that Segment.init refuses: \(error)")
            return  // encoding such a segment traps
        }
        let body = SegmentCodec.encodeBody(segment)
        if let back = mustDecode("SegmentCodec.decodeBody (round trip of \(decoder))", { () throws(ChronicleError) in
            try SegmentCodec.decodeBody(body)
        }) {
            if back != segment { fail("\(decoder): decodeBody(encodeBody(x)) != x") }
            // Byte equality also tells -0.0 from 0.0, which `==` on Double does not.
            if SegmentCodec.encodeBody(back) != body { fail("\(decoder): encodeBody is not stable across a round trip") }
        }
        let frame = SegmentCodec.encode(segment)
        if let back = mustDecode("SegmentCodec.decode (round trip of \(decoder))", { () throws(ChronicleError) in
            try SegmentCodec.decode(frame)
        }), back != segment {
            fail("\(decoder): decode(encode(x)) != x")
        }
        let json = WireJSON.encode(segment)
        if let back = mustDecode("WireJSON.decode (round trip of \(decoder))", { () throws(ChronicleError) in
            try WireJSON.decode(json)
        }) {
            if back != segment { fail("\(decoder): WireJSON.decode(WireJSON.encode(x)) != x") }
            if WireJSON.encode(back) != json { fail("\(decoder): WireJSON.encode is not stable across a round trip") }
        }
    }

    // MARK: - Snapshots

    func snapshot(_ bytes: [UInt8]) -> Int {
        let framed = decode("SnapshotCodec.decode", Self.snapshotCodes) { () throws(ChronicleError) in
            try SnapshotCodec.decode(bytes)
        }
        agree(tight: decode("SnapshotCodec.decode (tight limits)", Self.snapshotCodes) { () throws(ChronicleError) in
            try SnapshotCodec.decode(bytes, limits: Self.tightSnapshotLimits)
        }, full: framed, "SnapshotCodec.decode")

        let body = decode("SnapshotCodec.decodeBody", Self.snapshotBodyCodes) { () throws(ChronicleError) in
            try SnapshotCodec.decodeBody(bytes)
        }
        agree(tight: decode("SnapshotCodec.decodeBody (tight limits)", Self.snapshotBodyCodes) { () throws(ChronicleError) in
            try SnapshotCodec.decodeBody(bytes, limits: Self.tightSnapshotLimits)
        }, full: body, "SnapshotCodec.decodeBody")

        for (decoder, snapshot) in [("SnapshotCodec.decode", framed), ("SnapshotCodec.decodeBody", body)] {
            if let snapshot { check(snapshot, from: decoder) }
        }
        return [framed, body].count { $0 != nil }
    }

    func check(_ snapshot: Snapshot, from decoder: String) {
        if snapshot.seq < 0 { fail("\(decoder) returned the negative seq \(snapshot.seq)") }
        if Set(snapshot.tables.map(\.name)).count != snapshot.tables.count { fail("\(decoder) returned a table twice") }
        for table in snapshot.tables {
            if table.columns.isEmpty { fail("\(decoder) returned the table \(table.name) without columns") }
            for row in table.rows {
                guard row.count == table.columns.count else {
                    fail("\(decoder) returned a row of the wrong width in \(table.name)")
                    return  // encoding such a snapshot traps
                }
                for value in row {
                    if case .bool = value { fail("\(decoder) returned a boolean, which a snapshot cannot hold") }
                    if case .real(let d) = value, !d.isFinite { fail("\(decoder) returned the non-finite real \(d)") }
                }
            }
        }
        let body = SnapshotCodec.encodeBody(snapshot)
        if let back = mustDecode("SnapshotCodec.decodeBody (round trip of \(decoder))", { () throws(ChronicleError) in
            try SnapshotCodec.decodeBody(body)
        }) {
            if back != snapshot { fail("\(decoder): decodeBody(encodeBody(x)) != x") }
            if SnapshotCodec.encodeBody(back) != body { fail("\(decoder): encodeBody is not stable across a round trip") }
        }
        let frame = SnapshotCodec.encode(snapshot)
        if let back = mustDecode("SnapshotCodec.decode (round trip of \(decoder))", { () throws(ChronicleError) in
            try SnapshotCodec.decode(frame)
        }), back != snapshot {
            fail("\(decoder): decode(encode(x)) != x")
        }
    }
}
