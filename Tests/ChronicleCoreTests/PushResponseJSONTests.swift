import ChronicleCore
import Foundation
import Testing

/// The push answer's JSON, written and read without `Codable`: the shape the API documents,
/// what an older server wrote (through `JSONEncoder`) still reads, and bad answers are
/// refused with `malformed_payload`, never misread.
@Suite struct PushResponseJSONTests {
    let op1 = UUID(uuidString: "20000000-0000-4000-8000-000000000001")!
    let op2 = UUID(uuidString: "20000000-0000-4000-8000-000000000002")!
    let op3 = UUID(uuidString: "20000000-0000-4000-8000-000000000003")!
    let entity = UUID(uuidString: "30000000-0000-4000-8000-000000000001")!

    var mixed: PushResponse {
        let verdict = Verdict(entityID: entity, entityType: "article", deleted: false,
                              fields: ["title": .text("What \"stands\"\n/ here"), "word_count": .integer(12), "score": .real(0.5)],
                              sets: ["tags": [.text("a"), .text("b")]], lastSeq: 41, head: 44)
        return PushResponse(results: [
            PushResult(opID: op1, deviceSeq: 7, outcome: .accepted(serverSeq: 42)),
            PushResult(opID: op2, deviceSeq: 8, outcome: .duplicate(serverSeq: 17)),
            PushResult(opID: op3, deviceSeq: 9, outcome: .rejected(code: "unknown_entity", message: "No article with id \\ \"x\" \u{1}, é 🎧."),
                       verdict: verdict),
        ], head: 44)
    }

    func error(_ text: String) -> ChronicleError? {
        chronicleError { _ = try ProtocolJSON.decodePushResponse(Array(text.utf8)) }
    }

    @Test func writesTheDocumentedShapeWithSortedKeys() {
        let response = PushResponse(results: [PushResult(opID: op1, deviceSeq: 7, outcome: .accepted(serverSeq: 42)),
                                              PushResult(opID: op3, deviceSeq: 9, outcome: .rejected(code: "invalid_payload", message: "Bad."))],
                                    head: 42)
        let json = String(decoding: ProtocolJSON.encode(response), as: UTF8.self)
        #expect(json == """
            {"head":42,"results":[{"deviceSeq":7,"opID":"20000000-0000-4000-8000-000000000001","serverSeq":42,"status":"accepted"},\
            {"code":"invalid_payload","deviceSeq":9,"message":"Bad.","opID":"20000000-0000-4000-8000-000000000003","status":"rejected"}]}
            """)
        // The same as Foundation's JSONSerialization reads it.
        let object = try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]
        #expect((object?["results"] as? [Any])?.count == 2)
    }

    @Test func roundTripsEveryOutcomeWithAVerdict() throws {
        #expect(try ProtocolJSON.decodePushResponse(ProtocolJSON.encode(mixed)) == mixed)
        let empty = PushResponse(results: [], head: 0)
        #expect(try ProtocolJSON.decodePushResponse(ProtocolJSON.encode(empty)) == empty)
    }

    @Test func readsWhatJSONEncoderWroteAndIgnoresUnknownMembers() throws {
        // An older server's answer: JSONEncoder escapes '/', spaces are allowed, nulls for
        // absent optionals, a member this version does not know.
        let text = """
            { "results" : [ {"code":null,"deviceSeq":7,"message":null,"opID":"20000000-0000-4000-8000-000000000001",
              "serverSeq":42,"status":"accepted","verdict":null,"later":{"nested":[1,{"x":"y"}]}},
              {"code":"too_long","deviceSeq":8,"message":"a\\/b \\u00e9","opID":"20000000-0000-4000-8000-000000000002",
               "status":"rejected"} ], "head" : 42, "server":"future" }
            """
        let response = try ProtocolJSON.decodePushResponse(Array(text.utf8))
        #expect(response == PushResponse(results: [PushResult(opID: op1, deviceSeq: 7, outcome: .accepted(serverSeq: 42)),
                                                   PushResult(opID: op2, deviceSeq: 8, outcome: .rejected(code: "too_long", message: "a/b é"))],
                                         head: 42))
    }

    @Test func refusesBadAnswersWithAClearError() {
        let bad = [
            "",
            "[]",
            "{\"head\":1}",
            "{\"results\":[]}",
            "{\"head\":\"1\",\"results\":[]}",
            "{\"head\":1,\"results\":[{\"deviceSeq\":1,\"status\":\"accepted\",\"serverSeq\":1}]}",
            "{\"head\":1,\"results\":[{\"opID\":\"nope\",\"deviceSeq\":1,\"status\":\"accepted\",\"serverSeq\":1}]}",
            "{\"head\":1,\"results\":[{\"opID\":\"20000000-0000-4000-8000-000000000001\",\"deviceSeq\":1,\"status\":\"accepted\"}]}",
            "{\"head\":1,\"results\":[{\"opID\":\"20000000-0000-4000-8000-000000000001\",\"deviceSeq\":1,\"status\":\"maybe\",\"serverSeq\":1}]}",
            "{\"head\":1,\"results\":[{\"opID\":\"20000000-0000-4000-8000-000000000001\",\"deviceSeq\":1.5,\"status\":\"accepted\",\"serverSeq\":1}]}",
            "{\"head\":1,\"results\":[]} trailing",
            "{\"head\":1,\"results\":[],\"x\":" + String(repeating: "[", count: 100) + String(repeating: "]", count: 100) + "}",
            "{\"head\":1,\"results\":[{\"opID\":\"20000000-0000-4000-8000-000000000001\",\"deviceSeq\":1,\"status\":\"rejected\",\"verdict\":{\"entityID\":1}}]}",
            "{\"head\":1,\"results\":[",
            // Seqs out of their range: an op's seq starts at 1, and none passes 2^53.
            "{\"head\":1,\"results\":[{\"opID\":\"20000000-0000-4000-8000-000000000001\",\"deviceSeq\":1,\"status\":\"duplicate\",\"serverSeq\":0}]}",
            "{\"head\":1,\"results\":[{\"opID\":\"20000000-0000-4000-8000-000000000001\",\"deviceSeq\":-3,\"status\":\"accepted\",\"serverSeq\":4}]}",
            "{\"head\":1,\"results\":[{\"opID\":\"20000000-0000-4000-8000-000000000001\",\"deviceSeq\":1,\"status\":\"accepted\",\"serverSeq\":9223372036854775807}]}",
            "{\"head\":-1,\"results\":[]}",
        ]
        for text in bad {
            let failure = error(text)
            #expect(failure?.code == .malformedPayload, "\(text)")
            #expect(failure?.message.isEmpty == false)
        }
    }
}
