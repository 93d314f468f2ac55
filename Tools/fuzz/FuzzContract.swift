import Foundation

/// The contract every decoder keeps, whatever bytes it is handed: it either
/// refuses them with a `ChronicleError` whose code its format document lists,
/// or returns a value that encodes and decodes back to itself.
///
/// Compiled into each fuzz target next to the library sources (see `fuzz.sh`).
/// A broken promise aborts, so libFuzzer records the input as a crash; the
/// decoders' typed throws (`throws(ChronicleError)`) already rule out any
/// other error type at compile time. `Tests/ChronicleCoreTests/FuzzCorpusTests.swift`
/// checks the same contract on the kept corpus without the fuzzer.
enum FuzzContract {
    /// `Schemas/segment/segment-v1.md` §3, binary form (framed or bare body).
    static let segmentCodes: Set<ChronicleError.Code> = [
        .malformedFrame, .segmentChecksum, .segmentTooLarge, .futureSegmentVersion, .malformedSegment,
    ]
    /// `segment-v1.md` §3 and §4: the JSON form adds `wrong_library`.
    static let jsonCodes: Set<ChronicleError.Code> = [.malformedSegment, .segmentTooLarge, .wrongLibrary]
    /// `LZ4Frame.decompress` alone.
    static let frameCodes: Set<ChronicleError.Code> = [.malformedFrame, .segmentChecksum, .segmentTooLarge]
    /// `Schemas/snapshot/snapshot-v1.md`: the frame's codes, then the body's.
    static let snapshotCodes: Set<ChronicleError.Code> = [
        .malformedFrame, .segmentChecksum, .segmentTooLarge, .malformedSnapshot, .futureSnapshotVersion,
    ]
    static let snapshotBodyCodes: Set<ChronicleError.Code> = [.malformedSnapshot, .futureSnapshotVersion]

    /// Prints what broke and aborts: libFuzzer saves the input and its stack.
    static func violated(_ what: String) -> Never {
        FileHandle.standardError.write(Data("\nFUZZ CONTRACT VIOLATED: \(what)\n".utf8))
        abort()
    }

    static func require(_ condition: Bool, _ what: @autoclosure () -> String) {
        if !condition { violated(what()) }
    }

    /// Runs one decoder; a refusal must carry one of `codes`.
    static func decode<T>(_ decoder: String, _ codes: Set<ChronicleError.Code>,
                          _ body: () throws(ChronicleError) -> T) -> T? {
        do {
            return try body()
        } catch {
            require(codes.contains(error.code), "\(decoder) refused with the undocumented code \(error.code): \(error)")
            require(!error.message.isEmpty, "\(decoder) refused with an empty message [\(error.code)]")
            return nil
        }
    }

    /// A decoder that must accept (a re-encoding of something it accepted).
    static func mustDecode<T>(_ decoder: String, _ body: () throws(ChronicleError) -> T) -> T {
        do {
            return try body()
        } catch {
            violated("\(decoder) refused its own encoding: \(error)")
        }
    }

    /// Limits only refuse: whatever decodes under tight limits decodes to the
    /// same value under the defaults.
    static func agree<T: Equatable>(tight: T?, full: T?, _ decoder: String) {
        guard let tight else { return }
        require(full != nil, "\(decoder) accepted under tight limits what it refused under the defaults")
        require(tight == full, "\(decoder) decoded differently under tight limits")
    }
}

// MARK: - Segments

extension FuzzContract {
    /// Small enough that fuzz-sized inputs reach every limit.
    static let tightSegmentLimits = SegmentCodec.Limits(maxOps: 3, maxOpBytes: 160, maxDecodedBytes: 1_024)

    /// A decoded segment keeps the rules `Segment.init` checks, and survives
    /// every encoding: binary body (byte for byte), LZ4 frame and JSON.
    static func checkSegment(_ segment: Segment, from decoder: String) {
        do {
            let rebuilt = try Segment(libraryID: segment.libraryID, ops: segment.ops)
            require(rebuilt == segment, "\(decoder): Segment.init changed a decoded segment")
        } catch {
            violated("\(decoder) returned a segment that Segment.init refuses: \(error)")
        }
        if let first = segment.ops.first {
            require(segment.isConfirmed == (first.serverSeq != nil), "\(decoder): isConfirmed disagrees with op 0")
        }

        let body = SegmentCodec.encodeBody(segment)
        let fromBody = mustDecode("SegmentCodec.decodeBody (round trip of \(decoder))") { () throws(ChronicleError) in
            try SegmentCodec.decodeBody(body)
        }
        require(fromBody == segment, "\(decoder): decodeBody(encodeBody(x)) != x")
        // Byte equality also tells -0.0 from 0.0, which `==` on Double does not.
        require(SegmentCodec.encodeBody(fromBody) == body, "\(decoder): encodeBody is not stable across a round trip")

        let frame = SegmentCodec.encode(segment)
        let fromFrame = mustDecode("SegmentCodec.decode (round trip of \(decoder))") { () throws(ChronicleError) in
            try SegmentCodec.decode(frame)
        }
        require(fromFrame == segment, "\(decoder): decode(encode(x)) != x")

        let json = WireJSON.encode(segment)
        let fromJSON = mustDecode("WireJSON.decode (round trip of \(decoder))") { () throws(ChronicleError) in
            try WireJSON.decode(json)
        }
        require(fromJSON == segment, "\(decoder): WireJSON.decode(WireJSON.encode(x)) != x")
        require(WireJSON.encode(fromJSON) == json, "\(decoder): WireJSON.encode is not stable across a round trip")
    }

    /// One input through every segment decoder.
    static func segment(_ input: UnsafeRawBufferPointer) {
        // Framed (the wire and disk form).
        let framed = decode("SegmentCodec.decode", segmentCodes) { () throws(ChronicleError) in
            try SegmentCodec.decode(input)
        }
        let framedTight = decode("SegmentCodec.decode (tight limits)", segmentCodes) { () throws(ChronicleError) in
            try SegmentCodec.decode(input, limits: tightSegmentLimits)
        }
        agree(tight: framedTight, full: framed, "SegmentCodec.decode")
        if let framed { checkSegment(framed, from: "SegmentCodec.decode") }

        // Bare body (what the frame holds).
        let body = decode("SegmentCodec.decodeBody", segmentCodes) { () throws(ChronicleError) in
            try SegmentCodec.decodeBody(input)
        }
        let bodyTight = decode("SegmentCodec.decodeBody (tight limits)", segmentCodes) { () throws(ChronicleError) in
            try SegmentCodec.decodeBody(input, limits: tightSegmentLimits)
        }
        agree(tight: bodyTight, full: body, "SegmentCodec.decodeBody")
        if let body { checkSegment(body, from: "SegmentCodec.decodeBody") }

        // One entity's ops (an audit over a sealed segment): whatever the full decode accepts,
        // the filtered one gives the same ops of that entity; it may not misread anything.
        let bytes = Array(input)
        for entity in [body?.ops.first?.entityID, UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))].compactMap({ $0 }) {
            let filtered = decode("SegmentCodec.decodeOps(ofEntity:)", segmentCodes) { () throws(ChronicleError) in
                try SegmentCodec.decodeOps(ofEntity: entity, body: bytes)
            }
            if let body {
                require(filtered?.libraryID == body.libraryID && filtered?.ops == body.ops.filter { $0.entityID == entity },
                        "SegmentCodec.decodeOps(ofEntity:) disagrees with decodeBody")
            }
        }

        // JSON form (for curl).
        let json = decode("WireJSON.decode", jsonCodes) { () throws(ChronicleError) in
            try WireJSON.decode(input)
        }
        let jsonTight = decode("WireJSON.decode (tight limits)", jsonCodes) { () throws(ChronicleError) in
            try WireJSON.decode(input, limits: tightSegmentLimits)
        }
        agree(tight: jsonTight, full: json, "WireJSON.decode")
        if let json { checkSegment(json, from: "WireJSON.decode") }

        // The LZ4 frame alone, with and without the checksum requirement.
        frame(input)
    }

    static func frame(_ input: UnsafeRawBufferPointer) {
        let maxBytes = 1 << 20
        let lenient = decode("LZ4Frame.decompress (checksum optional)", frameCodes) { () throws(ChronicleError) in
            try LZ4Frame.decompress(input, maxBytes: maxBytes, requireChecksum: false)
        }
        let strict = decode("LZ4Frame.decompress", frameCodes) { () throws(ChronicleError) in
            try LZ4Frame.decompress(input, maxBytes: maxBytes)
        }
        agree(tight: strict, full: lenient, "LZ4Frame.decompress")
        guard let lenient else { return }
        require(lenient.count <= maxBytes, "LZ4Frame.decompress returned \(lenient.count) bytes, over its maxBytes")
        let again = mustDecode("LZ4Frame.decompress (round trip)") { () throws(ChronicleError) in
            try LZ4Frame.decompress(LZ4Frame.compress(lenient), maxBytes: maxBytes)
        }
        require(again == lenient, "LZ4Frame: decompress(compress(x)) != x")
    }
}

// MARK: - Snapshots

extension FuzzContract {
    static let tightSnapshotLimits: SnapshotCodec.Limits = {
        var limits = SnapshotCodec.Limits()
        limits.maxDecodedBytes = 1_024
        limits.maxTables = 2
        limits.maxColumns = 3
        limits.maxRows = 4
        return limits
    }()

    /// A decoded snapshot keeps the format's rules and survives its encoding
    /// byte for byte.
    static func checkSnapshot(_ snapshot: Snapshot, from decoder: String) {
        require(snapshot.seq >= 0, "\(decoder) returned the negative seq \(snapshot.seq)")
        require(Set(snapshot.tables.map(\.name)).count == snapshot.tables.count, "\(decoder) returned a table twice")
        for table in snapshot.tables {
            require(!table.columns.isEmpty, "\(decoder) returned the table \(table.name) without columns")
            for row in table.rows {
                require(row.count == table.columns.count, "\(decoder) returned a row of the wrong width in \(table.name)")
                for value in row {
                    if case .bool = value { violated("\(decoder) returned a boolean, which a snapshot cannot hold") }
                    if case .real(let d) = value { require(d.isFinite, "\(decoder) returned the non-finite real \(d)") }
                }
            }
        }

        let body = SnapshotCodec.encodeBody(snapshot)
        let fromBody = mustDecode("SnapshotCodec.decodeBody (round trip of \(decoder))") { () throws(ChronicleError) in
            try SnapshotCodec.decodeBody(body)
        }
        require(fromBody == snapshot, "\(decoder): decodeBody(encodeBody(x)) != x")
        require(SnapshotCodec.encodeBody(fromBody) == body, "\(decoder): encodeBody is not stable across a round trip")

        let frame = SnapshotCodec.encode(snapshot)
        let fromFrame = mustDecode("SnapshotCodec.decode (round trip of \(decoder))") { () throws(ChronicleError) in
            try SnapshotCodec.decode(frame)
        }
        require(fromFrame == snapshot, "\(decoder): decode(encode(x)) != x")
    }

    /// One input through both snapshot decoders.
    static func snapshot(_ input: UnsafeRawBufferPointer) {
        let bytes = [UInt8](input)

        let framed = decode("SnapshotCodec.decode", snapshotCodes) { () throws(ChronicleError) in
            try SnapshotCodec.decode(bytes)
        }
        let framedTight = decode("SnapshotCodec.decode (tight limits)", snapshotCodes) { () throws(ChronicleError) in
            try SnapshotCodec.decode(bytes, limits: tightSnapshotLimits)
        }
        agree(tight: framedTight, full: framed, "SnapshotCodec.decode")
        if let framed { checkSnapshot(framed, from: "SnapshotCodec.decode") }

        let body = decode("SnapshotCodec.decodeBody", snapshotBodyCodes) { () throws(ChronicleError) in
            try SnapshotCodec.decodeBody(bytes)
        }
        let bodyTight = decode("SnapshotCodec.decodeBody (tight limits)", snapshotBodyCodes) { () throws(ChronicleError) in
            try SnapshotCodec.decodeBody(bytes, limits: tightSnapshotLimits)
        }
        agree(tight: bodyTight, full: body, "SnapshotCodec.decodeBody")
        if let body { checkSnapshot(body, from: "SnapshotCodec.decodeBody") }
    }
}
