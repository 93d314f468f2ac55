import ChronicleCore
import Foundation
import Testing
import ChronicleTesting

@Suite struct MaterializerTests {
    let schema = Schema.readItLater
    let library = UUID(uuidString: "00000000-0000-4000-8000-00000000000a")!
    let device = UUID(uuidString: "00000000-0000-4000-8000-0000000000d1")!
    let entity = UUID(uuidString: "00000000-0000-4000-8000-0000000000e1")!

    func op(_ type: String, _ payload: Payload, from: UUID? = nil) -> Op {
        Op(opID: UUID(), libraryID: library, deviceID: from ?? device, deviceSeq: 1, type: type, version: 1,
           entityID: entity, payload: payload, deviceTime: 1_000, baseSeq: 0)
    }

    @Test func sameOpGivesTheSameStatementsEveryTime() {
        let m = Materializer(schema: schema)
        for type in schema.ops.map(\.type) {
            let o = op(type, ["title": .text("t"), "tag": .text("x"), "progress": .real(0.5)])
            // Determinism, LiveStore-style: materialize twice and compare.
            #expect(m.steps(for: o) == m.steps(for: o))
        }
    }

    @Test func createWritesPayloadAndDefaultsInSchemaOrder() throws {
        let steps = Materializer(schema: schema).steps(for: op("article.save", ["url": .text("https://e.com"), "title": .text("T")]))
        let step = try #require(steps.first)
        #expect(steps.count == 1)
        #expect(step.sql.hasPrefix("INSERT INTO \"article\"(id, created_at, \"url\", \"title\", \"status\", \"favorite\", \"progress\""))
        #expect(step.sql.hasSuffix("ON CONFLICT(id) DO NOTHING"))
        #expect(step.arguments.contains(.text("saved")))
    }

    @Test func serverOnlyFieldsAreWrittenOnlyByServerOps() {
        let m = Materializer(schema: schema)
        let fromClient = m.steps(for: op("article.parsed", ["text": .text("body"), "title": .text("T")]))
        #expect(fromClient.count == 1 && !fromClient[0].sql.contains("\"text\""), "a client op sets the title, not the text")
        let fromServer = m.steps(for: op("article.parsed", ["text": .text("body")], from: Op.serverDeviceID))
        #expect(fromServer.first?.sql.contains("\"text\" = ?2") == true)
    }

    @Test func forwardOnlyIsAConditionalUpdate() throws {
        let step = try #require(Materializer(schema: schema).steps(for: op("article.progress", ["progress": .real(0.4)])).first)
        #expect(step.sql.contains("?2 >= \"progress\""))
        #expect(step.sql.contains("< \(MergeRule.forwardOnlyWindowMilliseconds)"))
        #expect(step.arguments == [.text(entity.lowercased), .real(0.4), .text(device.lowercased), .integer(1_000)])
    }

    @Test func unknownTypesAndMissingValuesDoNothing() {
        let m = Materializer(schema: schema)
        #expect(m.steps(for: op("article.teleport", [:])).isEmpty)
        #expect(m.steps(for: op("article.tag", [:])).isEmpty)
        var future = op("article.save", ["url": .text("https://e.com")])
        future.version = 99
        #expect(m.steps(for: future).isEmpty)
    }
}

@Suite struct SchemaTests {
    @Test func builtInSchemasLoadAndDeclareARulePerField() {
        for schema in [Schema.readItLater, Schema.fieldService] {
            #expect(!schema.entities.isEmpty && !schema.ops.isEmpty)
            #expect(schema.fingerprint.count == 64)
        }
        let article = Schema.readItLater.entity("article")!
        #expect(article.field("progress")?.rule == .forwardOnly)
        #expect(article.field("tags")?.rule == .set)
        #expect(article.field("text")?.rule == .serverOnly)
        #expect(Schema.fieldService.entity("part")?.field("quantity")?.rule == .counter)
    }

    @Test func badSchemasAreRefusedWithAReason() {
        let cases = [
            "[]",
            #"{"schema":"x","version":1,"entities":[{"name":"a","fields":[{"name":"id","type":"text","rule":"lww"}]}]}"#,
            #"{"schema":"x","version":1,"entities":[{"name":"a","fields":[{"name":"f","type":"text","rule":"sometimes"}]}]}"#,
            #"{"schema":"x","version":1,"entities":[{"name":"a","fields":[{"name":"f","type":"text","rule":"lww"}]}],"ops":[{"type":"a.x","version":1,"entity":"a","action":"set","fields":["nope"]}]}"#,
            #"{"schema":"x","version":1,"entities":[{"name":"a","fields":[{"name":"f","type":"text","rule":"lww"}],"search":[{"index":"a_fts","fields":["g"]}]}]}"#,
        ]
        for text in cases {
            #expect(throws: ChronicleError.self) { _ = try Schema.load(json: text) }
        }
    }

    @Test func validationNormalizesAndRefuses() throws {
        let s = Schema.readItLater
        let id = UUID()
        let (_, payload) = try s.validate(type: "highlight.create", version: 1,
                                          payload: ["article_id": .text(id.uuidString), "quote": .text("q")], serverAuthored: false)
        #expect(payload["article_id"] == .text(id.lowercased), "ids are stored lowercase")
        #expect(throws: ChronicleError.self) { try s.validate(type: "article.save", version: 1, payload: [:], serverAuthored: false) }
        #expect(throws: ChronicleError.self) { try s.validate(type: "article.save", version: 1, payload: ["url": .text("ftp://x")], serverAuthored: false) }
        #expect(throws: ChronicleError.self) { try s.validate(type: "article.update", version: 1, payload: ["status": .text("lost")], serverAuthored: false) }
        #expect(throws: ChronicleError.self) { try s.validate(type: "article.tag", version: 1, payload: ["tag": .text("")], serverAuthored: false) }
        #expect(throws: ChronicleError.self) { try s.validate(type: "article.progress", version: 1, payload: ["progress": .real(-0.1)], serverAuthored: false) }
        #expect(throws: ChronicleError.self) { try s.validate(type: "article.update", version: 1, payload: ["favorite": .integer(1)], serverAuthored: false) }
    }
}

@Suite struct CanonicalJSONTests {
    @Test func roundTripsEveryValueKind() throws {
        let payload: Payload = ["s": .text("é \"q\" \\ \n 🎉"), "i": .integer(-42), "big": .integer(9_007_199_254_740_993),
                                "r": .real(0.1), "whole": .real(2.0), "t": .bool(true), "f": .bool(false), "n": .null]
        let text = CanonicalJSON.encode(payload)
        #expect(try CanonicalJSON.decodePayload(text) == payload)
        #expect(CanonicalJSON.encode(try CanonicalJSON.decodePayload(text)) == text, "encoding is canonical")
        #expect(text.hasPrefix(#"{"big":9007199254740993,"f":false"#), "keys are sorted")
    }

    @Test func refusesWhatIsNotAFlatObject() {
        for text in ["", "[]", "1", #"{"a":[1]}"#, #"{"a":{"b":1}}"#, "{", "\u{0}"] {
            #expect(throws: ChronicleError.self) { _ = try CanonicalJSON.decodePayload(text) }
        }
    }
}

@Suite struct SearchQueryTests {
    @Test func quotesEveryTermSoOperatorsAreLiteral() {
        #expect(SearchQuery("swift conc*").match == #""swift" "conc"*"#)
        #expect(SearchQuery(#""offline first" AND ("#).match == #""offline first" "AND""#)
        #expect(SearchQuery(#"say "hi"#).match == #""say" "hi""#)
        #expect(SearchQuery(#"a"b"#).match == #""a" "b""#)
        #expect(SearchQuery("🎉 ((( ***").isEmpty)
        #expect(SearchQuery("NEAR(a b)").match == #""NEAR(a" "b)""#)
    }
}

@Suite struct FastPayloadParserTests {
    func fast(_ text: String) throws -> Payload {
        var copy = text
        return try copy.withUTF8 { try CanonicalJSON.decodePayload(utf8: UnsafeRawBufferPointer($0)) }
    }

    @Test func agreesWithTheGeneralParserOnRandomPayloads() throws {
        let rng = SeededIDGenerator(seed: 42)
        let alphabet: [String] = ["a", "é", "\"", "\\", "\n", "\t", "\u{1}", "🎉", "/", "中", " ", "\u{7f}", "\u{2028}"]
        for _ in 0..<2_000 {
            var payload = Payload()
            for k in 0..<Int(rng.next() % 5) {
                let text = (0..<Int(rng.next() % 8)).map { _ in alphabet[Int(rng.next() % UInt64(alphabet.count))] }.joined()
                switch rng.next() % 5 {
                case 0: payload["k\(k)\(text)"] = .text(text)
                case 1: payload["k\(k)"] = .integer(Int64(bitPattern: rng.next()))
                case 2: payload["k\(k)"] = .real(Double(Int64(bitPattern: rng.next() >> 11)) / 1e9)
                case 3: payload["k\(k)"] = .bool(rng.next() % 2 == 0)
                default: payload["k\(k)"] = .null
                }
            }
            let text = CanonicalJSON.encode(payload)
            #expect(try fast(text) == payload, "\(text)")
            #expect(try fast(text) == CanonicalJSON.decodePayload(text))
        }
        #expect(try fast(#"{"u":"\u00e9\ud83c\udf89"}"#) == ["u": .text("é🎉")])
        #expect(try fast(#"{"r":1e-05,"i":-3}"#) == ["r": .real(1e-05), "i": .integer(-3)])
        #expect(try fast(" { \"spaced\" : 1 ,\"b\":true}\n") == ["spaced": .integer(1), "b": .bool(true)])
        // One parser reads payloads, segments and the wire alike: an integer past 64 bits is refused,
        // never rounded into a real, and a key named twice is refused, not overwritten.
        #expect { _ = try fast(#"{"huge":123456789012345678901234}"#) } throws: { ($0 as? ChronicleError)?.message.contains("does not fit in 64 bits") == true }
        #expect { _ = try fast(#"{"a":1,"a":2}"#) } throws: { ($0 as? ChronicleError)?.message.contains("names the key 'a' twice") == true }
        #expect(throws: ChronicleError.self) { _ = try fast(#"{"a":"\ud83c"}"#) }
    }
}

@Suite struct UUIDTextTests {
    @Test func fastTextFormMatchesFoundation() {
        let ids = SeededIDGenerator(seed: 3)
        for _ in 0..<1000 {
            let id = ids.makeUUID()
            #expect(id.lowercased == id.uuidString.lowercased())
            #expect(UUID(text: id.lowercased) == id)
            #expect(UUID(text: id.uuidString) == id)
        }
        for bad in ["", "x", "00000000-0000-4000-8000-00000000000", "00000000-0000-4000-8000-00000000000g", "000000000000-4000-8000-0000000000000",
                    "0000000:-0000-4000-8000-000000000000", "0000000/-0000-4000-8000-000000000000", "0000000`-0000-4000-8000-000000000000",
                    "0000000G-0000-4000-8000-000000000000", "0000000g-0000-4000-8000-000000000000", "0000000@-0000-4000-8000-000000000000"] {
            #expect(UUID(text: bad) == nil)
        }
    }
}
