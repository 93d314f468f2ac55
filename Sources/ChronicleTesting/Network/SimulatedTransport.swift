import ChronicleCore
import ChronicleServer
import ChronicleStore
import ChronicleSync
import Foundation

/// One device's network in the simulation: calls the current server in the same
/// process, with the device's own seeded stream deciding the faults, and every
/// segment round-tripped through `SegmentCodec` as on the wire.
///
/// Faults (rates from the `FaultPlan`): requests lost before the server sees
/// them; answers lost after the server committed; pushes delivered twice; an
/// older push retransmitted before a newer one; the device crashing at a call
/// or right after the server committed its push (the simulator then kills and
/// restarts the device); the device offline. Calls only ever fail with
/// `SyncError.transient`, like a real network.
///
/// Deterministic: the engine makes one call at a time, except that it asks for
/// the next pull page while folding the current one; that prefetch is always
/// issued, so `settle()` waits for it before the simulation moves on.
public final class SimulatedTransport: SyncTransport, @unchecked Sendable {
    public let deviceName: String
    public let deviceID: UUID
    public let library: UUID
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
        /// After a page with more to come, the engine always asks for the next one.
        var awaitingPull: Int64?
        var inFlight = 0
        var calls = 0
    }

    static let historyCountMax = 16

    public init(deviceName: String, deviceID: UUID, library: UUID, token: String, server: SimulatedServer,
                plan: FaultPlan, random: SimulationRandom, log: SimulationLog) {
        self.deviceName = deviceName
        self.deviceID = deviceID
        self.library = library
        self.server = server
        self.log = log
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

    /// Calls made so far.
    public var callCount: Int { lock.withLock { state.calls } }

    /// Waits until no call is running and no prefetch the engine is bound to make is
    /// still to come. Returns false if that took implausibly long (an engine that stopped
    /// pulling after a page with more to come).
    public func settle() async -> Bool {
        for _ in 0..<20_000 {
            if lock.withLock({ state.inFlight == 0 && state.awaitingPull == nil }) { return true }
            await Task.yield()
            try? await Task.sleep(nanoseconds: 200_000)
        }
        return false
    }

    // MARK: - Fates

    private enum Fate {
        case refuse(String)
        case deliver(loseAnswer: Bool, crashAfter: Bool, duplicate: Bool)
    }

    /// Decides what happens to one call. `push` enables the push-only faults.
    private func decide(_ what: String, push: Bool, pullCursor: Int64? = nil) -> (Fate, replay: Segment?) {
        lock.withLock {
            state.calls += 1
            state.inFlight += 1
            if let pullCursor, state.awaitingPull == pullCursor { state.awaitingPull = nil }
            let plan = state.plan
            let random = state.random
            if state.crashRequested { return (.refuse("The device is down."), nil) }
            if state.offline { return (.refuse("Could not connect to the server (no network)."), nil) }
            var replay: Segment?
            if push, !state.history.isEmpty, random.chance(plan.reorderRate) {
                replay = random.pick(state.history)
            }
            if random.chance(plan.crashDuringSyncRate) {
                state.crashRequested = true
                log.fault(.deviceCrash, "\(deviceName) crashes while sending \(what)")
                return (.refuse("The device crashed."), replay)
            }
            if random.chance(plan.requestDropRate) {
                log.fault(.requestDropped, "\(deviceName) \(what): request lost")
                return (.refuse("Could not connect to the server (the request was lost)."), replay)
            }
            let crashAfter = push && random.chance(plan.crashAfterCommitRate)
            if crashAfter { state.crashRequested = true }
            let loseAnswer = !crashAfter && random.chance(plan.responseDropRate)
            let duplicate = push && random.chance(plan.duplicateRate)
            return (.deliver(loseAnswer: loseAnswer, crashAfter: crashAfter, duplicate: duplicate), replay)
        }
    }

    private func finished() { lock.withLock { state.inFlight -= 1 } }

    private var token: String { lock.withLock { state.token } }

    private static func describe(_ segment: Segment) -> String {
        guard let first = segment.ops.first?.deviceSeq, let last = segment.ops.last?.deviceSeq else { return "push (empty)" }
        return first == last ? "push #\(first)" : "push #\(first)…\(last)"
    }

    // MARK: - SyncTransport

    public func push(_ segment: Segment) async throws(SyncError) -> PushResponse {
        let what = Self.describe(segment)
        let (fate, replay) = decide(what, push: true)
        defer { finished() }
        if let replay {
            log.fault(.reordered, "\(deviceName) \(Self.describe(replay)) delivered again before \(what)")
            _ = try? await deliver(replay)
        }
        switch fate {
        case .refuse(let reason):
            throw .transient(reason: reason, retryAfterSeconds: nil)
        case .deliver(let loseAnswer, let crashAfter, let duplicate):
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
                throw .transient(reason: "The device crashed.", retryAfterSeconds: nil)
            }
            if loseAnswer {
                log.fault(.responseDropped, "\(deviceName) \(what) committed (head \(first.head)); the answer is lost")
                throw .transient(reason: "The request timed out (the response was lost).", retryAfterSeconds: nil)
            }
            return response
        }
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
        log.answered(response.results.map {
            SimulationLog.Answer(device: deviceID, deviceName: deviceName, opID: $0.opID, deviceSeq: $0.deviceSeq, outcome: $0.outcome)
        })
        return response
    }

    public func pull(after cursor: Int64, limit: Int, waitMilliseconds: Int) async throws(SyncError) -> PullPage {
        let (fate, _) = decide("pull after \(cursor)", push: false, pullCursor: cursor)
        defer { finished() }
        guard case .deliver(let loseAnswer, _, _) = fate else {
            if case .refuse(let reason) = fate { throw .transient(reason: reason, retryAfterSeconds: nil) }
            preconditionFailure("unreachable")
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
            throw .transient(reason: "The request timed out (the response was lost).", retryAfterSeconds: nil)
        }
        page.segment = try Self.roundTrip(page.segment)
        if page.more, page.segment.ops.first?.serverSeq == cursor + 1 {
            lock.withLock { state.awaitingPull = page.nextCursor }
        }
        return page
    }

    public func verdict(for entity: UUID) async throws(SyncError) -> Verdict {
        let (fate, _) = decide("verdict for \(entity.lowercased)", push: false)
        defer { finished() }
        guard case .deliver(let loseAnswer, _, _) = fate else {
            if case .refuse(let reason) = fate { throw .transient(reason: reason, retryAfterSeconds: nil) }
            preconditionFailure("unreachable")
        }
        let verdict: Verdict
        do {
            verdict = try await server.service.verdict(library: library, entity: entity, token: token)
        } catch {
            throw SyncError.from(error)
        }
        if loseAnswer {
            log.fault(.responseDropped, "\(deviceName) verdict: the answer is lost")
            throw .transient(reason: "The request timed out (the response was lost).", retryAfterSeconds: nil)
        }
        return verdict
    }

    /// Encodes and decodes a segment as the wire would.
    static func roundTrip(_ segment: Segment) throws(SyncError) -> Segment {
        do {
            return try SegmentCodec.decode(SegmentCodec.encode(segment))
        } catch {
            throw .terminal(ProtocolError(400, error.code.rawValue, error.message))
        }
    }
}
