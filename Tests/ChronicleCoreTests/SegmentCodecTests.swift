import ChronicleCore
import ChronicleTesting
import Foundation
import Testing

// MARK: - Fixtures

/// Deterministic read-it-later traffic, shared by the segment and JSON tests.
enum SegmentFixtures {
    static let library = UUID(uuidString: "00000000-0000-4000-8000-00000000000a")!
    static let devices = [
        UUID(uuidString: "00000000-0000-4000-8000-0000000000d1")!,
        UUID(uuidString: "00000000-0000-4000-8000-0000000000d2")!,
        Op.serverDeviceID,
    ]

    /// SplitMix64: the same ops on every run and every machine.
    typealias Random = SplitMix64

    static let words = ["the", "sync", "engine", "offline", "reading", "later", "library", "swift", "notes", "why",
                        "design", "a", "of", "to", "log", "every", "device", "keeps", "server", "order", "quiet",
                        "highlight", "paper", "history", "archive", "merge", "rule", "people", "trust", "week"]
    static let tags = ["swift", "design", "to-read", "databases", "longform", "work", "ideas", "favorites"]

    static func sentence(_ random: inout Random, words count: Int) -> String {
        (0..<count).map { _ in words[random.below(words.count)] }.joined(separator: " ")
    }

    /// `count` realistic ops: saves with url and title, tags, highlights with a
    /// quote, progress; three devices; confirmed from `firstSeq` when given.
    static func readItLater(count: Int, firstSeq: Int64? = nil, seed: UInt64 = 42) -> [Op] {
        var random = Random(seed: seed)
        var articles: [UUID] = []
        var deviceSeqs = [Int64](repeating: 0, count: devices.count)
        var clock: Int64 = 1_717_000_000_000
        var ops: [Op] = []
        ops.reserveCapacity(count)
        for i in 0..<count {
            let d = random.below(devices.count)
            deviceSeqs[d] += 1
            clock += Int64(random.below(90_000))
            var type: String
            var entity: UUID
            var payload: Payload
            switch articles.isEmpty ? 0 : random.below(4) {
            case 0:
                type = "article.save"
                entity = random.uuid()
                articles.append(entity)
                let slug = sentence(&random, words: 4).replacingOccurrences(of: " ", with: "-")
                payload = ["url": .text("https://example.com/\(2024 + random.below(2))/\(slug)"),
                           "title": .text(sentence(&random, words: 6 + random.below(6)).capitalized)]
            case 1:
                type = "article.tag"
                entity = articles[random.below(articles.count)]
                payload = ["tag": .text(tags[random.below(tags.count)])]
            case 2:
                type = "highlight.create"
                entity = random.uuid()
                payload = ["article_id": .text(articles[random.below(articles.count)].lowercased),
                           "quote": .text(sentence(&random, words: 10 + random.below(20))),
                           "position": .integer(Int64(random.below(40_000))), "color": .text("yellow")]
            default:
                type = "article.progress"
                entity = articles[random.below(articles.count)]
                payload = ["progress": .real(Double(random.below(1000)) / 1000)]
            }
            let confirmed = firstSeq.map { $0 + Int64(i) }
            ops.append(Op(opID: random.uuid(), libraryID: library, deviceID: devices[d], deviceSeq: deviceSeqs[d],
                          type: type, version: 1, entityID: entity, payload: payload,
                          deviceTime: clock - Int64(random.below(2_000)), baseSeq: max(0, (confirmed ?? Int64(i)) - Int64(random.below(5))),
                          serverSeq: confirmed, serverTime: confirmed.map { _ in clock + 150 }))
        }
        return ops
    }

    static func segment(count: Int, firstSeq: Int64? = nil, seed: UInt64 = 42) -> Segment {
        try! Segment(libraryID: library, ops: readItLater(count: count, firstSeq: firstSeq, seed: seed))
    }

    /// Every kind of value at its edges, in one op.
    static let edgePayload: Payload = [
        "null": .null, "yes": .bool(true), "no": .bool(false),
        "min": .integer(.min), "max": .integer(.max), "zero": .integer(0), "minusOne": .integer(-1),
        "tenth": .real(0.1), "negativeZero": .real(-0.0), "huge": .real(1e300), "one": .real(1.0),
        "tiny": .real(.leastNonzeroMagnitude), "twoToThe60": .real(1_152_921_504_606_846_976.0), "pi": .real(-3.141592653589793),
        "empty": .text(""), "emoji": .text("🧪 naïve café 日本語 👩‍👩‍👧"), "controls": .text("a\u{0}b\n\t\"\\\u{1F}"),
        "": .text("an empty key"),
    ]

    static func edgeOps(confirmed: Bool) -> [Op] {
        [
            Op(opID: UUID(uuidString: "10000000-0000-4000-8000-000000000001")!, libraryID: library, deviceID: devices[0],
               deviceSeq: .max, type: "kitchen.sink", version: .max, entityID: UUID(), payload: edgePayload,
               deviceTime: .min, baseSeq: .max, serverSeq: confirmed ? .max - 2 : nil, serverTime: confirmed ? .min : nil),
            Op(opID: UUID(uuidString: "10000000-0000-4000-8000-000000000002")!, libraryID: library, deviceID: devices[0],
               deviceSeq: .min, type: "empty", version: -1, entityID: UUID(), payload: [:],
               deviceTime: .max, baseSeq: .min, serverSeq: confirmed ? .max - 1 : nil, serverTime: confirmed ? .max : nil),
            Op(opID: UUID(uuidString: "10000000-0000-4000-8000-000000000003")!, libraryID: library, deviceID: devices[1],
               deviceSeq: 0, type: "kitchen.sink", version: 0, entityID: UUID(), payload: ["emoji": .text("🙂")],
               deviceTime: 0, baseSeq: 0, serverSeq: confirmed ? .max : nil, serverTime: confirmed ? 0 : nil),
        ]
    }
}

/// Catches the one error type the codecs throw, so a test can ask for its code.
func chronicleError(_ body: () throws -> Void) -> ChronicleError? {
    do {
        try body()
        return nil
    } catch let error as ChronicleError {
        return error
    } catch {
        Issue.record("expected a ChronicleError, got \(error)")
        return nil
    }
}

/// Writes a version-1 body field by field, following `Schemas/segment/segment-v1.md`
/// rather than the codec, so tests can build exactly the malformed input they need
/// (and check that the codec writes what the document says).
struct BodyBuilder {
    var bytes: [UInt8] = []

    mutating func raw(_ values: [UInt8]) { bytes += values }
    mutating func u16(_ v: UInt16) { bytes += [UInt8(v & 0xFF), UInt8(v >> 8)] }
    mutating func uuid(_ id: UUID) { withUnsafeBytes(of: id.uuid) { bytes += $0 } }
    mutating func varUInt(_ value: UInt64) {
        var v = value
        while v >= 0x80 { bytes.append(UInt8(v & 0x7F) | 0x80); v >>= 7 }
        bytes.append(UInt8(v))
    }
    mutating func varInt(_ v: Int64) { varUInt(UInt64(bitPattern: (v << 1) ^ (v >> 63))) }
    mutating func string(_ s: String) { varUInt(UInt64(s.utf8.count)); bytes += Array(s.utf8) }

    /// "CHSG", version, flags, library.
    mutating func header(version: UInt16 = 1, flags: UInt16 = 0, library: UUID = SegmentFixtures.library) {
        raw(Array("CHSG".utf8))
        u16(version)
        u16(flags)
        uuid(library)
    }

    /// A whole unconfirmed one-op body: `{"tag": "swift"}` on `article.tag`.
    static func oneOp(opID: UUID = UUID(uuidString: "20000000-0000-4000-8000-000000000001")!) -> BodyBuilder {
        var b = BodyBuilder()
        b.header()
        b.varUInt(1)                                   // op count
        b.varUInt(2); b.string("article.tag"); b.string("tag")
        b.varUInt(1); b.uuid(SegmentFixtures.devices[0])
        b.uuid(opID)
        b.varUInt(0)                                   // device index
        b.varInt(7)                                    // deviceSeq − 0
        b.varUInt(0)                                   // type index
        b.varInt(1)                                    // version
        b.uuid(UUID(uuidString: "30000000-0000-4000-8000-000000000001")!)
        b.varInt(1_717_000_000_000)                    // deviceTime − 0
        b.varInt(3)                                    // baseSeq − 0
        b.varUInt(1)                                   // payload count
        b.varUInt(1); b.raw([5]); b.string("swift")    // "tag": text "swift"
        return b
    }

    static let oneOpSegment = try! Segment(libraryID: SegmentFixtures.library, ops: [
        Op(opID: UUID(uuidString: "20000000-0000-4000-8000-000000000001")!, libraryID: SegmentFixtures.library,
           deviceID: SegmentFixtures.devices[0], deviceSeq: 7, type: "article.tag", version: 1,
           entityID: UUID(uuidString: "30000000-0000-4000-8000-000000000001")!, payload: ["tag": .text("swift")],
           deviceTime: 1_717_000_000_000, baseSeq: 3),
    ])
}

// MARK: - Round trips

@Suite struct SegmentCodecTests {
    @Test func confirmedSegmentRoundTripsThroughTheFrame() throws {
        let segment = SegmentFixtures.segment(count: 300, firstSeq: 1_001)
        #expect(segment.isConfirmed && segment.firstSeq == 1_001 && segment.lastSeq == 1_300)
        let back = try SegmentCodec.decode(SegmentCodec.encode(segment))
        #expect(back == segment)
        #expect(back.isConfirmed && back.firstSeq == 1_001 && back.lastSeq == 1_300)
    }

    @Test func unconfirmedSegmentRoundTrips() throws {
        let segment = SegmentFixtures.segment(count: 300)
        #expect(!segment.isConfirmed && segment.firstSeq == nil && segment.lastSeq == nil)
        #expect(try SegmentCodec.decode(SegmentCodec.encode(segment)) == segment)
        #expect(try SegmentCodec.decodeBody(SegmentCodec.encodeBody(segment)) == segment)
    }

    @Test func emptySegmentRoundTrips() throws {
        let empty = try Segment(libraryID: SegmentFixtures.library, ops: [])
        #expect(!empty.isConfirmed && empty.firstSeq == nil)
        let back = try SegmentCodec.decode(SegmentCodec.encode(empty))
        #expect(back == empty && back.libraryID == SegmentFixtures.library)
        #expect(SegmentCodec.encodeBody(empty).count == 27, "24-byte header, op count, two empty tables")
    }

    @Test(arguments: [false, true])
    func valuesAndIntegersAtTheirEdgesKeepTheirExactTypes(confirmed: Bool) throws {
        let segment = try Segment(libraryID: SegmentFixtures.library, ops: SegmentFixtures.edgeOps(confirmed: confirmed))
        let back = try SegmentCodec.decode(SegmentCodec.encode(segment))
        #expect(back == segment)
        let payload = back.ops[0].payload
        for (key, value) in SegmentFixtures.edgePayload {
            // Equal *and* the same case: a real stays a real, a bool a bool, -0.0 keeps its sign.
            switch (value, payload[key]) {
            case (.real(let a), .real(let b)?): #expect(a.bitPattern == b.bitPattern, "\(key)")
            case (.integer(let a), .integer(let b)?): #expect(a == b, "\(key)")
            case (.bool(let a), .bool(let b)?): #expect(a == b, "\(key)")
            case (.text(let a), .text(let b)?): #expect(Array(a.utf8) == Array(b.utf8), "\(key)")
            case (.null, .null?): break
            default: Issue.record("\(key): \(value) came back as \(String(describing: payload[key]))")
            }
        }
        #expect(back.ops[1].payload.isEmpty)
    }

    @Test("One entity's ops read from a body equal the full decode's, filtered; a truncated body is refused the same way")
    func oneEntitysOpsReadWithoutBuildingTheOthers() throws {
        let segment = SegmentFixtures.segment(count: 300, firstSeq: 41)
        let body = SegmentCodec.encodeBody(segment)
        for entity in Set(segment.ops.map(\.entityID)).prefix(5) + [UUID()] {
            let (library, ops) = try SegmentCodec.decodeOps(ofEntity: entity, body: body)
            #expect(library == segment.libraryID)
            #expect(ops == segment.ops.filter { $0.entityID == entity })
        }
        let edge = SegmentCodec.encodeBody(try Segment(libraryID: SegmentFixtures.library, ops: SegmentFixtures.edgeOps(confirmed: true)))
        let someone = try SegmentCodec.decodeBody(edge).ops[1].entityID
        for length in 0..<edge.count {
            #expect(throws: ChronicleError.self, "truncated to \(length)") {
                try SegmentCodec.decodeOps(ofEntity: someone, body: Array(edge[..<length]))
            }
        }
    }

    @Test func aFullSegmentOfTheDefaultLimitRoundTrips() throws {
        let segment = SegmentFixtures.segment(count: SegmentCodec.Limits().maxOps, firstSeq: 1)
        let encoded = SegmentCodec.encode(segment)
        #expect(try SegmentCodec.decode(encoded) == segment)
        #expect(SegmentCodec.encode(try SegmentCodec.decode(encoded)) == encoded)
    }

    @Test func encodingIsByteForByteStable() throws {
        for segment in [SegmentFixtures.segment(count: 200, firstSeq: 77), SegmentFixtures.segment(count: 200),
                        try Segment(libraryID: SegmentFixtures.library, ops: SegmentFixtures.edgeOps(confirmed: true))] {
            let body = SegmentCodec.encodeBody(segment)
            #expect(SegmentCodec.encodeBody(try SegmentCodec.decodeBody(body)) == body)
            let frame = SegmentCodec.encode(segment)
            #expect(SegmentCodec.encode(try SegmentCodec.decode(frame)) == frame)
        }
        // Payload dictionaries built in different orders encode identically (keys are sorted).
        var forwards = Payload(), backwards = Payload()
        let keys = (0..<40).map { "key\($0)" }
        for key in keys { forwards[key] = .text(key) }
        for key in keys.reversed() { backwards[key] = .text(key) }
        let op = SegmentFixtures.readItLater(count: 1)[0]
        var a = op, b = op
        a.payload = forwards
        b.payload = backwards
        #expect(SegmentCodec.encodeBody(try Segment(libraryID: op.libraryID, ops: [a]))
            == SegmentCodec.encodeBody(try Segment(libraryID: op.libraryID, ops: [b])))
    }

    @Test func theCodecWritesTheLayoutTheDocumentDescribes() throws {
        #expect(SegmentCodec.encodeBody(BodyBuilder.oneOpSegment) == BodyBuilder.oneOp().bytes)
        #expect(try SegmentCodec.decodeBody(BodyBuilder.oneOp().bytes) == BodyBuilder.oneOpSegment)

        // Confirmed: flag bit 0, the first serverSeq after the device table, a serverTime delta per op.
        var op = BodyBuilder.oneOpSegment.ops[0]
        op.serverSeq = 300
        op.serverTime = 1_717_000_000_500
        var b = BodyBuilder()
        b.header(flags: 1)
        b.varUInt(1)
        b.varUInt(2); b.string("article.tag"); b.string("tag")
        b.varUInt(1); b.uuid(SegmentFixtures.devices[0])
        b.varUInt(300)
        b.uuid(op.opID); b.varUInt(0); b.varInt(7); b.varUInt(0); b.varInt(1); b.uuid(op.entityID)
        b.varInt(1_717_000_000_000); b.varInt(3); b.varInt(1_717_000_000_500)
        b.varUInt(1); b.varUInt(1); b.raw([5]); b.string("swift")
        #expect(SegmentCodec.encodeBody(try Segment(libraryID: SegmentFixtures.library, ops: [op])) == b.bytes)
    }

    // MARK: - The segment's own rules

    @Test func segmentInitEnforcesTheRules() {
        let ops = SegmentFixtures.readItLater(count: 3, firstSeq: 10)
        let library = SegmentFixtures.library
        var mixed = ops
        mixed[1].serverSeq = nil
        mixed[1].serverTime = nil
        #expect(chronicleError { _ = try Segment(libraryID: library, ops: mixed) }?.code == .malformedSegment)
        var unconfirmedFirst = ops
        unconfirmedFirst[0].serverSeq = nil
        unconfirmedFirst[0].serverTime = nil
        #expect(chronicleError { _ = try Segment(libraryID: library, ops: unconfirmedFirst) }?.code == .malformedSegment)
        var halfConfirmed = ops
        halfConfirmed[2].serverTime = nil
        #expect(chronicleError { _ = try Segment(libraryID: library, ops: halfConfirmed) }?.code == .malformedSegment)
        var gap = ops
        gap[2].serverSeq = 13
        let gapError = chronicleError { _ = try Segment(libraryID: library, ops: gap) }
        #expect(gapError?.code == .malformedSegment && gapError?.message.contains("contiguous") == true)
        var descending = ops
        descending.swapAt(1, 2)
        #expect(chronicleError { _ = try Segment(libraryID: library, ops: descending) }?.code == .malformedSegment)
        var negative = ops
        for i in 0..<3 { negative[i].serverSeq = -5 + Int64(i) }
        #expect(chronicleError { _ = try Segment(libraryID: library, ops: negative) }?.code == .malformedSegment)
        var duplicate = ops
        duplicate[2].opID = duplicate[0].opID
        #expect(chronicleError { _ = try Segment(libraryID: library, ops: duplicate) }?.code == .malformedSegment)
        var foreign = ops
        foreign[1].libraryID = UUID()
        #expect(chronicleError { _ = try Segment(libraryID: library, ops: foreign) }?.code == .wrongLibrary)
        var notANumber = ops
        notANumber[0].payload["progress"] = .real(.nan)
        #expect(chronicleError { _ = try Segment(libraryID: library, ops: notANumber) }?.code == .malformedSegment)
        var overflow = Array(ops.prefix(2))
        overflow[0].serverSeq = .max
        overflow[1].serverSeq = .min
        #expect(chronicleError { _ = try Segment(libraryID: library, ops: overflow) }?.code == .malformedSegment)
    }

    // MARK: - Rejections: the body

    func bodyError(_ bytes: [UInt8], limits: SegmentCodec.Limits = .init()) -> ChronicleError? {
        chronicleError { _ = try SegmentCodec.decodeBody(bytes, limits: limits) }
    }

    @Test func wrongMagicIsRefused() {
        var body = BodyBuilder.oneOp().bytes
        body[0] = UInt8(ascii: "X")
        #expect(bodyError(body)?.code == .malformedSegment)
        #expect(bodyError(Array("{\"libraryID\":1}".utf8))?.code == .malformedSegment)
    }

    @Test func aFutureVersionIsRefusedByName() {
        var b = BodyBuilder()
        b.header(version: 2, flags: 0x8000)      // a future version may define flags we do not know
        b.raw([0xFF, 0xFF, 0xFF])                // nor what follows
        let error = bodyError(b.bytes)
        #expect(error?.code == .futureSegmentVersion)
        #expect(error?.message.contains("version 2") == true && error?.message.contains("up to 1") == true)
        // Also inside a frame, which must reach the body to learn the version.
        #expect(chronicleError { _ = try SegmentCodec.decode(LZ4Frame.compress(b.bytes)) }?.code == .futureSegmentVersion)
        var zero = BodyBuilder()
        zero.header(version: 0)
        #expect(bodyError(zero.bytes)?.code == .malformedSegment)
    }

    @Test func unknownFlagsAreRefused() {
        var b = BodyBuilder()
        b.header(flags: 0b10)
        b.varUInt(0); b.varUInt(0); b.varUInt(0)
        #expect(bodyError(b.bytes)?.code == .malformedSegment)
        var confirmedButEmpty = BodyBuilder()
        confirmedButEmpty.header(flags: 1)
        confirmedButEmpty.varUInt(0); confirmedButEmpty.varUInt(0); confirmedButEmpty.varUInt(0); confirmedButEmpty.varUInt(1)
        #expect(bodyError(confirmedButEmpty.bytes)?.code == .malformedSegment)
    }

    @Test func everyTruncationIsACleanError() {
        for body in [BodyBuilder.oneOp().bytes,
                     SegmentCodec.encodeBody(try! Segment(libraryID: SegmentFixtures.library,
                                                          ops: SegmentFixtures.edgeOps(confirmed: true)))] {
            for length in 0..<body.count {
                let error = bodyError(Array(body[..<length]))
                #expect(error?.code == .malformedSegment, "truncated to \(length) of \(body.count) bytes: \(String(describing: error))")
            }
        }
    }

    @Test func trailingBytesAreRefused() {
        let error = bodyError(BodyBuilder.oneOp().bytes + [0])
        #expect(error?.code == .malformedSegment && error?.message.contains("unexpected bytes") == true)
    }

    @Test func varintsMustFitAndBeShortest() {
        var overflow = BodyBuilder()
        overflow.header()
        overflow.raw([UInt8](repeating: 0xFF, count: 9) + [0x02])  // bit 64 set
        #expect(bodyError(overflow.bytes)?.message.contains("overflows 64 bits") == true)
        var endless = BodyBuilder()
        endless.header()
        endless.raw([UInt8](repeating: 0xFF, count: 40))
        #expect(bodyError(endless.bytes)?.code == .malformedSegment)
        var overlong = BodyBuilder()
        overlong.header()
        overlong.raw([0x80, 0x00, 0x00, 0x00])                    // zero, padded
        #expect(bodyError(overlong.bytes)?.message.contains("redundant") == true)
    }

    @Test func countsOverTheLimitsAreRefusedBeforeAllocating() {
        let segment = SegmentFixtures.segment(count: 20)
        var limits = SegmentCodec.Limits()
        limits.maxOps = 19
        #expect(bodyError(SegmentCodec.encodeBody(segment), limits: limits)?.code == .segmentTooLarge)
        limits.maxOps = 20
        #expect(bodyError(SegmentCodec.encodeBody(segment), limits: limits) == nil)

        var billions = BodyBuilder()
        billions.header()
        billions.varUInt(1 << 40)
        #expect(bodyError(billions.bytes)?.code == .segmentTooLarge)
        var moreOpsThanBytes = BodyBuilder()
        moreOpsThanBytes.header()
        moreOpsThanBytes.varUInt(9_000)
        moreOpsThanBytes.raw([0, 0])
        #expect(bodyError(moreOpsThanBytes.bytes)?.code == .malformedSegment)
        var hugeTable = BodyBuilder()
        hugeTable.header()
        hugeTable.varUInt(0)
        hugeTable.varUInt(1 << 50)                                    // strings
        #expect(bodyError(hugeTable.bytes)?.code == .malformedSegment)
        var hugeString = BodyBuilder()
        hugeString.header()
        hugeString.varUInt(0); hugeString.varUInt(1); hugeString.varUInt(1 << 60)
        #expect(bodyError(hugeString.bytes)?.code == .malformedSegment)

        limits = .init()
        limits.maxDecodedBytes = 100
        #expect(bodyError(SegmentCodec.encodeBody(segment), limits: limits)?.code == .segmentTooLarge)
    }

    @Test func outOfRangeIndexesAreRefused() {
        // The body of `oneOp`, with each index in turn pointing past its table.
        let good = BodyBuilder.oneOp().bytes
        let header = 24 + 1 + 1 + 12 + 4 + 1 + 16
        let deviceIndexOffset = header + 16
        let typeIndexOffset = deviceIndexOffset + 2
        let keyIndexOffset = good.count - 8
        #expect(good[deviceIndexOffset] == 0 && good[typeIndexOffset] == 0 && good[keyIndexOffset] == 1)
        for (offset, value) in [(deviceIndexOffset, 1), (typeIndexOffset, 2), (keyIndexOffset, 2)] {
            var bad = good
            bad[offset] = UInt8(value)
            let error = bodyError(bad)
            #expect(error?.code == .malformedSegment && error?.message.contains("out of range") == true, "\(offset)")
        }
    }

    @Test func invalidUTF8IsRefused() {
        var inTable = BodyBuilder.oneOp().bytes
        inTable[24 + 3] = 0xC3                                            // "a" → a lone lead byte in "article.tag"
        #expect(bodyError(inTable)?.message.contains("UTF-8") == true)
        var inValue = BodyBuilder.oneOp().bytes
        inValue[inValue.count - 1] = 0xFF                                 // the "t" of "swift"
        #expect(bodyError(inValue)?.message.contains("UTF-8") == true)
    }

    @Test func aNegativeFirstServerSeqIsRefused() {
        var b = BodyBuilder()
        b.header(flags: 1)
        b.varUInt(1)
        b.varUInt(1); b.string("t")
        b.varUInt(1); b.uuid(SegmentFixtures.devices[0])
        b.varUInt(UInt64(bitPattern: -1))                                 // −1 as a u64
        b.uuid(UUID()); b.varUInt(0); b.varInt(1); b.varUInt(0); b.varInt(1); b.uuid(UUID())
        b.varInt(0); b.varInt(0); b.varInt(0); b.varUInt(0)
        let error = bodyError(b.bytes)
        #expect(error?.code == .malformedSegment && error?.message.contains("negative") == true)

        // Int64.max is fine for one op, not for two (the second seq would overflow).
        var last = b
        last.bytes = []
        last.header(flags: 1)
        last.varUInt(2)
        last.varUInt(1); last.string("t")
        last.varUInt(1); last.uuid(SegmentFixtures.devices[0])
        last.varUInt(UInt64(Int64.max))
        #expect(bodyError(last.bytes)?.code == .malformedSegment)
    }

    @Test func duplicatesAreRefused() {
        // The same op id twice.
        var b = BodyBuilder()
        b.header()
        b.varUInt(2)
        b.varUInt(1); b.string("t")
        b.varUInt(1); b.uuid(SegmentFixtures.devices[0])
        let id = UUID()
        for _ in 0..<2 {
            b.uuid(id); b.varUInt(0); b.varInt(1); b.varUInt(0); b.varInt(1); b.uuid(UUID())
            b.varInt(0); b.varInt(0); b.varUInt(0)
        }
        let error = bodyError(b.bytes)
        #expect(error?.code == .malformedSegment && error?.message.contains("repeats the op id") == true)

        // A table entry twice, a device twice, a payload key twice.
        var strings = BodyBuilder()
        strings.header(); strings.varUInt(0); strings.varUInt(2); strings.string("x"); strings.string("x"); strings.varUInt(0)
        #expect(bodyError(strings.bytes)?.message.contains("repeats") == true)
        var devices = BodyBuilder()
        devices.header(); devices.varUInt(0); devices.varUInt(0); devices.varUInt(2)
        devices.uuid(SegmentFixtures.devices[0]); devices.uuid(SegmentFixtures.devices[0])
        #expect(bodyError(devices.bytes)?.message.contains("repeats") == true)
        var keys = BodyBuilder.oneOp()
        keys.bytes.removeLast(9)                                          // payload: count 1, "tag" → "swift"
        keys.varUInt(2)
        keys.varUInt(1); keys.raw([0])
        keys.varUInt(1); keys.raw([2])
        #expect(bodyError(keys.bytes)?.message.contains("same key twice") == true)
    }

    @Test func unknownTagsAndNonFiniteRealsAreRefused() {
        var tag = BodyBuilder.oneOp().bytes
        tag[tag.count - 7] = 9                                            // the value tag of "tag"
        #expect(bodyError(tag)?.message.contains("unknown value tag 9") == true)
        var nan = BodyBuilder.oneOp()
        nan.bytes.removeLast(7)
        nan.raw([4])
        withUnsafeBytes(of: Double.infinity.bitPattern.littleEndian) { nan.bytes += $0 }
        #expect(bodyError(nan.bytes)?.code == .malformedSegment)
    }

    @Test func anOpOverMaxOpBytesIsRefused() {
        var op = SegmentFixtures.readItLater(count: 1)[0]
        op.payload = ["text": .text(String(repeating: "x", count: 5_000))]
        let body = SegmentCodec.encodeBody(try! Segment(libraryID: op.libraryID, ops: [op]))
        var limits = SegmentCodec.Limits()
        limits.maxOpBytes = 4_096
        #expect(bodyError(body, limits: limits)?.code == .segmentTooLarge)
        op.payload = ["a": .text(String(repeating: "x", count: 2_000)), "b": .text(String(repeating: "y", count: 2_100))]
        #expect(bodyError(SegmentCodec.encodeBody(try! Segment(libraryID: op.libraryID, ops: [op])), limits: limits)?.code
            == .segmentTooLarge)
        limits.maxOpBytes = 8_192
        #expect(bodyError(body, limits: limits) == nil)
    }

    /// Fuzz-style: every single-byte change either fails cleanly or decodes to a
    /// segment that re-encodes and decodes to itself.
    @Test func flippingAnyByteFailsCleanlyOrDecodesConsistently() throws {
        let bodies = [BodyBuilder.oneOp().bytes, SegmentCodec.encodeBody(SegmentFixtures.segment(count: 4, firstSeq: 9)),
                      SegmentCodec.encodeBody(try Segment(libraryID: SegmentFixtures.library, ops: SegmentFixtures.edgeOps(confirmed: false)))]
        var decoded = 0, refused = 0
        for body in bodies {
            for index in body.indices {
                for mask: UInt8 in [0x01, 0x80, 0xFF] {
                    var mutated = body
                    mutated[index] ^= mask
                    do {
                        let segment = try SegmentCodec.decodeBody(mutated)
                        let again = SegmentCodec.encodeBody(segment)
                        #expect(try SegmentCodec.decodeBody(again) == segment)
                        #expect(SegmentCodec.encodeBody(try SegmentCodec.decodeBody(again)) == again)
                        decoded += 1
                    } catch {
                        #expect(!error.message.isEmpty)
                        refused += 1
                    }
                }
            }
        }
        #expect(decoded > 0 && refused > 0)
    }

    // MARK: - Rejections: the frame

    func frameError(_ bytes: [UInt8], limits: SegmentCodec.Limits = .init()) -> ChronicleError? {
        chronicleError { _ = try SegmentCodec.decode(bytes, limits: limits) }
    }

    @Test func everyTruncatedFrameIsACleanError() {
        let frame = SegmentCodec.encode(SegmentFixtures.segment(count: 5, firstSeq: 1))
        for length in 0..<frame.count {
            let error = frameError(Array(frame[..<length]))
            #expect(error?.code == .malformedFrame, "truncated to \(length) of \(frame.count): \(String(describing: error))")
        }
    }

    @Test func aCorruptedPayloadByteFailsTheContentChecksum() {
        var frame = SegmentCodec.encode(SegmentFixtures.segment(count: 20, firstSeq: 1))
        // The last bytes of an LZ4 block are always literals; after them come the
        // end mark (4 bytes) and the content checksum (4 bytes).
        frame[frame.count - 9] ^= 0x20
        let error = frameError(frame)
        #expect(error?.code == .segmentChecksum, "\(String(describing: error))")
        var checksum = SegmentCodec.encode(SegmentFixtures.segment(count: 20, firstSeq: 1))
        checksum[checksum.count - 1] ^= 0x01
        #expect(frameError(checksum)?.code == .segmentChecksum)
        var header = SegmentCodec.encode(SegmentFixtures.segment(count: 20, firstSeq: 1))
        header[4] ^= 0x04                                               // the FLG byte is covered by the header checksum
        #expect(frameError(header)?.code == .segmentChecksum)
    }

    @Test func badMagicAndTrailingGarbageAreRefused() {
        let segment = SegmentFixtures.segment(count: 5)
        #expect(frameError(SegmentCodec.encodeBody(segment))?.code == .malformedFrame, "a bare body is not a frame")
        let trailing = frameError(SegmentCodec.encode(segment) + [1, 2, 3])
        #expect(trailing?.code == .malformedFrame && trailing?.message.contains("3 unexpected bytes") == true)
        #expect(frameError(SegmentCodec.encode(segment) + SegmentCodec.encode(segment))?.code == .malformedFrame)
        #expect(frameError([])?.code == .malformedFrame)
    }

    @Test func aDecompressionBombIsRefused() throws {
        let zeros = [UInt8](repeating: 0, count: 8 << 20)
        let bomb = LZ4Frame.compress(zeros)
        #expect(bomb.count < 64 << 10)
        var limits = SegmentCodec.Limits()
        limits.maxDecodedBytes = 1 << 20
        let declared = frameError(bomb, limits: limits)
        #expect(declared?.code == .segmentTooLarge && declared?.message.contains("declares") == true)
        #expect(try LZ4Frame.decompress(bomb, maxBytes: 8 << 20) == zeros)
        #expect(chronicleError { _ = try LZ4Frame.decompress(bomb, maxBytes: (8 << 20) - 1) }?.code == .segmentTooLarge)

        // Without a recorded size (the lz4 tool's default) the limit is found while decoding.
        let streamed = try LZ4Tool.run(["-c", "-q"], input: zeros)
        let found = chronicleError { _ = try LZ4Frame.decompress(streamed, maxBytes: 1 << 20) }
        #expect(found?.code == .segmentTooLarge && found?.message.contains("more than") == true)
        #expect(try LZ4Frame.decompress(streamed, maxBytes: 8 << 20) == zeros)
    }

    @Test func framesOfAnySizeAndFromAnyContiguousBytes() throws {
        #expect(try LZ4Frame.decompress(LZ4Frame.compress([]), maxBytes: 0) == [])
        let bytes = (0..<300_000).map { UInt8(truncatingIfNeeded: ($0 &* 2_654_435_761) >> 13) }  // several blocks
        let frame = LZ4Frame.compress(bytes)
        #expect(try LZ4Frame.decompress(Data(frame), maxBytes: bytes.count) == bytes)
        #expect(try LZ4Frame.decompress(frame, maxBytes: .max) == bytes)
        #expect(chronicleError { _ = try LZ4Frame.decompress(frame, maxBytes: bytes.count - 1) }?.code == .segmentTooLarge)
        let segment = SegmentFixtures.segment(count: 10, firstSeq: 3)
        #expect(try SegmentCodec.decode(Data(SegmentCodec.encode(segment))) == segment)
    }

    // MARK: - The lz4 command-line tool

    @Test func theLZ4ToolOpensASegment() throws {
        let segment = SegmentFixtures.segment(count: 500, firstSeq: 1)
        let decompressed = try LZ4Tool.run(["-d", "-c", "-q"], input: SegmentCodec.encode(segment))
        #expect(decompressed == SegmentCodec.encodeBody(segment))
        // And the other way: what the tool compresses (content checksum on by default) decodes.
        let compressed = try LZ4Tool.run(["-c", "-q"], input: SegmentCodec.encodeBody(segment))
        #expect(try SegmentCodec.decode(compressed) == segment)
        let unchecked = try LZ4Tool.run(["-c", "-q", "--no-frame-crc"], input: SegmentCodec.encodeBody(segment))
        #expect(frameError(unchecked)?.code == .malformedFrame, "a frame without a content checksum is refused")
    }

    // MARK: - Size and speed

    @Test func segmentsAreAtMostFortyPercentOfJSON() throws {
        let segment = SegmentFixtures.segment(count: 1_000, firstSeq: 500_001)
        let frame = SegmentCodec.encode(segment)
        let body = SegmentCodec.encodeBody(segment)
        let json = WireJSON.encode(segment)
        let perOp = { (bytes: [UInt8]) in Double(bytes.count) / Double(segment.ops.count) }
        print("1,000 read-it-later ops: segment \(frame.count) B (\(perOp(frame)) B/op, body \(perOp(body)) B/op "
            + "before LZ4), JSON \(json.count) B (\(perOp(json)) B/op); segment/JSON = "
            + String(format: "%.1f%%", 100 * Double(frame.count) / Double(json.count)))
        #expect(Double(frame.count) <= 0.4 * Double(json.count))

        let clock = ContinuousClock()
        let rounds = 20
        let elapsed = try clock.measure {
            for _ in 0..<rounds { _ = try SegmentCodec.decode(frame) }
        }
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        print("decode: \(Int(Double(rounds * segment.ops.count) / seconds)) ops/s (this build's optimization level)")
    }
}

/// Runs `/usr/bin/lz4` with `input` on stdin and returns its stdout.
enum LZ4Tool {
    struct Failed: Error { let status: Int32 }

    static func run(_ arguments: [String], input: [UInt8]) throws -> [UInt8] {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-lz4-\(UUID().lowercased)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let inputURL = directory.appendingPathComponent("in")
        try Data(input).write(to: inputURL)
        let result = try ChildProcess.run("/usr/bin/lz4", arguments, stdin: .file(inputURL.path))
        guard result.status == 0 else { throw Failed(status: result.status) }
        return result.output
    }
}

extension SplitMix64 {
    /// A UUID from two draws, shaped as version 4.
    mutating func uuid() -> UUID {
        let a = next(), b = next()
        var bytes = [UInt8](repeating: 0, count: 16)
        for i in 0..<8 { bytes[i] = UInt8(truncatingIfNeeded: a >> (8 * i)); bytes[8 + i] = UInt8(truncatingIfNeeded: b >> (8 * i)) }
        bytes[6] = bytes[6] & 0x0F | 0x40
        bytes[8] = bytes[8] & 0x3F | 0x80
        return UUID(uuid: (bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
                           bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]))
    }
}
