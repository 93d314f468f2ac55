import ChronicleCore
import ChronicleStore
import Foundation


/// The client sync engine: pushes the outbox strictly in order, pulls the
/// confirmed log and folds it in with pending ops rebased on top.
///
/// Transient failures keep every op and retry from the same position with capped
/// exponential backoff and jitter; a terminal answer for one op drops that op,
/// fetches the server's verdict for its row, folds it in and leaves a notice, so
/// one doomed op never wedges the queue. An op leaves the outbox only when the
/// confirmed log reaches it.
///
/// ```swift
/// let engine = SyncEngine(store: store, transport: HTTPTransport(baseURL: url, library: store.libraryID, token: token))
/// let report = await engine.syncOnce()
/// Task { await engine.run() }          // keep syncing; long-polls for changes
/// engine.trigger(.foreground)          // the app came back: sync now
/// ```
public actor SyncEngine {
    /// The engine's limits and timings: batch sizes, long-poll wait, backoff, snapshots, compaction.
    public struct Configuration: Sendable {
        /// Ops per push request.
        public var pushBatchOpsMax = 500
        /// Push requests on their way at once. With 2, the next batch is sent while the one
        /// ahead of it waits for its answer, so the server starts on it as soon as it has
        /// answered, instead of a round trip and the device's turn later. The server takes a
        /// device's ops in order: a batch that arrives first waits there for the one ahead
        /// (`ServiceLimits.pushGapWaitMilliseconds`). Answers are read in order, and when a
        /// batch fails the one behind it is dropped and sent again. 1: one at a time.
        public var pushRequestsInFlightMax = 2
        /// Ops per pull page.
        public var pullPageOpsMax = 2_000
        /// Ops per pull page during a bulk catch-up (each page is one transaction: fewer, larger
        /// ones went 1.4x faster over 1,000,000 ops). The server caps pages at 10,000 by default.
        public var bulkPullPageOpsMax = 10_000
        /// When at least this many ops are waiting on the server, fold them with bulk apply
        /// (search indexes rebuilt once at the end) instead of batch by batch.
        public var bulkCatchUpOpsMin = 20_000
        /// During a bulk catch-up, pages of at least this many ops (all but the last) are kept
        /// as sealed segments rather than log blocks (`DeviceStore.prepareBatch`).
        public var sealOnArrivalOpsMin = DeviceStore.sealOnArrivalOpsMin
        /// Called after each chunk of a file (blob) the server took: the file, the bytes it holds
        /// of it, and its length (a progress bar for a large upload).
        public var blobUploadProgress: (@Sendable (BlobRef, Int64, Int64) -> Void)?
        /// How long `run()` asks the server to hold a pull open.
        public var longPollMilliseconds = 25_000
        public var backoffBaseMilliseconds = 200
        public var backoffMaxMilliseconds = 60_000
        /// Transient failures in a row (without any op getting through) that one `syncOnce`
        /// retries before reporting offline.
        public var retriesPerRoundMax = 6
        /// `run()` syncs at least this often even without triggers.
        public var scheduleSeconds = 300.0
        /// A new device (cursor 0) starts from the server's snapshot instead of replaying
        /// every op when the snapshot holds at least this many ops.
        public var snapshotStartOpsMin: Int64 = 10_000
        /// A store that has never held anything, starting from the server's snapshot, first asks
        /// for the server's start image of it (the snapshot as a device store, indexes built)
        /// and takes it whole (`DeviceStore.adoptStartImage`); where there is none, or it cannot be
        /// taken, it starts from the snapshot itself.
        public var startImages = true
        /// After a round that synced, compact the store when the policy has whole segments to
        /// seal (or history past its horizon to drop): the log stays bounded without the app
        /// scheduling it. Each step is its own transaction, so the app's writes go on between
        /// them. Nil (the default): the app compacts when it chooses (`DeviceStore.compact`).
        /// A compaction that fails (a full disk) leaves the store whole and is tried again after
        /// the next round.
        public var compaction: CompactionPolicy?
        public init() {}
    }

    /// Why the app asks for a sync now. Each one cuts a backoff wait short.
    public enum Trigger: Sendable {
        case started, foreground, networkChanged, schedule, localChange
    }

    public nonisolated let store: DeviceStore
    public nonisolated let transport: any SyncTransport
    /// The engine runs on its own serial queue rather than Swift's shared cooperative pool:
    /// its store work (folding a page of pulled ops, recording answers) is synchronous SQLite,
    /// and blocking the pool's few threads with it delays every other task in the process,
    /// an app's own and other engines' network answers included.
    nonisolated let executor: QueueExecutor
    public nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
    public nonisolated let configuration: Configuration
    nonisolated let random: @Sendable () -> Double
    nonisolated let signal = TriggerSignal()
    var lastReport: SyncReport?
    /// Ops folded in by pulls in the current round (kept outside `pullAll` so a failure mid-pull still counts them).
    var pulledInRound = 0
    var roundBootstrap: Int64?
    var roundStartedFromImage = false
    /// Set when this round went back to the server's head (`cursor_ahead`).
    var roundRewind: RewindReport?
    /// A rewind this round moved the cursor back (one that found the two agreeing up to it did not).
    var roundRewindMoved = false

    /// - Parameters:
    ///   - store: the device store it syncs.
    ///   - transport: how it reaches the server (``HTTPTransport``).
    ///   - configuration: batch sizes, long-poll wait, backoff, snapshots, compaction.
    ///   - random: uniform in [0, 1), for backoff jitter (inject a seeded one in tests).
    public init(store: DeviceStore, transport: any SyncTransport, configuration: Configuration = Configuration(),
                random: @escaping @Sendable () -> Double = SystemRandom.unit) {
        self.store = store
        self.transport = transport
        self.configuration = configuration
        self.random = random
        executor = QueueExecutor(label: "chronicle.sync-engine.\(store.deviceID.lowercased)")
    }

    /// Asks for a sync now: wakes `run()` from a backoff wait or a long-poll.
    public nonisolated func trigger(_ trigger: Trigger) { signal.fire() }

    /// The delay before retry number `attempt` (1-based): exponential, capped, with
    /// "equal jitter" (half fixed, half random) so many devices coming back at once
    /// do not retry in lockstep; never shorter than the server's Retry-After.
    nonisolated func backoffMilliseconds(attempt: Int, retryAfterSeconds: Double?) -> Int {
        let exponent = min(attempt - 1, 20)
        let capped = min(Double(configuration.backoffMaxMilliseconds), Double(configuration.backoffBaseMilliseconds) * pow(2, Double(exponent)))
        let jittered = capped / 2 + capped / 2 * random()
        // A Retry-After is at most a day once read (`HTTPTransport.retryAfterSeconds`); bounded here
        // again, since an Int made from a Double past its range traps.
        let floor = min(max(0, retryAfterSeconds ?? 0), 86_400) * 1000
        return Int(max(jittered, floor))
    }

    // MARK: - One round

    /// Pushes everything queued, then pulls until caught up. Retries transient
    /// failures (up to `retriesPerRoundMax`) and records the result in the store.
    @discardableResult
    public func syncOnce() async -> SyncReport {
        var report = SyncReport()
        var attempt = 0          // consecutive failures without progress: what backoff and the budget count
        var progress = 0
        pulledInRound = 0
        roundBootstrap = nil
        roundStartedFromImage = false
        roundRewind = nil
        roundRewindMoved = false
        var gapRemedies = 0
        while true {
            report.pulled = pulledInRound
            do {
                var head = try await pushAll(&report)
                var pulled = try await pullAll(waitMilliseconds: 0)
                // Caught up with the head, yet ops the server acknowledged are still queued: it lost them.
                let missed = try store.forgetAcknowledgementsTheLogMissed()
                if roundBootstrap != nil || roundRewind != nil || missed > 0, try !store.unacknowledgedOps(limit: 1).isEmpty {
                    // Started over from a snapshot, or went back to what the server holds, or it lost
                    // acknowledged ops: queued ops are pushed again, and the server's answers tell
                    // which of them it already holds.
                    head = max(head, try await pushAll(&report))
                    pulled = try await pullAll(waitMilliseconds: 0)
                }
                report.pulled = pulledInRound
                head = max(head, pulled.head)
                try store.recordSyncAttempt(error: nil, serverHead: head)
                report.outcome = .synced
                break
            } catch let error as SyncError {
                switch error {
                case .transient(let reason, let retryAfter):
                    try? store.recordSyncAttempt(error: reason)
                    let done = report.pushed + report.rejected + pulledInRound
                    attempt = done > progress ? 1 : attempt + 1
                    progress = done
                    // A server that asks for a longer wait than backoff ever makes (a damaged file
                    // being salvaged: 300 s) ends the round now rather than holding `syncOnce` for it;
                    // the schedule and the app's triggers try again.
                    let longWait = (retryAfter ?? 0) * 1000 > Double(configuration.backoffMaxMilliseconds)
                    if attempt > configuration.retriesPerRoundMax || longWait || Task.isCancelled {
                        report.outcome = .offline(reason: reason)
                        break
                    }
                    report.retries += 1
                    await signal.wait(milliseconds: backoffMilliseconds(attempt: attempt, retryAfterSeconds: retryAfter))
                    continue
                case .terminal(let refusal) where refusal.code == ProtocolError.Code.deviceSeqGap && gapRemedies < Self.gapRemediesMax:
                    // The server expects an earlier deviceSeq than the queue holds, from the outbox's
                    // head too: it may have lost ops (restored from a backup). Each remedy below changes
                    // the store, and the round runs again; a gap that needs more than one (go back, then
                    // close what dropped history left) is remedied step by step, a few times a round.
                    gapRemedies += 1
                    let last = refusal.lastDeviceSeq ?? -1
                    // Where this store holds an own op numbered after the server's last as confirmed,
                    // or held the one the server waits for in history it dropped past its horizon,
                    // the server lost it (it takes a device's ops in order): the store goes back to
                    // before it. Nothing on the pull may show it: the op at the cursor can match all the
                    // same, where the lost ops of others were pushed again in the same order, and a
                    // data directory copied by other means keeps its incarnation. Once a round.
                    if last >= 0, roundRewind == nil, let lostAt = try? store.seqOfOwnOpsTheServerLost(after: last),
                       let rewound = await rewind(before: lostAt) {
                        roundRewind = rewound
                        continue
                    }
                    // Or it holds ops refused after that number, not queued: they go back into the queue
                    // (the server lost their refusals, or holds them under other numbers; either way it
                    // answers them again). And where the queue then lacks numbers after the server's last,
                    // their content went with history the store dropped past its horizon (which the
                    // server lost too), or they were given up: the queue takes them, before it is sent.
                    let requeued = last >= 0 ? ((try? store.queueRefusedAgain(after: last)) ?? 0) : 0
                    if last >= 0, let lost = try? store.closeOutboxGap(after: last) {
                        report.lostWithServer += lost
                        continue
                    }
                    if requeued > 0 { continue }
                    // Otherwise a pull finds out (`cursor_ahead`, or another op at the cursor).
                    if roundRewind == nil {
                        _ = try? await pullAll(waitMilliseconds: 0)
                        if roundRewind != nil { continue }
                    }
                    let reason = "The server refused the request: \(refusal.message) [\(refusal.code)]"
                    try? store.recordSyncAttempt(error: reason)
                    report.outcome = .blocked(reason: reason)
                case .terminal(let refusal) where refusal.code == ProtocolError.Code.deviceSeqReused && roundRewind == nil:
                    // The push met numbers the server already answered while this store holds own ops
                    // numbered after the server's last as confirmed: the server lost them (seed 59 of the
                    // damage soak, 2,000 steps: its library salvaged). The store goes back before them,
                    // as for a gap, and the round runs again: they are queued with their numbers, and
                    // the queue is numbered after the server's last only then.
                    if let last = refusal.lastDeviceSeq, let lostAt = try? store.seqOfOwnOpsTheServerLost(after: last),
                       let rewound = await rewind(before: lostAt) {
                        roundRewind = rewound
                        continue
                    }
                    let reason = "The server refused the request: \(refusal.message) [\(refusal.code)]"
                    try? store.recordSyncAttempt(error: reason)
                    report.outcome = .blocked(reason: reason)
                case .terminal(let refusal):
                    let reason = "The server refused the request: \(refusal.message) [\(refusal.code)]"
                    try? store.recordSyncAttempt(error: reason)
                    report.outcome = .blocked(reason: reason)
                }
                break
            } catch let error as ChronicleError where error.code == .updateRequired {
                let reason = "Update required: \(error.message) [\(error.code.rawValue)]"
                try? store.recordSyncAttempt(error: reason)
                report.outcome = .blocked(reason: reason)
                break
            } catch let error as SQLiteError where error.isCorrupt {
                // Nothing a retry mends: the app (or `chronicle salvage`) has to salvage the store.
                let damaged = DeviceStore.damaged(store.path, error)
                let reason = "\(damaged.message) [\(damaged.code.rawValue)]"
                try? store.recordSyncAttempt(error: reason)
                report.outcome = .blocked(reason: reason)
                break
            } catch {
                let reason = "The local store failed: \(error)"
                try? store.recordSyncAttempt(error: reason)
                report.outcome = .blocked(reason: reason)
                break
            }
        }
        report.pulled = pulledInRound
        report.bootstrappedAt = roundBootstrap
        report.startedFromImage = roundStartedFromImage
        report.rewound = roundRewindMoved ? roundRewind : nil
        // Blobs go once the ops are through: a large file never holds up the outbox.
        if report.outcome == .synced { await uploadBlobs(&report) }
        if report.outcome == .synced, var policy = configuration.compaction {
            policy.wholeSegmentsOnly = true
            if let plan = try? store.compactionPlan(policy), plan.opsToSeal > 0 || plan.dropThrough != nil {
                report.sealed = (try? store.compact(policy))?.opsSealed ?? 0
            }
        }
        lastReport = report
        return report
    }

    /// Keeps syncing until the task is cancelled: a round, then a long-poll for
    /// other devices' changes (cut short by `trigger`), or after a failure a backoff
    /// wait (also cut short by `trigger`, e.g. when the network comes back).
    public func run(onRound: (@Sendable (SyncReport) -> Void)? = nil) async {
        var failures = 0
        while !Task.isCancelled {
            let report = await syncOnce()
            onRound?(report)
            switch report.outcome {
            case .synced:
                failures = 0
                // Wait for other devices' ops, or for a trigger (a local change to push).
                await raceSignal(Int(configuration.scheduleSeconds * 1000)) { [self] in
                    try await self.pullAll(waitMilliseconds: self.configuration.longPollMilliseconds).head
                }
                // Whatever ended the wait (ops arrived, a trigger, the schedule, or a failed long-poll),
                // the next round decides: it pushes, pulls, and backs off itself if the server is away.
            case .offline:
                failures += 1
                await signal.wait(milliseconds: backoffMilliseconds(attempt: failures, retryAfterSeconds: nil))
            case .blocked:
                await signal.wait(milliseconds: Int(configuration.scheduleSeconds * 1000))
            }
        }
    }

    enum RaceResult { case finished, signalled, failed }

    /// Runs `body` until it finishes, a trigger fires, or `timeoutMilliseconds` passes.
    @discardableResult
    func raceSignal(_ timeoutMilliseconds: Int, _ body: @escaping @Sendable () async throws -> Int64) async -> RaceResult {
        await withTaskGroup(of: RaceResult.self) { group in
            group.addTask {
                do { _ = try await body(); return .finished } catch { return Task.isCancelled ? .signalled : .failed }
            }
            group.addTask { [signal] in
                await signal.wait(milliseconds: timeoutMilliseconds)
                return .signalled
            }
            let first = await group.next() ?? .finished
            group.cancelAll()
            return first
        }
    }
}
