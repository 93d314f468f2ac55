import ChronicleCore
import Foundation
import Testing

@Suite struct WireJSONTests {
    func decode(_ text: String, limits: SegmentCodec.Limits = .init()) throws(ChronicleError) -> Segment {
        try WireJSON.decode(Array(text.utf8), limits: limits)
    }

    func error(_ text: String, limits: SegmentCodec.Limits = .init()) -> ChronicleError? {
        chronicleError { _ = try decode(text, limits: limits) }
    }

    /// The one-op segment's JSON with `op` spliced in as the op object's members.
    func withOp(_ members: String) -> String {
        "{\"libraryID\":\"\(SegmentFixtures.library.lowercased)\",\"ops\":[{\(members)}]}"
    }

    let goodMembers = """
        "opID":"20000000-0000-4000-8000-000000000001","libraryID":"00000000-0000-4000-8000-00000000000a",\
        "deviceID":"00000000-0000-4000-8000-0000000000d1","deviceSeq":7,"type":"article.tag","version":1,\
        "entityID":"30000000-0000-4000-8000-000000000001","payload":{"tag":"swift"},"deviceTime":1717000000000,\
        "baseSeq":3
        """

    // MARK: - Shape and round trips

    @Test func writesTheDocumentedShape() {
        let json = String(decoding: WireJSON.encode(BodyBuilder.oneOpSegment), as: UTF8.self)
        #expect(json == "{\"libraryID\":\"00000000-0000-4000-8000-00000000000a\",\"ops\":[\n{\(goodMembers)}\n]}")
        #expect(String(decoding: WireJSON.encode(try! Segment(libraryID: SegmentFixtures.library, ops: [])), as: UTF8.self)
            == "{\"libraryID\":\"00000000-0000-4000-8000-00000000000a\",\"ops\":[]}")
        var confirmed = BodyBuilder.oneOpSegment.ops[0]
        confirmed.serverSeq = 5
        confirmed.serverTime = 1_717_000_000_123
        let text = String(decoding: WireJSON.encode(try! Segment(libraryID: SegmentFixtures.library, ops: [confirmed])), as: UTF8.self)
        #expect(text.contains("\"baseSeq\":3,\"serverSeq\":5,\"serverTime\":1717000000123}"))
    }

    @Test func realsKeepAFractionOrExponent() {
        var op = BodyBuilder.oneOpSegment.ops[0]
        op.payload = ["a": .real(1.0), "b": .real(-0.0), "c": .real(1e300), "d": .real(0.1), "e": .real(1e16),
                      "f": .real(-2.5e-8), "g": .integer(1), "h": .bool(true), "i": .null]
        let text = String(decoding: WireJSON.encode(try! Segment(libraryID: op.libraryID, ops: [op])), as: UTF8.self)
        #expect(text.contains("\"payload\":{\"a\":1.0,\"b\":-0.0,\"c\":1e+300,\"d\":0.1,\"e\":1e+16,\"f\":-2.5e-08,\"g\":1,\"h\":true,\"i\":null}"))
    }

    @Test(arguments: [nil, 1 as Int64])
    func roundTripsReadItLaterTraffic(firstSeq: Int64?) throws {
        let segment = SegmentFixtures.segment(count: 500, firstSeq: firstSeq)
        let json = WireJSON.encode(segment)
        let back = try WireJSON.decode(json)
        #expect(back == segment)
        #expect(WireJSON.encode(back) == json, "byte-for-byte stable")
        #expect(SegmentCodec.encode(back) == SegmentCodec.encode(segment), "and the same segment as the binary form")
    }

    @Test(arguments: [false, true])
    func edgeValuesKeepTheirExactTypes(confirmed: Bool) throws {
        let segment = try Segment(libraryID: SegmentFixtures.library, ops: SegmentFixtures.edgeOps(confirmed: confirmed))
        let json = WireJSON.encode(segment)
        let back = try WireJSON.decode(json)
        #expect(back == segment)
        #expect(WireJSON.encode(back) == json)
        for (key, value) in SegmentFixtures.edgePayload {
            switch (value, back.ops[0].payload[key]) {
            case (.real(let a), .real(let b)?): #expect(a.bitPattern == b.bitPattern, "\(key)")
            case (.integer(let a), .integer(let b)?): #expect(a == b, "\(key)")
            case (.bool(let a), .bool(let b)?): #expect(a == b, "\(key)")
            case (.text(let a), .text(let b)?): #expect(Array(a.utf8) == Array(b.utf8), "\(key)")
            case (.null, .null?): break
            default: Issue.record("\(key): \(value) came back as \(String(describing: back.ops[0].payload[key]))")
            }
        }
    }

    @Test func readsWhatPeopleTypeWithCurl() throws {
        // Whitespace anywhere, keys in any order, upper-case ids, escapes.
        let text = """
            {
              "ops": [ {
                "payload": { "tag": "sw\\u0069ft", "emoji": "\\ud83d\\ude00", "slash": "a\\/b", "n": -0, "r": -0.0, "e": 2E2 },
                "baseSeq": 3, "deviceTime": 1717000000000, "entityID": "30000000-0000-4000-8000-000000000001",
                "version": 1, "type": "article.tag", "deviceSeq": 7, "deviceID": "00000000-0000-4000-8000-0000000000D1",
                "libraryID": "00000000-0000-4000-8000-00000000000A", "opID": "20000000-0000-4000-8000-000000000001"
              } ],
              "libraryID": "00000000-0000-4000-8000-00000000000a"
            }

            """
        let segment = try decode(text)
        let payload = segment.ops[0].payload
        #expect(payload["tag"] == .text("swift") && payload["emoji"] == .text("😀") && payload["slash"] == .text("a/b"))
        #expect(payload["n"] == .integer(0) && payload["e"] == .real(200))
        guard case .real(let r)? = payload["r"] else { Issue.record("-0.0 is a real"); return }
        #expect(r.sign == .minus)
        #expect(segment.ops[0].deviceID == SegmentFixtures.devices[0])
    }

    // MARK: - Rejections

    @Test func garbageIsRefused() {
        for text in ["", " ", "nope", "{", "[]", "null", "\"segment\"", "{\"libraryID\"}", "{\"libraryID\":}", "{,}",
                     "{\"libraryID\":\"00000000-0000-4000-8000-00000000000a\",}", "{'libraryID':1}",
                     "{\"libraryID\":\"00000000-0000-4000-8000-00000000000a\",\"ops\":[}",
                     "{\"libraryID\":\"00000000-0000-4000-8000-00000000000a\",\"ops\":[]",
                     "{\"libraryID\":\"00000000-0000-4000-8000-00000000000a\",\"ops\":[]}x",
                     "{\"libraryID\":\"00000000-0000-4000-8000-00000000000a\",\"ops\":[]}{}"] {
            #expect(error(text)?.code == .malformedSegment, "\(text)")
        }
        // Every truncation of a real body fails cleanly.
        let json = WireJSON.encode(SegmentFixtures.segment(count: 2, firstSeq: 1))
        for length in 0..<json.count {
            let refused = chronicleError { _ = try WireJSON.decode(Array(json[..<length])) }
            #expect(refused?.code == .malformedSegment, "truncated to \(length)")
        }
    }

    @Test func missingAndUnknownKeysAreNamed() {
        let missingRoot = error("{\"ops\":[]}")
        #expect(missingRoot?.code == .malformedSegment && missingRoot?.message.contains("'libraryID'") == true)
        #expect(error("{\"libraryID\":\"00000000-0000-4000-8000-00000000000a\"}")?.message.contains("'ops'") == true)
        let unknownRoot = error("{\"libraryID\":\"00000000-0000-4000-8000-00000000000a\",\"ops\":[],\"cursor\":5}")
        #expect(unknownRoot?.message.contains("'cursor'") == true)

        let unknown = error(withOp(goodMembers + ",\"color\":\"red\""))
        #expect(unknown?.code == .malformedSegment && unknown?.message.contains("unknown key 'color'") == true)
        let missing = error(withOp(goodMembers.replacingOccurrences(of: ",\"deviceTime\":1717000000000", with: "")))
        #expect(missing?.code == .malformedSegment && missing?.message.contains("'deviceTime'") == true)
        let twice = error(withOp(goodMembers + ",\"baseSeq\":4"))
        #expect(twice?.message.contains("'baseSeq' twice") == true)
        #expect(error(withOp(goodMembers.replacingOccurrences(of: "{\"tag\":\"swift\"}", with: "{\"tag\":\"a\",\"tag\":\"b\"}")))?
            .message.contains("'tag' twice") == true)
        #expect(error("{\"libraryID\":\"00000000-0000-4000-8000-00000000000a\",\"libraryID\":\"00000000-0000-4000-8000-00000000000a\",\"ops\":[]}")?
            .message.contains("twice") == true)
        #expect((try? decode(withOp(goodMembers))) == BodyBuilder.oneOpSegment)
    }

    @Test func wrongTypesAreRefused() {
        let cases: [(String, String)] = [
            ("\"deviceSeq\":7", "\"deviceSeq\":\"7\""),
            ("\"deviceSeq\":7", "\"deviceSeq\":7.0"),
            ("\"deviceSeq\":7", "\"deviceSeq\":7e0"),
            ("\"deviceSeq\":7", "\"deviceSeq\":null"),
            ("\"deviceSeq\":7", "\"deviceSeq\":true"),
            ("\"deviceSeq\":7", "\"deviceSeq\":9223372036854775808"),
            ("\"deviceSeq\":7", "\"deviceSeq\":07"),
            ("\"deviceSeq\":7", "\"deviceSeq\":+7"),
            ("\"version\":1", "\"version\":1.5"),
            ("\"version\":1", "\"version\":[1]"),
            ("\"type\":\"article.tag\"", "\"type\":5"),
            ("\"type\":\"article.tag\"", "\"type\":{\"name\":\"article.tag\"}"),
            ("\"opID\":\"20000000-0000-4000-8000-000000000001\"", "\"opID\":\"20000000\""),
            ("\"opID\":\"20000000-0000-4000-8000-000000000001\"", "\"opID\":20000000"),
            ("{\"tag\":\"swift\"}", "[\"swift\"]"),
            ("{\"tag\":\"swift\"}", "\"tag=swift\""),
            ("{\"tag\":\"swift\"}", "{\"tag\":[\"swift\"]}"),
            ("{\"tag\":\"swift\"}", "{\"tag\":{\"name\":\"swift\"}}"),
            ("{\"tag\":\"swift\"}", "{\"tag\":1e400}"),
            ("{\"tag\":\"swift\"}", "{\"tag\":-}"),
            ("{\"tag\":\"swift\"}", "{\"tag\":1.}"),
            ("{\"tag\":\"swift\"}", "{\"tag\":.5}"),
            ("{\"tag\":\"swift\"}", "{\"tag\":NaN}"),
            ("{\"tag\":\"swift\"}", "{\"tag\":tru}"),
            ("{\"tag\":\"swift\"}", "{\"tag\":\"sw\\qft\"}"),
            ("{\"tag\":\"swift\"}", "{\"tag\":\"\\ud83d\"}"),
            ("{\"tag\":\"swift\"}", "{\"tag\":\"\\ude00\\ud83d\"}"),
            ("{\"tag\":\"swift\"}", "{\"tag\":\"\\u00zz\"}"),
            ("{\"tag\":\"swift\"}", "{\"tag\":\"line\nbreak\"}"),
            ("\"baseSeq\":3", "\"baseSeq\":3,\"serverSeq\":-1"),
        ]
        for (from, to) in cases {
            let text = withOp(goodMembers.replacingOccurrences(of: from, with: to))
            #expect(text != withOp(goodMembers))
            let refused = error(text)
            #expect(refused?.code == .malformedSegment, "\(to): \(String(describing: refused))")
        }
        let named = error(withOp(goodMembers.replacingOccurrences(of: "\"deviceSeq\":7", with: "\"deviceSeq\":\"7\"")))
        #expect(named?.message.contains("'deviceSeq' must be an integer") == true)
        let nested = error(withOp(goodMembers.replacingOccurrences(of: "{\"tag\":\"swift\"}", with: "{\"tag\":[1]}")))
        #expect(nested?.message.contains("payload field 'tag'") == true)
    }

    @Test func invalidUTF8IsRefused() {
        var bytes = Array(withOp(goodMembers).utf8)
        let index = bytes.firstIndex(of: UInt8(ascii: "w"))!  // in "swift"
        bytes[index] = 0xC0
        let refused = chronicleError { _ = try WireJSON.decode(bytes) }
        #expect(refused?.code == .malformedSegment && refused?.message.contains("UTF-8") == true)
    }

    @Test func deepNestingIsRefusedWithoutRecursion() {
        let deep = String(repeating: "[", count: 200_000) + String(repeating: "]", count: 200_000)
        #expect(error(deep)?.code == .malformedSegment)
        let deepObjects = String(repeating: "{\"a\":", count: 100_000) + "1" + String(repeating: "}", count: 100_000)
        #expect(error(deepObjects)?.code == .malformedSegment)
        let inPayload = withOp(goodMembers.replacingOccurrences(
            of: "{\"tag\":\"swift\"}", with: "{\"tag\":" + String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000) + "}"))
        #expect(error(inPayload)?.code == .malformedSegment)
    }

    @Test func theSegmentRulesApply() {
        let confirmed = goodMembers + ",\"serverSeq\":5,\"serverTime\":9"
        let second = confirmed.replacingOccurrences(of: "20000000-0000-4000-8000-000000000001", with: "20000000-0000-4000-8000-000000000002")
        let library = "{\"libraryID\":\"\(SegmentFixtures.library.lowercased)\",\"ops\":["
        #expect((try? decode(library + "{\(confirmed)},{\(second.replacingOccurrences(of: ":5,", with: ":6,"))}]}"))?.lastSeq == 6)
        let gap = error(library + "{\(confirmed)},{\(second.replacingOccurrences(of: ":5,", with: ":7,"))}]}")
        #expect(gap?.code == .malformedSegment && gap?.message.contains("contiguous") == true)
        #expect(error(library + "{\(confirmed)},{\(confirmed.replacingOccurrences(of: ":5,", with: ":6,"))}]}")?.message
            .contains("repeats the op id") == true)
        #expect(error(library + "{\(confirmed)},{\(goodMembers.replacingOccurrences(of: "000000000001", with: "000000000009"))}]}")?
            .code == .malformedSegment, "mixed")
        #expect(error(withOp(goodMembers + ",\"serverSeq\":5"))?.code == .malformedSegment, "serverSeq without serverTime")
        let foreign = error("{\"libraryID\":\"00000000-0000-4000-8000-00000000000b\",\"ops\":[{\(goodMembers)}]}")
        #expect(foreign?.code == .wrongLibrary)
    }

    @Test func theLimitsApply() throws {
        let json = WireJSON.encode(SegmentFixtures.segment(count: 30))
        var limits = SegmentCodec.Limits()
        limits.maxOps = 29
        #expect(chronicleError { _ = try WireJSON.decode(json, limits: limits) }?.code == .segmentTooLarge)
        limits = .init()
        limits.maxDecodedBytes = json.count - 1
        #expect(chronicleError { _ = try WireJSON.decode(json, limits: limits) }?.code == .segmentTooLarge)
        limits = .init()
        limits.maxOpBytes = 200
        #expect(chronicleError { _ = try WireJSON.decode(json, limits: limits) }?.code == .segmentTooLarge)
        limits.maxOpBytes = 1_000
        #expect(try WireJSON.decode(json, limits: limits).ops.count == 30)
    }

    // MARK: - Value as Codable

    @Test func valueIsCodableAsABareScalar() throws {
        let values: [Value] = [.null, .bool(true), .bool(false), .integer(0), .integer(.max), .integer(.min),
                               .real(0.5), .real(-0.0), .real(1e300), .text(""), .text("🧪 \"quoted\"")]
        let data = try JSONEncoder().encode(values)
        #expect(String(decoding: data, as: UTF8.self).hasPrefix("[null,true,false,0,9223372036854775807,-9223372036854775808,0.5,"))
        let back = try JSONDecoder().decode([Value].self, from: data)
        #expect(back == values)
        guard case .real(let negativeZero) = back[7] else { Issue.record("-0.0 stays a real"); return }
        #expect(negativeZero.sign == .minus)
        // The documented limit of Foundation's encoder: an integral real comes back as an integer.
        #expect(try JSONDecoder().decode(Value.self, from: JSONEncoder().encode(Value.real(2.0))) == .integer(2))
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(Value.self, from: Data("[1]".utf8)) }
    }
}
