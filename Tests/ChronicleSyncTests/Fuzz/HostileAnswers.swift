import ChronicleCore
import ChronicleServer
import ChronicleStore
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// An HTTP handler that lies: it passes each request to the real routes (so a device can make
/// progress between lies), then changes the answer, reproducibly from (seed, answer number):
/// its status, the headers the sync engine reads, the error code, the body.
final class HostileAnswers: HTTPHandler, @unchecked Sendable {
    static let statuses = [200, 201, 204, 206, 301, 304, 400, 401, 403, 404, 405, 409, 410, 412, 413, 415, 416, 422, 429,
                           500, 501, 502, 503, 504, 507, 599]
    /// Every code the engine or its transport treats apart from the rest.
    static let codes = [ProtocolError.Code.deviceSeqReused.rawValue, "device_seq_gap", ProtocolError.Code.cursorAhead.rawValue, "cursor_too_old", "bad_cursor",
                        "token_expired", "unauthorized", "forbidden_library", "server_busy", "library_damaged", "start_image_changed",
                        "no_start_image", "blob_not_found", "blob_incomplete", "blob_offset_mismatch", "blob_length_mismatch",
                        "blobs_not_carried", "segment_too_large", "wrong_device", "duplicate_op", "update_required", "", "\u{0}"]
    /// Every header the engine or its transport reads.
    static let headers = ["Chronicle-Next-Cursor", "Chronicle-More", "Chronicle-Head", "Chronicle-Snapshot-Seq", ProtocolError.lastDeviceSeqHeader,
                          ProtocolError.reusedDeviceSeqHeader, "Retry-After", "Content-Range", "ETag", PullPage.afterOpHeader,
                          PullPage.incarnationHeader, PullPage.stateCarriedOverHeader, "Content-Type", "Accept-Ranges"]

    let inner: any HTTPHandler
    let seed: UInt64

    // Guarded by `lock`.
    private let lock = NSLock()
    private var count: UInt64 = 0
    private var lying = true
    private var recent: [String] = []
    private(set) var heldBack: [String: Int] = [:]

    /// Holds the last answers changed, so that after a trap (which ends the process) they can be read.
    private let trail: Int32

    init(wrapping inner: any HTTPHandler, seed: UInt64, trailPath: String) {
        self.inner = inner
        self.seed = seed
        trail = open(trailPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    }

    deinit { close(trail) }

    /// Whether answers are changed (off: the honest server behind it).
    func setLying(_ on: Bool) { lock.withLock { lying = on } }
    var answers: UInt64 { lock.withLock { count } }
    /// The last answers changed, for a finding's report.
    var lastLies: [String] { lock.withLock { recent } }

    func handle(_ request: HTTPRequest, respond: @escaping @Sendable (HTTPResponse) -> Void) {
        let (index, lie) = lock.withLock { () -> (UInt64, Bool) in
            count += 1
            return (count, lying)
        }
        inner.handle(request) { [self] response in
            guard lie else { return respond(response) }
            var rng = FuzzRandom(seed: seed, index: index)
            let changed = mutate(response, &rng)
            let code = ProtocolJSON.decodeError(changed.body)?.code
            if let known = KnownCrashesBeingFixed.trapsTheDevice(status: changed.status, code: code, headers: changed.headers) {
                lock.withLock { heldBack[known, default: 0] += 1 }
                return respond(response)
            }
            if changed.status != response.status || changed.headers.count != response.headers.count || changed.body != response.body {
                let line = "answer \(index) to \(request.method) \(request.path): \(changed.status) \(code ?? "-") "
                    + changed.headers.map { "\($0.0): \($0.1)" }.joined(separator: "; ")
                    + (changed.body == response.body ? "" : " body: " + String(decoding: changed.body.prefix(300), as: UTF8.self).debugDescription)
                lock.withLock {
                    recent.append(line)
                    if recent.count > 12 { recent.removeFirst() }
                    let text = Array((recent.joined(separator: "\n") + "\n").utf8)
                    ftruncate(trail, 0)
                    _ = text.withUnsafeBytes { pwrite(trail, $0.baseAddress, $0.count, 0) }
                }
            }
            respond(changed)
        }
    }

    func mutate(_ response: HTTPResponse, _ rng: inout FuzzRandom) -> HTTPResponse {
        var response = response
        guard !rng.chance(30) else { return response }
        if let shared = response.shared {
            response.body = Array(UnsafeRawBufferPointer(shared.unsafeStorage))
            response.shared = nil
        }
        for _ in 0..<(1 + rng.below(3)) {
            switch rng.below(100) {
            case 0..<15: response.status = rng.chance(70) ? rng.pick(Self.statuses) : 200 + rng.below(400)
            case 15..<40: refuse(&response, &rng)
            case 40..<80: mutateHeader(&response, &rng)
            default: mutateBody(&response, &rng)
            }
        }
        return response
    }

    /// A refusal the engine acts on, with the numbers it reads beside it.
    private func refuse(_ response: inout HTTPResponse, _ rng: inout FuzzRandom) {
        let code = rng.pick(Self.codes)
        response.status = rng.chance(60) ? rng.pick([409, 410, 401, 403, 503, 429]) : rng.pick(Self.statuses)
        response.body = Array(#"{"error":{"code":"\#(code)","message":"Hostile."}}"#.utf8)
        response.headers = [("Content-Type", "application/json")]
        for name in [ProtocolError.lastDeviceSeqHeader, ProtocolError.reusedDeviceSeqHeader, ProtocolError.headHeader, "Retry-After"]
        where rng.chance(60) {
            response.headers.append((name, rng.chance(50) ? String(rng.below(60)) : FuzzValues.number(&rng)))
        }
        if rng.chance(20) { response.headers.append((PullPage.afterOpHeader, rng.chance(50) ? UUID().lowercased : FuzzValues.text(&rng))) }
    }

    private func mutateHeader(_ response: inout HTTPResponse, _ rng: inout FuzzRandom) {
        let name = rng.pick(Self.headers)
        let existing = response.headers.first { $0.0.lowercased() == name.lowercased() }?.1
        let value: String
        switch name {
        case "Chronicle-More": value = rng.pick(["true", "false", "TRUE", "", "1", "yes"])
        case "Content-Range":
            value = rng.chance(80) ? "bytes \(FuzzValues.number(&rng))-\(FuzzValues.number(&rng))/\(FuzzValues.number(&rng))"
                : rng.pick(["bytes */0", "bytes */\(FuzzValues.number(&rng))", "", "bytes", "bytes -/", "bytes 5-1/3"])
        case "ETag": value = rng.pick(["\"x\"", "", "*", "\"\(FuzzValues.number(&rng))\""])
        case PullPage.afterOpHeader, PullPage.incarnationHeader: value = rng.chance(50) ? UUID().lowercased : FuzzValues.text(&rng)
        case "Content-Type": value = rng.pick(["application/json", "text/html", "", "application/vnd.chronicle.segment"])
        default: value = FuzzValues.number(&rng, near: existing.flatMap { Int64($0) })
        }
        switch rng.below(10) {
        case 0: response.headers.removeAll { $0.0.lowercased() == name.lowercased() }
        case 1: response.headers.append((name, value))   // twice: a client sees both, joined with a comma
        default:
            response.headers.removeAll { $0.0.lowercased() == name.lowercased() }
            response.headers.append((name, value))
        }
    }

    private func mutateBody(_ response: inout HTTPResponse, _ rng: inout FuzzRandom) {
        var body = response.body
        switch rng.below(5) {
        case 0: body = Array(body.prefix(rng.below(body.count + 1)))
        case 1:
            for _ in 0..<(1 + rng.below(4)) where !body.isEmpty { body[rng.below(body.count)] ^= UInt8(1) << UInt8(rng.below(8)) }
        case 2: body = rng.chance(50) ? [] : rng.bytes(rng.below(256))
        default:
            // One number of a JSON answer (a push's seqs and head, a blob's length) at an edge.
            var text = String(decoding: body, as: UTF8.self)
            let numbers = text.ranges(of: /-?[0-9]+/)
            if let range = numbers.element(using: &rng) { text.replaceSubrange(range, with: FuzzValues.number(&rng, near: Int64(text[range]))) }
            body = Array(text.utf8)
        }
        response.body = body
    }
}
