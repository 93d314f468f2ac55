import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A finding: the input that broke a property, by seed and index (replay it with
/// `CHRONICLE_FUZZ_SEED=<seed> CHRONICLE_FUZZ_ONLY=<index>`), and what happened.
struct FuzzFinding: Sendable, CustomStringConvertible {
    let index: UInt64
    let what: String
    let request: String
    var description: String { "input \(index): \(what)\n    request: \(request)" }
}

/// Sends at least `count` mutated requests of run `seed` to a server on 127.0.0.1, from several threads,
/// each on its own keep-alive connection: requests whose framing both ends agree on are
/// pipelined in batches; the others go alone on a fresh connection that is half-closed after
/// them, so that the server must answer or close. Checks each answer as it arrives.
final class RequestFuzzRun: @unchecked Sendable {
    let port: UInt16
    let seed: UInt64
    let count: UInt64
    let make: @Sendable (UInt64) -> RawRequest
    /// Whether a 2xx may answer this request: false where it names a library its token does not open.
    let mayBeServed: @Sendable (RawRequest) -> Bool
    /// How long an answer may take before it is a hang.
    let answerSeconds: Int
    private let inflight: Int32

    // Guarded by `lock`.
    private let lock = NSLock()
    private var next: UInt64 = 0
    private(set) var findings: [FuzzFinding] = []
    private(set) var findingKinds: [String: Int] = [:]
    private(set) var statuses: [Int: Int] = [:]
    private(set) var heldBack: [String: Int] = [:]
    private(set) var sent = 0, pipelined = 0, alone = 0, closedUnanswered = 0

    init(port: UInt16, seed: UInt64, count: UInt64, answerSeconds: Int = 5, inflightPath: String,
         mayBeServed: @escaping @Sendable (RawRequest) -> Bool, make: @escaping @Sendable (UInt64) -> RawRequest) {
        self.port = port
        self.seed = seed
        self.count = count
        self.answerSeconds = answerSeconds
        self.make = make
        self.mayBeServed = mayBeServed
        inflight = open(inflightPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    }

    deinit { close(inflight) }

    /// Runs on `threads` threads of its own and returns once every input was sent.
    func run(threads: Int, batch: Int = 16) async {
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            let group = DispatchGroup()
            for worker in 0..<threads {
                group.enter()
                Thread { [self] in
                    while let indices = take(batch) { send(indices, worker: worker) }
                    group.leave()
                }.start()
            }
            group.notify(queue: .global()) { done.resume() }
        }
    }

    /// The next inputs, until `count` requests went out: inputs held back do not count, so the
    /// run sends as many whatever the known findings (with a cap, should nearly all be held back).
    private func take(_ batch: Int) -> [UInt64]? {
        lock.withLock {
            guard UInt64(sent) < count, next < count * 3 else { return nil }
            defer { next += UInt64(batch) }
            return Array(next..<(next + UInt64(batch)))
        }
    }

    private func send(_ indices: [UInt64], worker: Int) {
        // Where a trap kills the process, this line names the inputs that were in flight.
        let line = "worker \(worker): CHRONICLE_FUZZ_SEED=\(seed) CHRONICLE_FUZZ_ONLY=\(indices.map(String.init).joined(separator: ","))"
        let padded = Array(line.utf8.prefix(511)) + [UInt8](repeating: 0x20, count: max(0, 511 - line.utf8.count)) + [0x0A]
        _ = padded.withUnsafeBytes { pwrite(inflight, $0.baseAddress, 512, off_t(worker * 512)) }

        var framed: [(UInt64, RawRequest)] = []
        var loose: [(UInt64, RawRequest)] = []
        for index in indices {
            let request = make(index)
            if let known = (KnownCrashesBeingFixed.requests + KnownFindingsReported.requests).first(where: { $0.matches(request) }) {
                lock.withLock { heldBack[known.name, default: 0] += 1 }
                continue
            }
            if request.isWellFramed { framed.append((index, request)) } else { loose.append((index, request)) }
        }
        sendPipelined(framed)
        for item in loose { sendAlone(item) }
    }

    private func sendPipelined(_ items: [(UInt64, RawRequest)]) {
        var pending = items[...]
        // Requests left unanswered where the server closed the connection go again once, on a new one.
        for _ in 0..<2 where !pending.isEmpty {
            guard let connection = connect(pending.first!) else { return }
            connection.write(pending.flatMap { $0.1.bytes() })
            lock.withLock { sent += pending.count; pipelined += pending.count }
            while let (index, request) = pending.first {
                let read = connection.readAnswer(until: .now + .seconds(answerSeconds))
                guard case .answer(let answer) = read else {
                    if case .closed = read { break }
                    record(index, request, read)
                    return
                }
                check(index, request, answer)
                pending.removeFirst()
            }
        }
        lock.withLock { closedUnanswered += pending.count }
    }

    private func sendAlone(_ item: (UInt64, RawRequest)) {
        let (index, request) = item
        guard let connection = connect(item) else { return }
        connection.write(request.bytes())
        connection.finishSending()
        lock.withLock { sent += 1; alone += 1 }
        let read = connection.readAnswer(until: .now + .seconds(answerSeconds), bodyless: request.method.trimmingCharacters(in: .whitespaces) == "HEAD")
        switch read {
        case .answer(let answer): check(index, request, answer)
        case .closed: lock.withLock { closedUnanswered += 1 }
        default: record(index, request, read)
        }
    }

    private func connect(_ item: (UInt64, RawRequest)) -> RawHTTPConnection? {
        do {
            return try RawHTTPConnection(port: port)
        } catch {
            // The server stopped listening: it died, or no longer accepts connections.
            note(item.0, item.1, kind: "connect failed", "the server took no connection: \(error)")
            return nil
        }
    }

    /// The properties of one answer: a 2xx on a library's route only with a token that opens it;
    /// no 5xx but the documented 503 and 507, and libmicrohttpd's
    /// 505 to a request line of another HTTP version than 1.x (RFC 9110 §15.6.6: the right answer).
    private func check(_ index: UInt64, _ request: RawRequest, _ answer: RawAnswer) {
        lock.withLock { statuses[answer.status, default: 0] += 1 }
        if (200..<300).contains(answer.status), !mayBeServed(request) {
            note(index, request, kind: "served without its token", "answered \(answer.status) to a library route without a token that opens it")
        }
        guard answer.status >= 500, answer.status != 503, answer.status != 507 else { return }
        if answer.status == 505, !request.version.hasPrefix("HTTP/1.") { return }
        let body = String(decoding: answer.body.prefix(300), as: UTF8.self)
        note(index, request, kind: "\(answer.status) \(answer.errorCode ?? "-")", "answered \(answer.status): \(body)")
    }

    private func record(_ index: UInt64, _ request: RawRequest, _ read: RawHTTPConnection.Read) {
        switch read {
        case .timedOut: note(index, request, kind: "hang", "neither answered nor closed within \(answerSeconds) s")
        case .malformed(let why): note(index, request, kind: "malformed answer", "an answer that is not HTTP: \(why)")
        default: break
        }
    }

    private func note(_ index: UInt64, _ request: RawRequest, kind: String, _ what: String) {
        lock.withLock {
            findingKinds[kind, default: 0] += 1
            if findingKinds[kind]! <= 5 { findings.append(FuzzFinding(index: index, what: what, request: request.printable)) }
        }
    }
}
