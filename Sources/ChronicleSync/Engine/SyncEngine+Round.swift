import ChronicleCore
import ChronicleStore
import Foundation

// One round of sync: push, pull, recover from what went wrong, and what follows a synced round.

extension SyncEngine {
    /// Where a failed exchange leaves the round.
    enum Recovery {
        /// Run the exchange again (after a backoff wait, or after a remedy changed the store).
        case again
        /// The round ends with this outcome.
        case stop(SyncReport.Outcome)
    }

    /// What the round's retries have counted so far.
    struct RetryState {
        /// Consecutive failures without progress: what backoff and the budget count.
        var attempt = 0
        /// Ops pushed, refused and pulled when the last failure was counted.
        var progress = 0
        /// Remedies tried this round for a `device_seq_gap`.
        var gapRemedies = 0
    }

    /// Pushes everything queued, then pulls until caught up. Retries transient
    /// failures (up to `retriesPerRoundMax`) and records the result in the store.
    /// The first round does the store's upkeep first (`DeviceStore.performUpkeep`).
    @discardableResult
    public func syncOnce() async -> SyncReport {
        var report = SyncReport()
        pulledInRound = 0
        roundBootstrap = nil
        roundStartedFromImage = false
        roundRewind = nil
        roundRewindMoved = false
        var retries = RetryState()
        while true {
            report.pulled = pulledInRound
            do {
                if !upkeepDone {
                    try store.performUpkeep()
                    upkeepDone = true
                }
                try await exchange(&report)
                report.outcome = .synced
                break
            } catch {
                switch await recover(from: error, &report, &retries) {
                case .again: continue
                case .stop(let outcome): report.outcome = outcome
                }
                break
            }
        }
        await finishRound(&report)
        lastReport = report
        return report
    }

    /// Pushes, pulls until caught up, and records the server's head.
    private func exchange(_ report: inout SyncReport) async throws {
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
    }

    /// Decides what a failed exchange leads to, recording a failure that ends the round in the store.
    private func recover(from error: any Error, _ report: inout SyncReport, _ retries: inout RetryState) async -> Recovery {
        let reason: String
        switch error {
        case SyncError.transient(let why, let retryAfter):
            try? store.recordSyncAttempt(error: why)
            if await backOff(retryAfter: retryAfter, &report, &retries) { return .again }
            return .stop(.offline(reason: why))
        case SyncError.terminal(let refusal):
            if await remedy(refusal, &report, &retries) { return .again }
            reason = "The server refused the request: \(refusal.message) [\(refusal.code)]"
        case let error as ChronicleError where error.code == .updateRequired:
            reason = "Update required: \(error.message) [\(error.code.rawValue)]"
        case let error as SQLiteError where error.isCorrupt:
            // Nothing a retry mends: the app (or `chronicle salvage`) has to salvage the store.
            let damaged = DeviceStore.damaged(store.path, error)
            reason = "\(damaged.message) [\(damaged.code.rawValue)]"
        default:
            reason = "The local store failed: \(error)"
        }
        try? store.recordSyncAttempt(error: reason)
        return .stop(.blocked(reason: reason))
    }

    /// Counts a transient failure and waits before the next try; false when the round gives up
    /// (the retry budget spent without progress, a server asking for a long wait, cancellation).
    private func backOff(retryAfter: Double?, _ report: inout SyncReport, _ retries: inout RetryState) async -> Bool {
        let done = report.pushed + report.rejected + pulledInRound
        retries.attempt = done > retries.progress ? 1 : retries.attempt + 1
        retries.progress = done
        // A server that asks for a longer wait than backoff ever makes (a damaged file
        // being salvaged: 300 s) ends the round now rather than holding `syncOnce` for it;
        // the schedule and the app's triggers try again.
        let longWait = (retryAfter ?? 0) * 1000 > Double(configuration.backoffMaxMilliseconds)
        if retries.attempt > configuration.retriesPerRoundMax || longWait || Task.isCancelled { return false }
        report.retries += 1
        await signal.wait(milliseconds: backoffMilliseconds(attempt: retries.attempt, retryAfterSeconds: retryAfter))
        return true
    }

    /// Tries to mend what a refusal says about the store and the server (a gap or reused numbers
    /// in the device's sequence); true when something changed and the exchange runs again.
    private func remedy(_ refusal: ProtocolError, _ report: inout SyncReport, _ retries: inout RetryState) async -> Bool {
        if refusal.code == ProtocolError.Code.deviceSeqGap && retries.gapRemedies < Self.gapRemediesMax {
            retries.gapRemedies += 1
            return await remedyGap(after: refusal.lastDeviceSeq ?? -1, &report)
        }
        if refusal.code == ProtocolError.Code.deviceSeqReused && roundRewind == nil {
            // The push met numbers the server already answered while this store holds own ops
            // numbered after the server's last as confirmed: the server lost them (seed 59 of the
            // damage soak, 2,000 steps: its library salvaged). The store goes back before them,
            // as for a gap, and the round runs again: they are queued with their numbers, and
            // the queue is numbered after the server's last only then.
            if let last = refusal.lastDeviceSeq, let lostAt = try? store.seqOfOwnOpsTheServerLost(after: last),
               let rewound = await rewind(before: lostAt) {
                roundRewind = rewound
                return true
            }
        }
        return false
    }

    /// The server expects an earlier deviceSeq than the queue holds (`last` is the last it holds),
    /// from the outbox's head too: it may have lost ops (restored from a backup). Each remedy below
    /// changes the store, and the round runs again; a gap that needs more than one (go back, then
    /// close what dropped history left) is remedied step by step, a few times a round.
    private func remedyGap(after last: Int64, _ report: inout SyncReport) async -> Bool {
        // Where this store holds an own op numbered after the server's last as confirmed,
        // or held the one the server waits for in history it dropped past its horizon,
        // the server lost it (it takes a device's ops in order): the store goes back to
        // before it. Nothing on the pull may show it: the op at the cursor can match all the
        // same, where the lost ops of others were pushed again in the same order, and a
        // data directory copied by other means keeps its incarnation. Once a round.
        if last >= 0, roundRewind == nil, let lostAt = try? store.seqOfOwnOpsTheServerLost(after: last),
           let rewound = await rewind(before: lostAt) {
            roundRewind = rewound
            return true
        }
        // Or it holds ops refused after that number, not queued: they go back into the queue
        // (the server lost their refusals, or holds them under other numbers; either way it
        // answers them again). And where the queue then lacks numbers after the server's last,
        // their content went with history the store dropped past its horizon (which the
        // server lost too), or they were given up: the queue takes them, before it is sent.
        let requeued = last >= 0 ? ((try? store.queueRefusedAgain(after: last)) ?? 0) : 0
        if last >= 0, let lost = try? store.closeOutboxGap(after: last) {
            report.lostWithServer += lost
            return true
        }
        if requeued > 0 { return true }
        // Otherwise a pull finds out (`cursor_ahead`, or another op at the cursor).
        if roundRewind == nil {
            _ = try? await pullAll(waitMilliseconds: 0)
            if roundRewind != nil { return true }
        }
        return false
    }

    /// What follows the exchange: the round's report completed, then, once synced, files
    /// uploaded (a large file never holds up the outbox) and whole segments sealed.
    private func finishRound(_ report: inout SyncReport) async {
        report.pulled = pulledInRound
        report.bootstrappedAt = roundBootstrap
        report.startedFromImage = roundStartedFromImage
        report.rewound = roundRewindMoved ? roundRewind : nil
        guard report.outcome == .synced else { return }
        await uploadBlobs(&report)
        if var policy = configuration.compaction {
            policy.wholeSegmentsOnly = true
            if let plan = try? store.compactionPlan(policy), plan.opsToSeal > 0 || plan.dropThrough != nil {
                report.sealed = (try? store.compact(policy))?.opsSealed ?? 0
            }
        }
    }
}
