import ChronicleCore
import ChronicleServer
@testable import ChronicleStore
@testable import ChronicleSync
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing

/// Bad input over real HTTP: a 4xx with a stable code, never a 5xx, never a crash, nothing written.
@Suite struct HTTPBadInputTests {
    final class Rig: @unchecked Sendable {
        let h: SyncHarness
        let a: TestDevice
        let session = URLSession(configuration: .ephemeral)
        var base: URL { h.http!.url }
        var library: String { h.user.libraryID.lowercased }

        init() throws {
            var limits = ServiceLimits()
            limits.pushOpsMax = 10
            h = try SyncHarness(.http, limits: limits)
            a = try h.device("A")
        }

        func send(_ method: String, _ path: String, headers: [String: String] = [:], body: [UInt8]? = nil,
                  token: String? = nil) async throws -> (status: Int, code: String?, body: [UInt8], allow: String?) {
            var request = URLRequest(url: URL(string: base.absoluteString + path)!)
            request.httpMethod = method
            request.timeoutInterval = 10
            for (key, value) in headers { request.setValue(value, forHTTPHeaderField: key) }
            if let token = token ?? Optional(a.token) { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
            if let body { request.httpBody = Data(body) }
            let (data, response) = try await session.data(for: request)
            let bytes = [UInt8](data)
            let http = response as! HTTPURLResponse
            return (http.statusCode, ProtocolJSON.decodeError(bytes)?.code, bytes, http.value(forHTTPHeaderField: "Allow"))
        }

        func push(_ body: [UInt8], type: String = SegmentCodec.mediaType, token: String? = nil) async throws -> (status: Int, code: String?, body: [UInt8], allow: String?) {
            try await send("POST", "/v1/libraries/\(library)/ops", headers: ["Content-Type": type], body: body, token: token)
        }

        func segment(_ ops: [Op]) throws -> [UInt8] { SegmentCodec.encode(try Segment(libraryID: h.user.libraryID, ops: ops)) }
    }

    @Test func brokenSegmentsAreRefusedWithStableCodesAndNothingIsWritten() async throws {
        let rig = try Rig()
        try rig.a.save("One")
        let good = try rig.segment(try rig.a.store.pendingOps())

        let broken: Set<String?> = ["malformed_frame", "malformed_segment", "segment_checksum"]
        var garbage = try await rig.push(Array("this is not a segment".utf8))
        #expect(garbage.status == 400 && garbage.code == "malformed_frame")
        garbage = try await rig.push((0..<300).map { UInt8(truncatingIfNeeded: $0 &* 37) })
        #expect(garbage.status == 400 && garbage.code == "malformed_frame")

        for cut in [1, good.count / 2, good.count - 1] {
            let truncated = try await rig.push(Array(good.prefix(cut)))
            #expect(truncated.status == 400, "cut at \(cut)")
            #expect(broken.contains(truncated.code), "cut at \(cut): \(truncated.code ?? "-")")
        }

        // A changed byte inside the compressed block fails the frame's content checksum.
        var flipped = good
        flipped[flipped.count - 6] ^= 0x5A
        let corrupt = try await rig.push(flipped)
        #expect(corrupt.status == 400)
        #expect(broken.contains(corrupt.code), "\(corrupt.code ?? "-")")

        // A segment from a future format version.
        var body = SegmentCodec.encodeBody(try Segment(libraryID: rig.h.user.libraryID, ops: try rig.a.store.pendingOps()))
        body[4] = 0x09; body[5] = 0x00
        let future = try await rig.push(LZ4Frame.compress(body))
        #expect(future.status == 400 && future.code == "future_segment_version")

        #expect(try rig.h.library.allOps().isEmpty, "nothing was written")
        let fine = try await rig.push(good)
        #expect(fine.status == 200)
        #expect(try rig.h.library.allOps().count == 1)
    }

    @Test func capsAndAuthAnswer4xx() async throws {
        let rig = try Rig()
        for i in 0..<11 { try rig.a.save("Article \(i)") }
        let eleven = try rig.segment(try rig.a.store.pendingOps())
        let tooMany = try await rig.push(eleven)
        #expect(tooMany.status == 413 && tooMany.code == "segment_too_large" || tooMany.code == "too_many_ops")

        let noToken = try await rig.send("GET", "/v1/libraries/\(rig.library)/ops", token: "")
        #expect(noToken.status == 401 && noToken.code == "unauthorized")
        let forged = try await rig.send("GET", "/v1/libraries/\(rig.library)/ops", token: "chr_" + String(repeating: "0", count: 64))
        #expect(forged.status == 401)

        // A token for another library.
        let other = try rig.h.service.accounts.addUser("bob", password: "another password", schema: .readItLater)
        let (bobToken, _) = try rig.h.service.accounts.registerDevice(user: "bob", password: "another password", deviceID: UUID())
        let foreign = try await rig.send("GET", "/v1/libraries/\(rig.library)/ops", token: bobToken)
        #expect(foreign.status == 403 && foreign.code == "forbidden_library")
        let foreignPush = try await rig.push(eleven, token: bobToken)
        #expect(foreignPush.status == 403 || foreignPush.status == 413)
        #expect(other.libraryID != rig.h.user.libraryID)

        let limit = try await rig.send("GET", "/v1/libraries/\(rig.library)/ops?limit=100000000")
        #expect(limit.status == 400 && limit.code == "limit_too_large")
        let wait = try await rig.send("GET", "/v1/libraries/\(rig.library)/ops?wait=999999999")
        #expect(wait.status == 400 && wait.code == "wait_too_long")
        let query = try await rig.send("GET", "/v1/libraries/\(rig.library)/ops?after=soon")
        #expect(query.status == 400 && query.code == "bad_query")
        let negative = try await rig.send("GET", "/v1/libraries/\(rig.library)/ops?after=-105935680193577")
        #expect(negative.status == 400 && negative.code == "bad_cursor")
        let snapshotID = try await rig.send("GET", "/v1/libraries/null,null/snapshot")
        #expect(snapshotID.status == 400 && snapshotID.code == "bad_id")
        let ahead = try await rig.send("GET", "/v1/libraries/\(rig.library)/ops?after=500")
        #expect(ahead.status == 409 && ahead.code == "cursor_ahead")
        let badID = try await rig.send("GET", "/v1/libraries/not-a-uuid/ops")
        #expect(badID.status == 400 && badID.code == "bad_id")
        let type = try await rig.push(eleven, type: "text/plain")
        #expect(type.status == 415 && type.code == "unsupported_media_type")
        let json = try await rig.push(Array("{\"libraryID\": 12".utf8), type: "application/json")
        #expect(json.status == 400)
        let route = try await rig.send("GET", "/v2/nothing")
        #expect(route.status == 404 && route.code == "not_found")
        // Every route answers a method it does not serve with 405 and the methods it does (RFC 9110 §15.5.6).
        let routes: [(path: String, allowed: String)] = [
            ("/healthz", "GET"), ("/metrics", "GET"), ("/v1/devices", "POST"), ("/v1/libraries/\(rig.library)/ops", "GET, POST"),
            ("/v1/libraries/\(rig.library)/snapshot", "GET"), ("/v1/libraries/\(rig.library)/entities/\(UUID().lowercased)", "GET"),
        ]
        for (path, allowed) in routes {
            for verb in ["DELETE", "PUT", "PATCH", "TRACE"] where !allowed.contains(verb) {
                let method = try await rig.send(verb, path)
                #expect(method.status == 405 && method.code == "method_not_allowed" && method.allow == allowed, "\(verb) \(path)")
            }
        }
        let register = try await rig.send("POST", "/v1/devices", headers: ["Content-Type": "application/json"],
                                          body: Array(#"{"user":"ada","password":"wrong password","deviceID":"\#(UUID().lowercased)"}"#.utf8))
        #expect(register.status == 401 && register.code == "bad_credentials")

        #expect(try rig.h.library.allOps().isEmpty, "nothing was written")
    }

    @Test func unknownOpTypesAndForeignDevicesAreAnsweredPerOpOrRefused() async throws {
        let rig = try Rig()
        try rig.a.save("Kept")
        var ops = try rig.a.store.pendingOps()
        var unknown = ops[0]
        unknown.opID = UUID()
        unknown.deviceSeq = 2
        unknown.type = "article.teleport"
        ops.append(unknown)
        let answer = try await rig.push(try rig.segment(ops))
        #expect(answer.status == 200)
        let response = try ProtocolJSON.decodePushResponse(answer.body)
        #expect(response.results.map(\.outcome.serverSeq) == [1, nil])
        if case .rejected(let code, _) = response.results[1].outcome { #expect(code == "unknown_op_type") } else { Issue.record("not rejected") }

        // Ops claiming another device's id.
        var impostor = ops[0]
        impostor.opID = UUID()
        impostor.deviceID = UUID()
        impostor.deviceSeq = 1
        let refused = try await rig.push(try rig.segment([impostor]))
        #expect(refused.status == 403 && refused.code == "wrong_device")

        // A gap in the device's sequence.
        var gap = ops[0]
        gap.opID = UUID()
        gap.deviceSeq = 9
        let gapped = try await rig.push(try rig.segment([gap]))
        #expect(gapped.status == 409 && gapped.code == "device_seq_gap")
        #expect(try rig.h.library.allOps().count == 1)
    }

    @Test func healthAndMetrics() async throws {
        let rig = try Rig()
        try rig.a.save("Counted")
        await rig.a.sync()
        let health = try await rig.send("GET", "/healthz")
        #expect(health.status == 200 && String(decoding: health.body, as: UTF8.self).contains("ok"))
        let metrics = try await rig.send("GET", "/metrics")
        let text = String(decoding: metrics.body, as: UTF8.self)
        #expect(metrics.status == 200)
        #expect(text.contains(#"chronicle_ops_total{outcome="accepted"} 1"#))
        #expect(text.contains("chronicle_pull_duration_seconds_count"))
        #expect(text.contains(#"chronicle_http_requests_total{method="POST",route="/v1/libraries/{library}/ops",status="200"} 1"#))
    }

    @Test func jsonIsAcceptedAndServedForDebugging() async throws {
        let rig = try Rig()
        try rig.a.save("Over JSON")
        let ops = try rig.a.store.pendingOps()
        let pushed = try await rig.push(WireJSON.encode(try Segment(libraryID: rig.h.user.libraryID, ops: ops)), type: "application/json")
        #expect(pushed.status == 200)
        let pulled = try await rig.send("GET", "/v1/libraries/\(rig.library)/ops?after=0", headers: ["Accept": "application/json"])
        #expect(pulled.status == 200)
        let segment = try WireJSON.decode(pulled.body)
        #expect(segment.ops.count == 1 && segment.ops[0].opID == ops[0].opID)
        let verdict = try await rig.send("GET", "/v1/libraries/\(rig.library)/entities/\(ops[0].entityID.lowercased)")
        #expect(try ProtocolJSON.decodeVerdict(verdict.body).fields["title"] == .text("Over JSON"))
    }
}
