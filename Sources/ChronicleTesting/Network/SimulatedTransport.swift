import ChronicleCore
import ChronicleServer
import ChronicleStore
import ChronicleSync
import Foundation

/// One device's network in the simulation: calls the current server in the same
/// process, with the device's own seeded stream deciding the faults, and every
/// segment and snapshot round-tripped through its codec as on the wire.
///
/// Faults (rates from the `FaultPlan`): requests lost before the server sees
/// them; answers lost after the server committed; pushes delivered twice; an
/// older push retransmitted before a newer one; the device crashing at a call
/// or right after the server committed its push (the simulator then kills and
/// restarts the device); the device offline. Calls only ever fail with
/// `SyncError.transient`, like a real network.
///
/// Deterministic: the engine makes one call at a time, except that it asks for
/// the next pull page while folding the current one. When that fold fails the
/// prefetch is left behind and may reach the transport at any moment, so the
/// fate of a page's follow-up pull is decided (and traced) when the page is
/// handed out, not when the follow-up arrives; a follow-up that arrives after
/// its round is over is refused without a trace. `settle()` waits for stragglers.
public final class SimulatedTransport: SyncTransport, @unchecked Sendable {
    public let deviceName: String
    public let deviceID: UUID
    public let library: UUID
    /// The engine's `snapshotStartOpsMin`: a first page that makes it start from a snapshot has no follow-up.
    let snapshotStartOpsMin: Int64
    private let server: SimulatedServer
    private let log: SimulationLog
    private let lock = NSLock()
    private var state: State

    struct State {
        var plan: FaultPlan
        var random: SimulationRandom
        var token: String
        var offline = false
        var crashRequested = false
        /// Pushes sent, newest last: what a reordering network may deliver again later.
        var history: [Segment] = []
        /// The fate of the pull that follows the last page handed out.
        var followUp: FollowUp?
        /// Follow-ups the last round ended without, by cursor: refused, untraced, if they come
        /// during the next round (a straggler starts within microseconds; this only guards it).
        var strays: [Int64: Int] = [:]
        var inFlight = 0
    }

    struct FollowUp {
        var cursor: Int64
        var fate: Fate
        var used = false
    }

    enum Fate {
        case refuse(String)
        case deliver(loseAnswer: Bool)
        /// A follow-up pull that outlived its round.
        case stray
    }

    static let historyCountMax = 16

    public init(deviceName: String, deviceID: UUID, library: UUID, token: String, server: SimulatedServer,
                plan: FaultPlan, random: SimulationRandom, log: SimulationLog, snapshotStartOpsMin: Int64) {
        self.deviceName = deviceName
        self.deviceID = deviceID
        self.library = library
        self.server = server
        self.log = log
        self.snapshotStartOpsMin = snapshotStartOpsMin
        state = State(plan: plan, random: random, token: token)
    }

    // MARK: - Controls

    /// While offline every call fails before reaching the server.
    public func setOffline(_ offline: Bool) { lock.withLock { state.offline = offline } }
    public var isOffline: Bool { lock.withLock { state.offline } }

    public func setPlan(_ plan: FaultPlan) { lock.withLock { state.plan = plan } }

    /// True once if a fault decided the device crashed during the last round.
    public func takeCrashRequest() -> Bool {
        lock.withLock {
            defer { state.crashRequested = false }
            return state.crashRequested
        }
    }

    /// Waits after a round until no call is running and the last page's follow-up either came
    /// or is given up on (the engine did not ask for it: its store failed first). A follow-up
    /// given up on is refused, untraced, if it turns up later. Returns false if a call never ended.
    public func settle() async -> Bool {
        var waited = 0
        var strays: [Int64: Int] = [:]
        while true {
            let (busy, pending) = lock.withLock { (state.inFlight > 0, state.followUp.map { !$0.used } ?? false) }
            if !busy && !pending { break }
            if !busy && waited >= 400 {
                lock.withLock {
                    if let followUp = state.followUp, !followUp.used { strays[followUp.cursor, default: 0] += 1 }
                    state.followUp = nil
                }
                break
            }
            if waited >= 50_000 { return false }
            waited += 1
            await Task.yield()
            try? await Task.sleep(nanoseconds: 250_000)
        }
        lock.withLock {
            state.followUp = nil
            state.strays = strays
        }
        return true
    }

    // MARK: - Fates

    /// Decides one call's fate from the device's stream. `push` enables the push-only faults.
    /// Runs under the lock.
    private func decide(_ what: String, push: Bool) -> (fate: Fate, crashAfter: Bool, duplicate: Bool, replay: Segment?) {
        let plan = state.plan
        let random = state.random
        if state.crashRequested { return (.refuse("The device is down."), false, false, nil) }
        if state.offline { return (.refuse("Could not connect to the server (no network)."), false, false, nil) }
        var replay: Segment?
        if push, !state.history.isEmpty, random.chance(plan.reorderRate) {
            replay = random.pick(state.history)
        }
        if random.chance(plan.crashDuringSyncRate) {
            state.crashRequested = true
            log.fault(.deviceCrash, "\(deviceName) crashes while sending \(what)")
            return (.refuse("The device crashed."), false, false, replay)
        }
        if random.chance(plan.requestDropRate) {
            log.fault(.requestDropped, "\(deviceName) \(what): request lost")
            return (.refuse("Could not connect to the server (the request was lost)."), false, false, replay)
        }
        let crashAfter = push && random.chance(plan.crashAfterCommitRate)
        if crashAfter { state.crashRequested = true }
        let loseAnswer = !crashAfter && random.chance(plan.responseDropRate)
        let duplicate = push && random.chance(plan.duplicateRate)
        return (.deliver(loseAnswer: loseAnswer), crashAfter, duplicate, replay)
    }

    private func begin<T>(_ body: () -> T) -> T {
        lock.withLock {
            state.inFlight += 1
            return body()
        }
    }

    private func finished() { lock.withLock { state.inFlight -= 1 } }

    /// The device's bearer token; `setToken` when it signs in again.
    public var token: String { lock.withLock { state.token } }
    public func setToken(_ token: String) { lock.withLock { state.token = token } }

    private static func describe(_ segment: Segment) -> String {
        guard let first = segment.ops.first?.deviceSeq, let last = segment.ops.last?.deviceSeq else { return "push (empty)" }
        return first == last ? "push #\(first)" : "push #\(first)…\(last)"
    }

    private static let wireDevice = ProcessInfo.processInfo.environment["CHRONICLE_SIM_WIRE"]

    private static func refused(_ reason: String) -> SyncError { .transient(reason: reason, retryAfterSeconds: nil) }

    private static let lostAnswer = SyncError.transient(reason: "The request timed out (the response was lost).", retryAfterSeconds: nil)

    // MARK: - Push

    public func push(_ segment: Segment) async throws(SyncError) -> PushResponse {
        let what = Self.describe(segment)
        let (fate, crashAfter, duplicate, replay) = begin { decide(what, push: true) }
        defer { finished() }
        if let replay {
            log.fault(.reordered, "\(deviceName) \(Self.describe(replay)) delivered again before \(what)")
            _ = try? await deliver(replay)
        }
        guard case .deliver(let loseAnswer) = fate else {
            if case .refuse(let reason) = fate { throw Self.refused(reason) }
            throw Self.refused("The device is down.")
        }
        let first = try await deliver(segment)
        lock.withLock {
            state.history.append(segment)
            if state.history.count > Self.historyCountMax { state.history.removeFirst() }
        }
        var response = first
        if duplicate {
            log.fault(.duplicated, "\(deviceName) \(what) delivered twice")
            if let second = try? await deliver(segment), lock.withLock({ state.random.chance(0.5) }) { response = second }
        }
        if crashAfter {
            log.fault(.crashAfterCommit, "\(deviceName) \(what) committed (head \(first.head)); the device dies before reading the answer")
            throw Self.refused("The device crashed.")
        }
        if loseAnswer {
            log.fault(.responseDropped, "\(deviceName) \(what) committed (head \(first.head)); the answer is lost")
            throw Self.lostAnswer
        }
        return response
    }

    /// One delivery of a push to the current server, through the codec; the server's
    /// answers are logged whatever happens to them on the way back.
    private func deliver(_ segment: Segment) async throws(SyncError) -> PushResponse {
        let wire = try Self.roundTrip(segment)
        let response: PushResponse
        do {
            response = try await server.service.push(wire, token: token)
        } catch {
            throw SyncError.from(error)
        }
        // `CHRONICLE_SIM_WIRE=<device name>`: every push of that device the server answered, op by
        // op with the answers, on standard error (what a trace leaves out: replays, renumbering).
        if Self.wireDevice == deviceName {
            var line = "wire \(deviceName) push:"
            for op in segment.ops { line += " #\(op.deviceSeq)=\(op.opID.lowercased.prefix(8))" }
            line += " || answers:"
            for r in response.results { line += " #\(r.deviceSeq)=\(r.opID.lowercased.prefix(8)):\(r.outcome)" }
            FileHandle.standardError.write(Data((line + "\n").utf8))
        }
        log.answered(response.results.map {
            SimulationLog.Answer(device: deviceID, deviceName: deviceName, opID: $0.opID, deviceSeq: $0.deviceSeq, outcome: $0.outcome)
        })
        return response
    }

    // MARK: - Pull

    public func pull(after cursor: Int64, limit: Int, waitMilliseconds: Int) async throws(SyncError) -> PullPage {
        let fate: Fate = begin {
            if var followUp = state.followUp, followUp.cursor == cursor, !followUp.used {
                followUp.used = true
                state.followUp = followUp
                return followUp.fate
            }
            if let strays = state.strays[cursor], strays > 0 {
                state.strays[cursor] = strays - 1
                return .stray
            }
            return decide("pull after \(cursor)", push: false).fate
        }
        defer { finished() }
        let loseAnswer: Bool
        switch fate {
        case .refuse(let reason): throw Self.refused(reason)
        case .stray: throw Self.refused("The round this request belonged to is over.")
        case .deliver(let lose): loseAnswer = lose
        }
        var page: PullPage
        do {
            // The simulation never waits in real time: a long-poll is answered at once.
            page = try await server.service.pull(library: library, after: cursor, limit: limit, waitMilliseconds: 0, token: token)
        } catch {
            throw SyncError.from(error)
        }
        if loseAnswer {
            log.fault(.responseDropped, "\(deviceName) pull after \(cursor): the answer is lost")
            throw Self.lostAnswer
        }
        page.segment = try Self.roundTrip(page.segment)
        let startsFromSnapshot = cursor == 0 && (page.snapshotSeq ?? 0) >= snapshotStartOpsMin && page.snapshotSeq != nil
        if page.more, page.segment.ops.first?.serverSeq == cursor + 1, !startsFromSnapshot {
            // The engine asks for the next page before folding this one: decide its fate now.
            lock.withLock {
                let next = page.nextCursor
                var decided = decide("pull after \(next)", push: false).fate
                if case .deliver(true) = decided {
                    // Traced now; the follow-up, whenever it comes, loses its answer.
                    log.fault(.responseDropped, "\(deviceName) pull after \(next): the answer will be lost")
                    decided = .refuse("The request timed out (the response was lost).")
                }
                state.followUp = FollowUp(cursor: next, fate: decided)
            }
        }
        return page
    }

    // MARK: - Verdicts and snapshots

    public func verdict(for entity: UUID) async throws(SyncError) -> Verdict {
        try await call("verdict for \(entity.lowercased.prefix(8))") { () async throws(ProtocolError) in
            try await server.service.verdict(library: library, entity: entity, token: token)
        }
    }

    public func snapshot() async throws(SyncError) -> SnapshotFrame {
        let frame = try await call("snapshot") { () async throws(ProtocolError) in
            try await server.service.snapshot(library: library, token: token)
        }
        log.snapshotFetched("\(deviceName) fetches the server's snapshot")
        return SnapshotFrame(bytes: frame)
    }

    /// The server's start image through the device's faults, decompressed into `target` as
    /// `InMemoryTransport` does. Asked only of a server that has one, so runs whose server builds
    /// none draw from the device's stream as they always did.
    public func startImage(storeFormat: Int64, schemaFingerprint: String, to target: String) async throws(SyncError) -> Bool {
        guard (try? server.service.library(library).currentStartImage()) != nil else { return false }
        let frame = try await call("start image") { () async throws(ProtocolError) in
            try await server.service.startImage(library: library, storeFormat: storeFormat, schemaFingerprint: schemaFingerprint, token: token)
        }
        guard let frame else { return false }
        do {
            try LZ4FrameFileDecompressor.decompress(frame, to: target)
        } catch {
            throw .transient(reason: "The server's start image could not be read: \(error)", retryAfterSeconds: nil)
        }
        log.record("\(deviceName) fetches the server's start image")
        return true
    }

    // MARK: - Files

    /// A call other than a push or a pull under the device's faults: refused before the server,
    /// or answered and the answer lost. Each is safe to repeat (the blob calls by offset).
    private func call<T>(_ what: String, _ call: () async throws(ProtocolError) -> T) async throws(SyncError) -> T {
        let fate = begin { decide(what, push: false).fate }
        defer { finished() }
        guard case .deliver(let loseAnswer) = fate else {
            if case .refuse(let reason) = fate { throw Self.refused(reason) }
            throw Self.refused("The device is down.")
        }
        let answer: T
        do {
            answer = try await call()
        } catch {
            throw SyncError.from(error)
        }
        if loseAnswer {
            log.fault(.responseDropped, "\(deviceName) \(what): the answer is lost")
            throw Self.lostAnswer
        }
        return answer
    }

    public func blobStatus(_ blob: BlobRef) async throws(SyncError) -> BlobStatus {
        try await call("status of \(blob.hex.prefix(8))") { () async throws(ProtocolError) in
            try await server.service.blobStatus(library: library, blob: blob, token: token)
        }
    }

    public func putBlob(_ blob: BlobRef, length: Int64, offset: Int64, bytes: [UInt8]) async throws(SyncError) -> BlobStatus {
        try await call("put \(blob.hex.prefix(8)) at \(offset)") { () async throws(ProtocolError) in
            try await server.service.putBlob(library: library, blob: blob, length: length, offset: offset, bytes: bytes, token: token)
        }
    }

    public func blobRange(_ blob: BlobRef, offset: Int64, count: Int) async throws(SyncError) -> BlobRange {
        try await call("range of \(blob.hex.prefix(8)) at \(offset)") { () async throws(ProtocolError) in
            try await server.service.blobRange(library: library, blob: blob, offset: offset, count: count, token: token)
        }
    }

    /// Encodes and decodes a segment as the wire would.
    static func roundTrip(_ segment: Segment) throws(SyncError) -> Segment {
        do {
            return try SegmentCodec.decode(SegmentCodec.encode(segment))
        } catch {
            throw .terminal(ProtocolError(400, ProtocolError.Code(error.code), error.message))
        }
    }
}
