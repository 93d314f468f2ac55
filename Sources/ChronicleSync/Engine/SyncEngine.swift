import ChronicleCore
import ChronicleStore
import Foundation

/// What one sync round did.
public struct SyncReport: Sendable, Equatable {
    /// How the round ended: synced, offline, or blocked.
    public enum Outcome: Sendable, Equatable {
        /// Everything queued was answered and the log is caught up with the server.
        case synced
        /// The server could not be reached (or kept failing); queued ops are kept and will be retried.
        case offline(reason: String)
        /// The server refused the request itself (signed out, wrong library…); a person must act.
        case blocked(reason: String)
    }

    public var outcome: Outcome = .synced
    /// Ops the server accepted (or already had) in this round.
    public var pushed = 0
    /// Ops the server refused for good in this round (each left a notice).
    public var rejected = 0
    /// Confirmed ops folded into the store.
    public var pulled = 0
    /// Transport failures retried along the way.
    public var retries = 0
    /// Set when the store started over from the server's snapshot at this seq.
    public var bootstrappedAt: Int64?
    /// Whether that start took the server's start image (`DeviceStore.adoptStartImage`) rather
    /// than building the store from the snapshot.
    public var startedFromImage = false
    /// Ops sealed into segments after the round (`Configuration.compaction`).
    public var sealed: Int64 = 0
    /// Queued ops numbered again after the server's deviceSeq for this device, because the
    /// store is an older copy of one that went on syncing (`DeviceStore.renumberOutbox`).
    public var renumbered = 0
    /// This device's ops the server lost (its data restored from a backup) whose content this
    /// store had already dropped past its retention horizon: they cannot be sent again, and the
    /// queue took their numbers (`DeviceStore.closeOutboxGap`). Gone with the server's data.
    public var lostWithServer = 0
    /// Set when the server's log ended before this store's cursor (it lost ops: its data was
    /// restored from a backup) and the store went back to what the server holds, queueing its
    /// own lost ops again (`DeviceStore.rewind(toAgreedSeq:)`).
    public var rewound: RewindReport?
    /// Blobs added here that the server came to hold in this round (`DeviceStore.addBlob`).
    public var blobsUploaded = 0
    /// Bytes of blobs sent in this round.
    public var blobBytesSent: Int64 = 0
    /// Blobs the server refused for good in this round (`BlobInfo.refusal` says why).
    public var blobsRefused = 0
    /// Why the blob uploads stopped before the queue was empty (tried again next round); nil when
    /// they did not, or the round did not reach them (ops go first).
    public var blobError: String?
}

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
    private nonisolated let executor: QueueExecutor
    public nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
    public nonisolated let configuration: Configuration
    private nonisolated let random: @Sendable () -> Double
    private nonisolated let signal = TriggerSignal()
    private var lastReport: SyncReport?
    /// Ops folded in by pulls in the current round (kept outside `pullAll` so a failure mid-pull still counts them).
    private var pulledInRound = 0
    private var roundBootstrap: Int64?
    private var roundStartedFromImage = false
    /// Set when this round went back to the server's head (`cursor_ahead`).
    private var roundRewind: RewindReport?
    /// A rewind this round moved the cursor back (one that found the two agreeing up to it did not).
    private var roundRewindMoved = false

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
    private func raceSignal(_ timeoutMilliseconds: Int, _ body: @escaping @Sendable () async throws -> Int64) async -> RaceResult {
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

    // MARK: - Push

    /// Pushes unanswered outbox ops in deviceSeq order until none are left.
    /// Returns the server's head as last reported.
    ///
    /// The device's side runs beside the server's: while a batch waits for its answer, the
    /// next one is read from the outbox, encoded and (with `pushRequestsInFlightMax` 2) sent,
    /// and a batch's acknowledgement is committed while the next is on its way. Answers are
    /// read in order. When a batch fails, whatever was sent behind it is dropped: pushes are
    /// idempotent, so sending those ops again costs only a repeat, answered with the original
    /// results. An acknowledgement lost to a crash costs the same.
    private func pushAll(_ report: inout SyncReport) async throws -> Int64 {
        var acknowledging: Task<Void, Error>?
        do {
            let head = try await pushBatches(&report, acknowledging: &acknowledging)
            try await acknowledging?.value
            return head
        } catch {
            _ = try? await acknowledging?.value
            throw error
        }
    }

    /// A batch read from the outbox and encoded; `answer` is set once it is sent.
    private struct OutgoingBatch: Sendable {
        let ops: [Op]
        let segment: Segment
        var answer: Task<PushResponse, any Error>?
    }

    private static func send(_ segment: Segment, _ transport: any SyncTransport) -> Task<PushResponse, any Error> {
        Task.detached { try await transport.push(segment) }
    }

    private static func answer(of push: Task<PushResponse, any Error>) async throws(SyncError) -> PushResponse {
        do {
            return try await withTaskCancellationHandler { try await push.value } onCancel: { push.cancel() }
        } catch let error as SyncError {
            throw error
        } catch {
            throw SyncError.transient(reason: "\(error)", retryAfterSeconds: nil)
        }
    }

    /// Drops a batch read (and perhaps sent) ahead of one that failed: its request is cancelled.
    private static func abandon(_ upcoming: Task<OutgoingBatch?, any Error>?) {
        guard let upcoming else { return }
        upcoming.cancel()
        Task.detached { (try? await upcoming.value)??.answer?.cancel() }
    }

    /// Renumberings of the queue one push round may do: two live copies of one store can
    /// overtake each other a few times; past that the round ends as the server refused it.
    static let renumberingsMax = 4

    /// Remedies for `device_seq_gap` one round may apply (`syncOnce`): going back to where the
    /// store and the server agree (once a round), then queueing refused ops again and closing the
    /// queue over numbers no op holds (one step); each changes the store before the next push.
    static let gapRemediesMax = 3

    private func pushBatches(_ report: inout SyncReport, acknowledging: inout Task<Void, Error>?) async throws -> Int64 {
        var head: Int64 = 0
        var batch = configuration.pushBatchOpsMax
        var resetOnce = false
        var renumberings = 0
        let store = self.store
        let transport = self.transport
        let sendsAhead = configuration.pushRequestsInFlightMax > 1
        /// The batch after the one awaited: read, encoded and, with `sendsAhead`, sent. Nil
        /// inside when the outbox had nothing after.
        var upcoming: Task<OutgoingBatch?, any Error>?
        defer { Self.abandon(upcoming) }
        while true {
            var outgoing: OutgoingBatch
            if let pending = upcoming {
                upcoming = nil
                guard let next = try await pending.value else { return head }
                outgoing = next
            } else {
                let ops = try store.unacknowledgedOps(limit: batch)
                guard !ops.isEmpty else { return head }
                outgoing = OutgoingBatch(ops: ops, segment: try Segment(libraryID: store.libraryID, ops: ops))
            }
            let sentAhead = outgoing.answer != nil
            let answer = outgoing.answer ?? Self.send(outgoing.segment, transport)
            let ops = outgoing.ops
            let first = ops.first!, last = ops.last!
            let limit = batch
            upcoming = Task.detached {
                let ops = try store.unacknowledgedOps(after: last.deviceSeq, limit: limit)
                guard !ops.isEmpty else { return nil }
                let segment = try Segment(libraryID: store.libraryID, ops: ops)
                return OutgoingBatch(ops: ops, segment: segment, answer: sendsAhead ? Self.send(segment, transport) : nil)
            }
            let response: PushResponse
            do throws(SyncError) {
                response = try await Self.answer(of: answer)
            } catch {
                // What was read and sent behind this batch assumed it went through.
                Self.abandon(upcoming)
                upcoming = nil
                switch error {
                case .terminal(let refusal) where refusal.status == 413 && batch > 1:
                    batch = max(1, batch / 2)   // too big for the server's caps: smaller batches
                    continue
                case .terminal(let refusal) where refusal.code == ProtocolError.Code.deviceSeqGap && sentAhead:
                    // Sent behind a batch that was answered, it outwaited the server's patience
                    // for that one: send it again, as the next batch.
                    try await acknowledging?.value
                    acknowledging = nil
                    continue
                case .terminal(let refusal) where refusal.code == ProtocolError.Code.deviceSeqReused && renumberings < Self.renumberingsMax:
                    // This store is an older copy of one that went on syncing: the server already
                    // holds ops under the numbers its queue uses. Number them after the server's and
                    // push again; the other copy's ops come back with the pull.
                    guard let reused = refusal.reusedDeviceSeq, let serverLast = refusal.lastDeviceSeq, serverLast >= reused else {
                        try? store.recordPushFailure(deviceSeqs: first.deviceSeq...last.deviceSeq, error: error.description)
                        throw error
                    }
                    // Not so where this store holds own ops numbered after the server's last as
                    // confirmed: the server lost them (restored from a backup, or salvaged), and
                    // numbering the queue after its last would give their numbers to other ops. The
                    // round goes back before them first (below, in `syncOnce`).
                    if (try? store.seqOfOwnOpsTheServerLost(after: serverLast)) != nil { throw error }
                    renumberings += 1
                    try await acknowledging?.value
                    acknowledging = nil
                    report.renumbered += try store.renumberOutbox(from: reused, after: serverLast)
                    continue
                case .terminal(let refusal) where refusal.code == ProtocolError.Code.deviceSeqGap && !resetOnce:
                    resetOnce = true            // our acknowledgements ran ahead of the server: push from the outbox head
                    try await acknowledging?.value
                    acknowledging = nil
                    try store.resetAcknowledged()
                    continue
                default:
                    try? store.recordPushFailure(deviceSeqs: first.deviceSeq...last.deviceSeq, error: error.description)
                    throw error
                }
            }
            guard response.results.count == ops.count,
                  zip(response.results, ops).allSatisfy({ $0.opID == $1.opID && $0.deviceSeq == $1.deviceSeq }) else {
                throw SyncError.transient(reason: "The server's push answer does not match the ops sent.", retryAfterSeconds: nil)
            }
            let historyBase = try store.historyBaseSeq()
            for (result, op) in zip(response.results, ops) {
                if case .duplicate(let seq) = result.outcome, seq <= historyBase {
                    // Ordered long ago, inside the snapshot this store started from: it will not come back in a pull.
                    try store.confirmInSnapshot(op.opID, serverSeq: seq)
                }
                guard case .rejected(let code, let message) = result.outcome else { report.pushed += 1; continue }
                var verdict = result.verdict
                if verdict == nil { verdict = try? await transport.verdict(for: op.entityID) }
                try store.reject(op.opID, code: code, message: message, verdict: verdict.map { String(decoding: ProtocolJSON.encode($0), as: UTF8.self) })
                report.rejected += 1
            }
            // One acknowledgement commits at a time, in order (it never moves backwards anyway).
            try await acknowledging?.value
            let through = last.deviceSeq
            acknowledging = Task.detached { try store.recordAcknowledged(through: through) }
            head = max(head, response.head)
        }
    }

    // MARK: - Pull

    /// Pulls pages until caught up (or, with a wait, until the first page arrives and
    /// everything after it is in). Fetches the next page while folding the current one.
    private func pullAll(waitMilliseconds: Int) async throws -> (head: Int64, count: Int) {
        do {
            // A search for where this store and the server agree that an earlier round could not
            // finish (the network went away in the middle of it) is taken up again before pulling:
            // nothing else may show the disagreement again.
            if roundRewind == nil, let noted = try store.noticedDisagreement() {
                let agreed = try await lastAgreedSeq(before: min(noted, try store.cursor() + 1))
                roundRewind = try rewindStore(toAgreedSeq: agreed)
            }
            // An app update carried the state over from a snapshot of the schema's earlier version
            // (the history before it was gone): what only the log could give is missing from it, so
            // the store starts over from the server's (its own ops queued again; a 410 then starts it
            // from the server's snapshot).
            if roundRewind == nil, try store.stateCarriedOver() {
                roundRewind = try rewindStore(toAgreedSeq: 0)
            }
            return try await pullPages(waitMilliseconds: waitMilliseconds, mayStartFromSnapshot: true)
        } catch StartFromSnapshot.requested {
            // Where the snapshot is of another version of the schema, the log is pulled instead (below).
            try await startFromSnapshot(optional: true)
        } catch SyncError.terminal(let refusal) where refusal.status == 410 {
            // Away longer than the server keeps ops: start over from its snapshot, keeping the outbox.
            // If the server holds another op at this store's cursor, it lost history this store has
            // (restored from a backup) and pulls there are refused, so where the two last agreed cannot
            // be looked for: every op of this device in that history is queued again first (the
            // server answers the ones it holds as duplicates), so that none is lost with it.
            if roundRewind == nil, let theirs = refusal.afterOpID, try store.holdsConfirmed(theirs, at: try store.cursor()) == false {
                roundRewind = try rewindStore(toAgreedSeq: 0)
            }
            try await startFromSnapshot(optional: false)
        } catch SyncError.terminal(let refusal) where refusal.code == ProtocolError.Code.cursorAhead && roundRewind == nil {
            // The server's log ends before this store's cursor: it lost ops (its data restored from
            // a backup). Go back to where the two agree, with this device's lost ops queued again,
            // and pull from there (once a round: a server still behind after that is refused as it answers).
            guard let head = refusal.serverHead else { throw SyncError.terminal(refusal) }
            let disagreed = min(try store.cursor(), head + 1)
            try store.noteDisagreement(at: disagreed)
            let agreed = try await lastAgreedSeq(before: disagreed)
            roundRewind = try rewindStore(toAgreedSeq: agreed)
            return try await pullAll(waitMilliseconds: 0)
        } catch is StartOverFromServer {
            roundRewind = try rewindStore(toAgreedSeq: 0)
            return try await pullAll(waitMilliseconds: 0)
        } catch let diverged as Diverged {
            // The server holds another op at this store's cursor (the same, with the server's head
            // past it), or it is another incarnation of the library's file (restored from a backup).
            guard roundRewind == nil else { throw try divergedAgain(diverged) }
            try store.noteDisagreement(at: diverged.cursor)
            let agreed = try await lastAgreedSeq(before: diverged.cursor)
            roundRewind = try rewindStore(toAgreedSeq: agreed)
            return try await pullAll(waitMilliseconds: 0)
        }
        do {
            return try await pullPages(waitMilliseconds: 0, mayStartFromSnapshot: false)
        } catch let diverged as Diverged {
            // Right after a start from a snapshot: the next round looks where the two agree.
            throw try divergedAgain(diverged)
        }
    }

    /// The server and this store disagree again after this round went back (or started over)
    /// once: the round stops, and the next one looks again (the disagreement is noted).
    private func divergedAgain(_ diverged: Diverged) throws -> SyncError {
        try store.noteDisagreement(at: diverged.cursor)
        return .terminal(ProtocolError(409, .cursorDiverged, """
            The server holds other ops from seq \(diverged.cursor) on than this store, after it went back or started over \
            once this round; the next round looks again.
            """))
    }

    enum StartFromSnapshot: Error { case requested }

    /// The server's state is not one this store's state came from (`PullPage.stateCarriedOverAt`).
    struct StartOverFromServer: Error {}

    /// The first page's `afterOpID` is not the op this store holds at its cursor, or a page holds
    /// an op this store holds at another seq: the two disagree from `cursor` on at the latest.
    /// (Also thrown with the seq after the cursor where the page names another incarnation of the
    /// library's file: where the two disagree, if anywhere, is not known.)
    struct Diverged: Error { var cursor: Int64 }

    /// After a page failed to apply: an op in it that this store already holds at another seq
    /// means the server's history is no longer this store's (it lost ops, restored from a backup,
    /// and one came back at another seq), even where the ops at the cursor matched. Asked only
    /// when applying failed, so the pull path pays nothing for it.
    private func divergence(among ops: [Op]) -> Diverged? {
        var earliest: Int64?
        for op in ops {
            if let held = try? store.confirmedSeq(of: op.opID), held != op.serverSeq { earliest = min(earliest ?? held, held) }
        }
        return earliest.map { Diverged(cursor: $0) }
    }

    /// The last seq below `disagreed` (where the server and this store hold different ops, or the
    /// server none) up to which both hold the same ops, every one: the server's ops from this
    /// store's history base on are read page by page and compared with the store's, id by id.
    /// (Comparing single ops, as a binary search would, is not enough: after a restore, ops that
    /// devices push again can land at the seqs they had before while others before them did not.)
    /// A restored server is rare, and this reads at most what a catch-up of that history would.
    private func lastAgreedSeq(before disagreed: Int64) async throws -> Int64 {
        // Nothing before the store's history base to compare (a snapshot it started from): taken
        // as agreed, unless the disagreement is already there (then the store starts over from nothing).
        let base = try store.historyBaseSeq()
        guard disagreed > base else { return max(0, disagreed - 1) }
        var cursor = base
        // The op at the base (named by the first page) is compared even where nothing after it
        // is: a store whose history starts at a snapshot, told of a disagreement right after it.
        var baseToCompare = base > 0
        while cursor < disagreed - 1 || baseToCompare {
            let page: PullPage
            do {
                page = try await transport.pull(after: cursor, limit: max(1, min(configuration.bulkPullPageOpsMax, Int(disagreed - 1 - cursor))),
                                                waitMilliseconds: 0)
            } catch {
                // Past the server's retention horizon: not compared, so taken as a disagreement. Going
                // back further than needed only queues more of this device's ops again (duplicates).
                if case .terminal(let refusal) = error, refusal.status == 410 { return cursor }
                // The server's log now ends before this point (restored again meanwhile): the two
                // agree at most up to its head.
                if case .terminal(let refusal) = error, refusal.code == ProtocolError.Code.cursorAhead, let head = refusal.serverHead {
                    return min(cursor, head)
                }
                throw error
            }
            // At the base of a store that started from a snapshot, the op the server named then.
            if baseToCompare {
                baseToCompare = false
                // The server's data was restored from a backup since this store synced (another
                // incarnation): the state at the base came from history the server may have replaced
                // below it, even where the op at the base is the same (others' lost ops, pushed again,
                // can land where they were). It cannot be compared, so the store starts over.
                if let theirs = page.incarnation, let ours = try store.serverIncarnation(), ours != theirs { return base - 1 }
                if let theirs = page.afterOpID, try store.holdsConfirmed(theirs, at: base) == false { return base - 1 }
                if cursor >= disagreed - 1 { break }
            }
            let ops = page.segment.ops
            guard let last = ops.last?.serverSeq, ops.first?.serverSeq == cursor + 1 else { return cursor }
            let ours = try store.confirmedOpIdentities(after: cursor, upTo: min(last, disagreed - 1))
            for op in ops {
                // Same id and same author: an op of another device under the same id (a clash the
                // server refused while it held ours, landed first on a restored server) is not ours.
                // Same server time: one the server lost and took again is folded by its new time.
                guard let seq = op.serverSeq, seq < disagreed,
                      ours[seq] == DeviceStore.ConfirmedOpIdentity(opID: op.opID, deviceID: op.deviceID, serverTime: op.serverTime) else {
                    return (op.serverSeq ?? cursor + 1) - 1
                }
            }
            cursor = last
        }
        return disagreed - 1
    }

    /// `DeviceStore.rewind(toAgreedSeq:)`, noting whether it moved the cursor back: a comparison
    /// that found the two agreeing up to the cursor (a restored server that lost nothing this store
    /// had) is not reported as a rewind.
    private func rewindStore(toAgreedSeq seq: Int64) throws -> RewindReport {
        let before = try store.cursor()
        let report = try store.rewind(toAgreedSeq: seq)
        if report.rewoundTo < before { roundRewindMoved = true }
        return report
    }

    /// Goes back to where this store and the server last agree before `seq`, where the server no
    /// longer holds what this store has; nil if that could not be done now (the probe that
    /// follows reports why).
    private func rewind(before seq: Int64) async -> RewindReport? {
        do {
            try store.noteDisagreement(at: seq)
            return try rewindStore(toAgreedSeq: try await lastAgreedSeq(before: seq))
        } catch {
            return nil
        }
    }

    /// Downloads the server's newest snapshot and starts the store over from it. `optional`: the
    /// store may pull the whole log instead (a new device on a big library), and does where the
    /// snapshot was made with another version of the schema than this build's (the server or this
    /// app not updated yet): the replay then reads each op as this build does. Otherwise (history
    /// before the snapshot is gone) a snapshot of an earlier version has its state carried over,
    /// and one of a later version stops the round: this app must be updated (`update_required`),
    /// and what it queued stays queued. Returns whether the store started over.
    @discardableResult
    private func startFromSnapshot(optional: Bool) async throws -> Bool {
        if try await startFromImage() { return true }
        let frame = try await transport.snapshot()
        defer { frame.discard() }
        let tail: (ops: [Op], baseOpID: UUID?, incarnation: UUID?)
        do {
            let header = try SnapshotCodec.header(of: frame)
            let schema = store.schema
            if optional, header.schemaFingerprint != schema.fingerprint { return false }
            if header.schemaName == schema.name, header.schemaVersion > schema.version {
                let queued = (try? store.pendingOps().count) ?? 0
                throw ChronicleError(.updateRequired, """
                    The server's history of this library now starts from a snapshot made with \(schema.name) v\(header.schemaVersion), \
                    and this app reads up to v\(schema.version): update the app to go on syncing. \
                    The \(queued) change\(queued == 1 ? "" : "s") made on this device and not yet confirmed \(queued == 1 ? "is" : "are") kept.
                    """)
            }
            tail = try await snapshotTail(after: header.seq)
        } catch let error as ChronicleError where Self.damagedSnapshot.contains(error.code) {
            throw SyncError.transient(reason: "The server's snapshot could not be read: \(error.message)", retryAfterSeconds: nil)
        }
        do {
            try bootstrap(from: frame, tail: tail)
            pulledInRound += tail.ops.count
        } catch let error as ChronicleError where Self.damagedSnapshot.contains(error.code) {
            // Nothing changed (one transaction); a damaged download is fetched again next round.
            throw SyncError.transient(reason: "The server's snapshot could not be read: \(error.message)", retryAfterSeconds: nil)
        }
        return true
    }

    /// `DeviceStore.bootstrap`, for a store that may hold history of its own: that history is kept
    /// as op ids (and own ops the server may have lost) only where it is the server's. Past the
    /// horizon it cannot be compared, and the op at the cursor can match by chance (others' lost
    /// ops pushed again can land where they were): where the server's file is another incarnation
    /// than the one this store synced with (restored or salvaged since), or the tail holds an op
    /// this store holds at another seq (a copy that kept the incarnation), the store goes back to
    /// nothing first, its own ops queued again, as a 410 naming another op does. Kept, those ids
    /// refused the tail as `duplicate_op` every round (all-faults seed 31385).
    private func bootstrap(from frame: SnapshotFrame, tail: (ops: [Op], baseOpID: UUID?, incarnation: UUID?)) throws {
        let start = { try self.store.bootstrap(from: frame, tail: tail.ops, baseOpID: tail.baseOpID, incarnation: tail.incarnation) }
        if roundRewind == nil, try store.cursor() > 0, let theirs = tail.incarnation, let ours = try store.serverIncarnation(), ours != theirs {
            roundRewind = try rewindStore(toAgreedSeq: 0)
        }
        do {
            roundBootstrap = try start()
        } catch let error as ChronicleError where error.code == .duplicateOp && roundRewind == nil {
            // Nothing changed (one transaction): once back at nothing, no id is held twice.
            roundRewind = try rewindStore(toAgreedSeq: 0)
            roundBootstrap = try start()
        }
    }

    /// A store that has never held anything takes the server's start image, where the server has
    /// one for this build's store format and schema. False where it has none, or it could not be
    /// fetched or taken (a damaged download; the store is unchanged): the snapshot then.
    private func startFromImage() async throws -> Bool {
        guard configuration.startImages, try store.isPristine() else { return false }
        let file = store.startImagePath
        defer { try? FileManager.default.removeItem(atPath: file) }
        do {
            guard try await transport.startImage(storeFormat: DeviceStore.storeFormatVersion, schemaFingerprint: store.schema.fingerprint,
                                                 to: file) else { return false }
        } catch {
            return false   // a server that serves none (an older one), or a failed download: the snapshot
        }
        do {
            roundBootstrap = try store.adoptStartImage(file)
            roundStartedFromImage = true
            return true
        } catch let error as ChronicleError where error.code != .diskFull {
            // Damaged, not of this store (malformed_start_image), or the store took a write meanwhile:
            // the store is as it was, and starts from the snapshot.
            return false
        }
    }

    /// The ops right after the snapshot, up to `bulkCatchUpOpsMin` of them: folded inside
    /// the bootstrap, before its indexes are built, they cost a fraction of what pulling them
    /// afterwards does (each such op updates the search indexes); whatever is left is pulled.
    /// Also the op the server holds at `seq` and the incarnation of its file, as the first page
    /// names them: the store keeps both, so that a server that loses the history beneath the
    /// snapshot is found out even where no pull reaches this store between the two.
    private func snapshotTail(after seq: Int64) async throws -> (ops: [Op], baseOpID: UUID?, incarnation: UUID?) {
        var tail: [Op] = []
        var baseOpID: UUID?
        var incarnation: UUID?
        var cursor = seq
        while tail.count < configuration.bulkCatchUpOpsMin {
            let limit = min(configuration.bulkPullPageOpsMax, configuration.bulkCatchUpOpsMin - tail.count)
            let page = try await transport.pull(after: cursor, limit: max(1, limit), waitMilliseconds: 0)
            if cursor == seq { (baseOpID, incarnation) = (page.afterOpID, page.incarnation) }
            let ops = page.segment.ops
            if ops.isEmpty { break }
            try Self.checkContinues(ops, cursor: cursor)
            tail += ops
            cursor = page.nextCursor
            if !page.more { break }
        }
        return (tail, baseOpID, incarnation)
    }

    /// A page must continue the store's log exactly; anything else is retried.
    static func checkContinues(_ ops: [Op], cursor: Int64) throws(SyncError) {
        guard ops.first?.serverSeq == cursor + 1 else {
            throw SyncError.transient(reason: "The server sent ops from \(ops.first?.serverSeq ?? 0); expected \(cursor + 1).", retryAfterSeconds: nil)
        }
    }

    static let damagedSnapshot: Set<ChronicleError.Code> = [.malformedSnapshot, .futureSnapshotVersion, .malformedFrame, .segmentChecksum, .segmentTooLarge]

    private func pullPages(waitMilliseconds: Int, mayStartFromSnapshot: Bool) async throws -> (head: Int64, count: Int) {
        var count = 0
        var cursor = try store.cursor()
        var bulk = false
        var head: Int64 = 0
        let limit = configuration.pullPageOpsMax
        let transport = self.transport
        let start = cursor
        let store = self.store
        // In bulk mode the next page's log blocks and statements are built as it arrives, off the
        // engine's queue, while the page before it is written.
        var next: Task<(PullPage, PreparedBatch?), Error>? = Task.detached { [transport] in
            (try await transport.pull(after: start, limit: limit, waitMilliseconds: waitMilliseconds), nil)
        }
        defer { next?.cancel() }
        do {
            while let pending = next {
                let page: PullPage
                let prepared: PreparedBatch?
                do {
                    (page, prepared) = try await withTaskCancellationHandler { try await pending.value } onCancel: { pending.cancel() }
                } catch let error as SyncError {
                    throw error
                } catch {
                    throw SyncError.transient(reason: "\(error)", retryAfterSeconds: nil)
                }
                next = nil
                head = max(head, page.head)
                // The server holds another op where this store's log ends: it lost what this store
                // had from it (restored from a backup) and has ordered other ops since. Looked up by
                // id on both sides, so sealed history costs no decoding.
                if count == 0, let theirs = page.afterOpID, try store.holdsConfirmed(theirs, at: cursor) == false {
                    throw Diverged(cursor: cursor)
                }
                // The server's copy of the library is another incarnation than the one this store
                // synced with: its data was restored from a backup. The op at the cursor may match by
                // chance (others' lost ops pushed again can land where they were), so the whole
                // history is compared first (once a round; then the new incarnation is kept).
                // The server's state was carried over from a snapshot of an earlier schema version when
                // it was updated: a store whose state is not the server's since then (it replays its own
                // log, which knows more) starts over from the server's snapshot, once a round. So does
                // one that started, at that very seq, from the server's snapshot of the earlier version
                // and carried it over itself: the server may have carried over from an earlier snapshot
                // and replayed up to there, which knows more (who set a field that became mergeOrAsk).
                if count == 0, let at = page.stateCarriedOverAt, roundRewind == nil {
                    let started = try store.serverSnapshotSeq() ?? -1
                    let carriedHere = started == at ? try store.serverSnapshotCarriedOver() : false
                    if started < at || carriedHere { throw StartOverFromServer() }
                }
                if count == 0, let theirs = page.incarnation, case let ours = try store.serverIncarnation(), ours != theirs {
                    if ours != nil, roundRewind == nil, roundBootstrap == nil, cursor > 0 { throw Diverged(cursor: cursor + 1) }
                    try store.setServerIncarnation(theirs)
                }
                if mayStartFromSnapshot, cursor == 0, count == 0, let snapshotSeq = page.snapshotSeq,
                   snapshotSeq >= configuration.snapshotStartOpsMin {
                    throw StartFromSnapshot.requested   // a new device on a big library: start from the snapshot
                }
                let ops = page.segment.ops
                if ops.isEmpty { break }
                try Self.checkContinues(ops, cursor: cursor)
                let after = page.nextCursor
                // The head is the server's word: a hostile or broken one may send any Int64.
                let (behind, overflow) = page.head.subtractingReportingOverflow(cursor)
                if !bulk && !overflow && behind >= Int64(configuration.bulkCatchUpOpsMin) {
                    try store.beginBulk()
                    bulk = true
                }
                if page.more {
                    let pageLimit = bulk ? max(limit, configuration.bulkPullPageOpsMax) : limit
                    let prepare = bulk
                    let sealingOpsMin = configuration.sealOnArrivalOpsMin
                    next = Task.detached { [transport] in
                        let page = try await transport.pull(after: after, limit: pageLimit, waitMilliseconds: 0)
                        return (page, prepare ? store.prepareBatch(page.segment.ops, sealing: true, encoded: page.encoded,
                                                                   sealingOpsMin: sealingOpsMin) : nil)
                    }
                }
                let pageOps = ops.count
                if bulk {
                    // The page's ops are freed off this queue (see `applyBulkBatch`), so nothing here keeps them.
                    // Pages with more after them go straight into sealed segments; the last one stays hot.
                    let more = page.more
                    do {
                        try store.applyBulkBatch((consume prepared) ?? store.prepareBatch(ops, sealing: more, encoded: page.encoded,
                                                                                          sealingOpsMin: configuration.sealOnArrivalOpsMin),
                                                 seal: more)
                    } catch {
                        throw divergence(among: ops) ?? error
                    }
                    ReleaseInBackground.release((consume page, consume ops))
                } else {
                    do {
                        try store.applyConfirmed(ops)
                    } catch {
                        throw divergence(among: ops) ?? error
                    }
                }
                count += pageOps
                pulledInRound += pageOps
                cursor = after
            }
        } catch {
            if bulk { try store.finishBulk() }
            throw error
        }
        if bulk { try store.finishBulk() }
        return (head, count)
    }
}

/// Wakes a waiting engine early. A fire with nobody waiting is remembered once.
final class TriggerSignal: @unchecked Sendable {
    private let lock = NSLock()
    private var pending = false
    private var waiters: [UUID: CheckedContinuation<Void, Never>] = [:]

    func fire() {
        lock.lock()
        let woken = waiters
        waiters.removeAll()
        if woken.isEmpty { pending = true }
        lock.unlock()
        for continuation in woken.values { continuation.resume() }
    }

    /// Returns after `milliseconds`, on a fire, or when the task is cancelled.
    func wait(milliseconds: Int) async {
        let id = UUID()
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await Task.sleep(nanoseconds: UInt64(max(0, milliseconds)) * 1_000_000) }
            group.addTask {
                await withTaskCancellationHandler {
                    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                        self.lock.lock()
                        if self.pending || Task.isCancelled {
                            self.pending = false
                            self.lock.unlock()
                            continuation.resume()
                        } else {
                            self.waiters[id] = continuation
                            self.lock.unlock()
                        }
                    }
                } onCancel: {
                    self.lock.lock()
                    let continuation = self.waiters.removeValue(forKey: id)
                    self.lock.unlock()
                    continuation?.resume()
                }
            }
            await group.next()
            group.cancelAll()
        }
    }
}

/// A serial executor that runs an actor's jobs on a dispatch queue of its own.
final class QueueExecutor: SerialExecutor {
    private let queue: DispatchQueue

    init(label: String) { queue = DispatchQueue(label: label) }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.async { job.runSynchronously(on: self.asUnownedSerialExecutor()) }
    }

    func asUnownedSerialExecutor() -> UnownedSerialExecutor { UnownedSerialExecutor(ordinary: self) }
}

