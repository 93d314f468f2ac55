import ChronicleCore
@testable import ChronicleServer
@testable import ChronicleStore
@testable import ChronicleSync
import Foundation
import Testing

/// Hostile requests against the real server (issue 56, point 2): libmicrohttpd on 127.0.0.1,
/// the real routes, accounts, body budget, worker pool and SQLite files, driven over raw sockets
/// from a corpus of one valid request per operation of Schemas/api/openapi.yaml, each mutated by
/// `RequestMutator`. Properties: every request is answered or its connection closed within 5 s;
/// no 5xx but the documented 503 and 507; the server still answers at the end, a device still
/// syncs, and what `chronicle server verify --all` checks passes.
///
/// Soak: `CHRONICLE_FUZZ_REQUESTS=5000000 CHRONICLE_FUZZ_SEED=7 swift test --skip-build --filter RequestFuzzTests`.
/// Replay: `CHRONICLE_FUZZ_SEED=S CHRONICLE_FUZZ_ONLY=i,j …` prints each input and its answer.
@Suite(.serialized, .timeLimit(.minutes(30)))
struct RequestFuzzTests {
    @Test func hostileRequestsNeitherTrapNorHangNorFailTheServer() async throws {
        let rig = try await FuzzServerRig()
        let seed = FuzzEnvironment.seed(default: 56)
        if let only = FuzzEnvironment.only {
            for index in only { rig.replay(index, seed: seed) }
            return
        }
        let count = UInt64(FuzzEnvironment.integer("CHRONICLE_FUZZ_REQUESTS", default: 100_000))
        let inflight = NSTemporaryDirectory() + "chronicle-request-fuzz-inflight.txt"
        print("RequestFuzzTests: seed \(seed), \(count) requests; after a trap, \(inflight) names the inputs in flight")
        let run = RequestFuzzRun(port: rig.h.http!.port, seed: seed, count: count, inflightPath: inflight,
                                 mayBeServed: { [rig] in rig.mayBeServed($0) }) { [rig] index in
            rig.input(index, seed: seed)
        }
        let started = ContinuousClock.now
        await run.run(threads: FuzzEnvironment.integer("CHRONICLE_FUZZ_THREADS", default: 3))
        let seconds = Double((ContinuousClock.now - started).components.seconds)
            + Double((ContinuousClock.now - started).components.attoseconds) / 1e18
        print("""
            RequestFuzzTests: \(run.sent) requests sent (\(run.pipelined) pipelined, \(run.alone) alone) in \
            \(String(format: "%.1f", seconds)) s, \(Int(Double(run.sent) / max(seconds, 0.001)))/s; \(run.closedUnanswered) closed unanswered; \
            statuses \(run.statuses.sorted { $0.key < $1.key }.map { "\($0.key):\($0.value)" }.joined(separator: " "))
            """)
        for (name, held) in run.heldBack { print("RequestFuzzTests: held back \(held) inputs: \(name)") }
        for (kind, n) in run.findingKinds.sorted(by: { $0.key < $1.key }) { print("RequestFuzzTests: finding \(kind) × \(n)") }
        #expect(run.findings.isEmpty, "seed \(seed):\n\(run.findings.map(\.description).joined(separator: "\n"))")
        #expect(run.sent >= Int(count), "every request went out")

        // Still alive and still right: answers, a device syncs through it, and verify passes.
        let health = try RawHTTPConnection(port: rig.h.http!.port)
        health.write(Array("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8))
        guard case .answer(let answer) = health.readAnswer(until: .now + .seconds(5)) else {
            Issue.record("the server did not answer /healthz after the run")
            return
        }
        #expect(answer.status == 200)
        try rig.a.save("After the fuzz")
        await rig.a.sync()
        #expect(try ServerVerify.failures(rig.h.service) == [])
    }
}

/// The server under test and everything a request can name in it: a library with history, a
/// snapshot and a start image; a complete blob and a half-uploaded one; devices whose tokens are
/// valid, revoked, or of another user; an access token; a push of ops not yet sent.
final class FuzzServerRig: @unchecked Sendable {
    let h: SyncHarness
    let a: TestDevice
    let targets: FuzzTargets
    let corpus: [(weight: Int, request: RawRequest)]
    private let totalWeight: Int

    init() async throws {
        var configuration = HTTPServer.Configuration()
        // Small caps, so that bodies and lengths from the fuzzer reach the 413s and the body budget.
        configuration.maxBodyBytes = 256 << 10
        configuration.bufferedBodyBytesMax = 512 << 10
        configuration.connectionTimeoutSeconds = 10
        h = try SyncHarness(.http, maintenance: StartImageTests.policy(), httpConfiguration: configuration)
        a = try h.device("A")
        try Workload(seed: 91).run(40, on: a)
        await a.sync()
        _ = h.service.runMaintenance()
        try Workload(seed: 92).run(10, on: a)
        await a.sync()

        let fuzzed = try h.device("F")
        for i in 0..<3 { try fuzzed.save("Pushed by the fuzzer \(i)") }
        let ops = try fuzzed.store.pendingOps()
        let revoked = try h.device("R")
        _ = try h.service.accounts.revokeDevice(revoked.store.deviceID)
        let other = try h.service.accounts.addUser("bob", password: "another password", schema: .readItLater)
        let (bobToken, _) = try h.service.accounts.registerDevice(user: "bob", password: "another password", deviceID: UUID())
        let (access, _, _) = try h.service.accounts.openSession(deviceToken: fuzzed.token, lifetimeSeconds: 3_600)

        let complete = BlobSyncTests.file(56, bytes: 3_000)
        let partial = BlobSyncTests.file(57, bytes: 4_000)
        _ = try h.service.putBlobNow(library: h.user.libraryID, blob: BlobRef.of(complete), length: 3_000, offset: 0, bytes: complete, token: a.token)
        _ = try h.service.putBlobNow(library: h.user.libraryID, blob: BlobRef.of(partial), length: 4_000, offset: 0,
                                     bytes: Array(partial.prefix(1_000)), token: a.token)
        let segment = try Segment(libraryID: h.user.libraryID, ops: ops)
        targets = FuzzTargets(
            library: h.user.libraryID, otherLibrary: other.libraryID, deviceToken: fuzzed.token, accessToken: access,
            revokedToken: revoked.token, otherUserToken: bobToken, user: "ada", password: h.password,
            entity: try #require(try a.store.rows("article", limit: 1).first.flatMap { UUID(text: $0.id) }),
            completeBlob: (BlobRef.of(complete).description, complete), partialBlob: (BlobRef.of(partial).description, partial),
            segment: SegmentCodec.encode(segment), segmentJSON: WireJSON.encode(segment),
            storeFormat: DeviceStore.storeFormatVersion, fingerprint: h.schema.fingerprint)
        corpus = Self.corpus(targets)
        totalWeight = corpus.map(\.weight).reduce(0, +)
        #expect(try h.library.latestSnapshotSeq() != nil && (try h.library.currentStartImage()) != nil, "the corpus reaches a snapshot and a start image")
    }

    /// One valid request per operation of the API document, weighted: registration runs scrypt
    /// (tens of milliseconds), so it is drawn rarely; everything else about equally.
    static func corpus(_ t: FuzzTargets) -> [(weight: Int, request: RawRequest)] {
        let library = "/v1/libraries/\(t.library.lowercased)"
        let auth = ("Authorization", "Bearer \(t.deviceToken)")
        let registration = #"{"user":"\#(t.user)","password":"\#(t.password)","deviceID":"\#(UUID().lowercased)"}"#
        let half = Array(t.partialBlob.bytes[1_000..<2_000])
        return [
            (4, RawRequest(method: "GET", path: "/healthz")),
            (3, RawRequest(method: "GET", path: "/readyz")),
            (2, RawRequest(method: "GET", path: "/metrics")),
            (1, RawRequest(method: "POST", path: "/v1/devices", headers: [("Content-Type", "application/json")], body: Array(registration.utf8))),
            (6, RawRequest(method: "POST", path: "/v1/session", headers: [auth])),
            (10, RawRequest(method: "POST", path: "\(library)/ops", headers: [auth, ("Content-Type", SegmentCodec.mediaType)], body: t.segment)),
            (6, RawRequest(method: "POST", path: "\(library)/ops", headers: [auth, ("Content-Type", "application/json")], body: t.segmentJSON)),
            (12, RawRequest(method: "GET", path: "\(library)/ops", query: [("after", "0"), ("limit", "20"), ("wait", "0")], headers: [auth])),
            (4, RawRequest(method: "GET", path: "\(library)/ops", query: [("after", "45")], headers: [auth, ("Accept", "application/json")])),
            (5, RawRequest(method: "GET", path: "\(library)/snapshot", headers: [auth])),
            (8, RawRequest(method: "GET", path: "\(library)/start-image", query: [("format", String(t.storeFormat)), ("schema", t.fingerprint)],
                           headers: [auth, ("Range", "bytes=0-99")])),
            (6, RawRequest(method: "GET", path: "\(library)/entities/\(t.entity.lowercased)", headers: [auth])),
            (6, RawRequest(method: "GET", path: "\(library)/blobs/\(t.completeBlob.ref)/status", headers: [auth])),
            (10, RawRequest(method: "PUT", path: "\(library)/blobs/\(t.partialBlob.ref)", query: [("offset", "1000"), ("length", "4000")],
                            headers: [auth, ("Content-Type", BlobLimits.mediaType)], body: half)),
            (10, RawRequest(method: "GET", path: "\(library)/blobs/\(t.completeBlob.ref)", headers: [auth, ("Range", "bytes=100-199")])),
            (4, RawRequest(method: "GET", path: "\(library)/blobs/\(t.completeBlob.ref)", headers: [auth])),
        ]
    }

    /// Input `index` of run `seed`: a corpus request, mutated (one in ten goes as it is, so that
    /// the valid paths run between the hostile ones).
    func input(_ index: UInt64, seed: UInt64) -> RawRequest {
        var rng = FuzzRandom(seed: seed, index: index)
        var roll = rng.below(totalWeight)
        var request = corpus.first { roll -= $0.weight; return roll < 0 }!.request
        request.headers.insert(("Host", "127.0.0.1"), at: 0)
        if !rng.chance(10) { request = RequestMutator(targets: targets).mutate(request, &rng) }
        Self.capWait(&request)
        return request
    }

    /// Whether a 2xx may answer `request`: a route under /v1/libraries/{library}/ opens only with a
    /// token of that library's user (ada's device or access token, bob's for bob's library), sent as
    /// `Bearer <token>`, the scheme in any case and followed by spaces or tabs (RFC 9110 §11.1).
    /// A NUL after the token cuts the value short: libmicrohttpd hands it over as a C string.
    func mayBeServed(_ request: RawRequest) -> Bool {
        let parts = request.decodedPath.split(separator: "/", omittingEmptySubsequences: true)
        guard parts.count >= 4, parts[0] == "v1", parts[1] == "libraries", let library = UUID(text: String(parts[2])) else { return true }
        let values = request.header("Authorization")
        guard values.count == 1, let value = values.first.map({ String($0.prefix { $0 != "\u{0}" }) }), value.count > 7,
              value.prefix(6).lowercased() == "bearer", value.dropFirst(6).first == " " || value.dropFirst(6).first == "\t" else { return false }
        let token = String(value.dropFirst(7)).trimmingCharacters(in: CharacterSet(charactersIn: " \t"))
        if library == targets.library { return token == targets.deviceToken || token == targets.accessToken }
        if library == targets.otherLibrary { return token == targets.otherUserToken }
        return false
    }

    /// A pull may hold its answer up to 60 s by design (a long-poll); the fuzzer keeps legal
    /// waits short so that "answered within 5 s" stays a property of the server.
    static func capWait(_ request: inout RawRequest) {
        guard let items = request.query else { return }
        let waits = items.filter { RawRequest.decoded($0.0).prefix { $0 != "\u{0}" } == "wait" }
        let long = waits.contains { item in
            let value = RawRequest.decoded(item.1 ?? "")
            return [value, String(value.prefix { $0 != "\u{0}" })].contains { Int64($0).map { $0 > 200 && $0 <= 60_000 } ?? false }
        }
        if long { request.query = items.map { RawRequest.decoded($0.0).prefix { $0 != "\u{0}" } == "wait" ? ($0.0, "0") : $0 } }
    }

    /// Sends input `index` alone and prints it with its answer.
    func replay(_ index: UInt64, seed: UInt64) {
        let request = input(index, seed: seed)
        print("input \(index) of seed \(seed): \(request.printable)")
        if let known = KnownCrashesBeingFixed.requests.first(where: { $0.matches(request) }) { print("  (a known crash: \(known.name))") }
        do {
            let connection = try RawHTTPConnection(port: h.http!.port)
            connection.write(request.bytes())
            connection.finishSending()
            switch connection.readAnswer(until: .now + .seconds(5), bodyless: request.method.trimmingCharacters(in: .whitespaces) == "HEAD") {
            case .answer(let answer):
                print("  answer: \(answer.status) \(answer.headers.map { "\($0.0): \($0.1)" }.joined(separator: "; "))")
                print("  body: \(String(decoding: answer.body.prefix(400), as: UTF8.self))")
            case .closed: print("  closed without an answer")
            case .timedOut: print("  no answer and not closed within 5 s")
            case .malformed(let why): print("  malformed answer: \(why)")
            }
        } catch {
            print("  \(error)")
        }
    }
}
