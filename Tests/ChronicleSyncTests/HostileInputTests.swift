import ChronicleCore
import ChronicleServer
@testable import ChronicleStore
@testable import ChronicleSync
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing

/// Single requests that once took the server (or a device) down, kept as regressions: numbers at
/// and past Int64's bounds, schemes in odd cases, bodies of the wrong shape. Each answer is a 4xx
/// with a stable code and a sentence, and the server answers the next request as before.
@Suite struct HostileInputTests {
    typealias Rig = HTTPBadInputTests.Rig

    static let int64Max = "9223372036854775807"

    /// Once: `Range: bytes=0-9223372036854775807` trapped in the range's `end - start + 1`, before
    /// the token was checked, with any bearer string at all.
    @Test func aRangeToInt64MaxIsReadAsToTheEnd() async throws {
        let rig = try Rig()
        let bytes = BlobSyncTests.file(3, bytes: 1_000)
        let ref = BlobRef.of(bytes)
        let path = "/v1/libraries/\(rig.library)/blobs/\(ref)"
        let stranger = try await rig.send("GET", path, headers: ["Range": "bytes=0-\(Self.int64Max)"], token: "anything")
        #expect(stranger.status == 401 && stranger.code == "unauthorized")

        #expect(try await BlobHTTPTests.put(rig, ref.description, offset: 0, length: 1_000, bytes).status == 200)
        for range in ["bytes=0-\(Self.int64Max)", "bytes=0-99999999999999999999999", "bytes=10-9223372036854775806"] {
            let answer = try await rig.send("GET", path, headers: ["Range": range])
            #expect(answer.status == 206, "\(range): \(answer.status) \(answer.code ?? "")")
            #expect(answer.body == Array(bytes[(range.hasPrefix("bytes=10") ? 10 : 0)...]), "\(range)")
        }
        // A range past the end is 416 range_not_satisfiable; what is no range of this API, 416 bad_range.
        let past = try await rig.send("GET", path, headers: ["Range": "bytes=\(Self.int64Max)-"])
        #expect(past.status == 416 && past.code == "range_not_satisfiable")
        for range in ["bytes=9223372036854775808-", "bytes=-5", "bytes=+0-5", "bytes= 0-5", "{}"] {
            let answer = try await rig.send("GET", path, headers: ["Range": range])
            #expect(answer.status == 416 && answer.code == "bad_range", "\(range): \(answer.status) \(answer.code ?? "")")
        }
        // An empty Range asks for no range: the whole blob.
        let empty = try await rig.send("GET", path, headers: ["Range": ""])
        #expect(empty.status == 200 && empty.body == bytes)
        #expect(try await rig.send("GET", "/healthz", token: "").status == 200, "the server still answers")
    }

    /// Once: `offset + count` trapped in `BlobRules.check` for an offset near Int64.max.
    @Test func aChunkAtAnOffsetNearInt64MaxIsOutOfRange() async throws {
        let rig = try Rig()
        let bytes = BlobSyncTests.file(4, bytes: 480)
        let ref = BlobRef.of(bytes).description
        for offset in [Int64.max - 1, Int64.max, Int64.max - 479] {
            let answer = try await BlobHTTPTests.put(rig, ref, offset: offset, length: 480, bytes)
            #expect(answer.status == 400 && answer.code == "chunk_out_of_range", "offset \(offset): \(answer.code ?? "")")
        }
        let negative = try await BlobHTTPTests.put(rig, ref, offset: Int64.min, length: 480, bytes)
        #expect(negative.status == 400 && negative.code == "chunk_out_of_range")
        let past = try await rig.send("PUT", "/v1/libraries/\(rig.library)/blobs/\(ref)?offset=9223372036854775808&length=480",
                                      headers: ["Content-Type": BlobLimits.mediaType], body: bytes)
        #expect(past.status == 400 && past.code == "bad_query")
        #expect(try await BlobHTTPTests.put(rig, ref, offset: 0, length: 480, bytes).status == 200, "the server still takes uploads")
    }

    @Test func numbersInThePullsQueryAreStrict() async throws {
        let rig = try Rig()
        let ops = "/v1/libraries/\(rig.library)/ops"
        for query in ["after=+1", "after=1%20", "after=0x10", "after=9223372036854775808", "limit=", "wait=1e3"] {
            let answer = try await rig.send("GET", "\(ops)?\(query)")
            #expect(answer.status == 400 && answer.code == "bad_query", "\(query): \(answer.status) \(answer.code ?? "")")
        }
        let farAhead = try await rig.send("GET", "\(ops)?after=\(Self.int64Max)")
        #expect(farAhead.status == 409 && farAhead.code == ProtocolError.Code.cursorAhead.rawValue)
        let start = try await rig.send("GET", "/v1/libraries/\(rig.library)/start-image?format=\(Self.int64Max)&schema=x")
        #expect(start.status == 400)
    }

    /// RFC 9110 §11.1: the scheme is case-insensitive. A token is visible ASCII only.
    @Test func theBearerSchemeIsCaseInsensitiveAndATokenHoldsNoSpace() async throws {
        let rig = try Rig()
        let ops = "/v1/libraries/\(rig.library)/ops"
        for header in ["Bearer \(rig.a.token)", "bearer \(rig.a.token)", "BEARER \(rig.a.token)", "Bearer\t\(rig.a.token)",
                       "Bearer   \(rig.a.token)  "] {
            var request = URLRequest(url: URL(string: rig.base.absoluteString + ops)!)
            request.setValue(header, forHTTPHeaderField: "Authorization")
            let (_, response) = try await rig.session.data(for: request)
            #expect((response as! HTTPURLResponse).statusCode == 200, "'\(header)'")
        }
        for header in ["Bearer \(rig.a.token) junk", "Basic \(rig.a.token)", "Bearer", "Bearer ", "Bearer\(rig.a.token)", "Token \(rig.a.token)"] {
            var request = URLRequest(url: URL(string: rig.base.absoluteString + ops)!)
            request.setValue(header, forHTTPHeaderField: "Authorization")
            let (_, response) = try await rig.session.data(for: request)
            #expect((response as! HTTPURLResponse).statusCode == 401, "'\(header)'")
        }
    }

    /// A body of the wrong shape is told which field is wrong, never the decoder's debug text.
    @Test func aBadRegistrationSaysWhichFieldAndNothingInternal() async throws {
        let rig = try Rig()
        let bodies: [(String, String)] = [("not json", "not JSON"), (#"{"user":"ada"}"#, "'password' is missing"),
                                          (#"{"user":1,"password":"x","deviceID":"y"}"#, "'user' must be a string"), ("[]", "not a JSON object")]
        for (body, says) in bodies {
            let answer = try await rig.send("POST", "/v1/devices", headers: ["Content-Type": "application/json"], body: Array(body.utf8), token: "")
            let error = try #require(ProtocolJSON.decodeError(answer.body))
            #expect(answer.status == 400 && error.code == "malformed_payload", "\(body)")
            #expect(error.message.contains(says), "\(body): \(error.message)")
            for leaked in ["DecodingError", "Debug description", "CodingKeys", "Swift."] {
                #expect(!error.message.contains(leaked), "\(body): \(error.message)")
            }
        }
    }

    /// Once: a `409 device_seq_reused` naming `Chronicle-Last-Device-Seq: 9223372036854775807`
    /// trapped the device in `moveQueue` on every sync. A number past the protocol's bound is read
    /// as absent: the device reports the refusal, keeps its queue, and its store verifies.
    @Test func aDeviceSeqPastTheBoundFromAServerNeverTrapsTheDevice() async throws {
        for (reused, last) in [("1", Self.int64Max), ("1", "9223372036854775806"), ("9223372036854775807", Self.int64Max),
                               ("-1", "5"), ("1", String(WireNumber.seqMax))] {
            let server = try HTTPServer(configuration: HTTPServer.Configuration(), handler: Refuser(reused: reused, last: last))
            defer { server.stop() }
            let directory = NSTemporaryDirectory() + "chronicle-hostile-\(UUID().lowercased)"
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let store = try DeviceStore.create(at: directory + "/d.chronicle", schema: .readItLater, libraryID: UUID(), deviceID: UUID())
            for i in 0..<3 { _ = try store.write("article.save", payload: ["url": .text("https://example.com/\(i)"), "title": .text("T\(i)")]) }
            let queued = try store.pendingOps().map(\.opID)
            var configuration = SyncEngine.Configuration()
            configuration.backoffBaseMilliseconds = 1
            configuration.backoffMaxMilliseconds = 5
            let transport = HTTPTransport(baseURL: URL(string: "http://127.0.0.1:\(server.port)")!, library: store.libraryID,
                                          token: "chr_x", requestTimeoutSeconds: 5)
            let engine = SyncEngine(store: store, transport: transport, configuration: configuration, random: { 0.5 })
            for _ in 0..<2 {
                let report = await engine.syncOnce()
                #expect(report.outcome != .synced, "\(reused)/\(last)")
            }
            #expect(Set(try store.pendingOps().map(\.opID)) == Set(queued), "\(reused)/\(last): the queue is kept")
            #expect(try store.verify().passed, "\(reused)/\(last)")
        }
    }

    /// Answers every push 409 `device_seq_reused` with the given numbers, and every other request 503.
    struct Refuser: HTTPHandler {
        let reused: String
        let last: String
        func handle(_ request: HTTPRequest, respond: @escaping @Sendable (HTTPResponse) -> Void) {
            guard request.method == "POST" else { return respond(.error(503, code: "server_busy", message: "Busy.")) }
            var response = HTTPResponse.error(409, code: ProtocolError.Code.deviceSeqReused.rawValue, message: "Used again.")
            response.headers += [(ProtocolError.reusedDeviceSeqHeader, reused), (ProtocolError.lastDeviceSeqHeader, last)]
            respond(response)
        }
    }
}
