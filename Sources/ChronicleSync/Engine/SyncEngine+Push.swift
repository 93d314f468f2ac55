import ChronicleCore
import ChronicleStore
import Foundation

// Pushing the outbox: batches in deviceSeq order, sent ahead while answers come back.
extension SyncEngine {
    /// Pushes unanswered outbox ops in deviceSeq order until none are left.
    /// Returns the server's head as last reported.
    ///
    /// The device's side runs beside the server's: while a batch waits for its answer, the
    /// next one is read from the outbox, encoded and (with `pushRequestsInFlightMax` 2) sent,
    /// and a batch's acknowledgement is committed while the next is on its way. Answers are
    /// read in order. When a batch fails, whatever was sent behind it is dropped: pushes are
    /// idempotent, so sending those ops again costs only a repeat, answered with the original
    /// results. An acknowledgement lost to a crash costs the same.
    func pushAll(_ report: inout SyncReport) async throws -> Int64 {
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
    struct OutgoingBatch: Sendable {
        let ops: [Op]
        let segment: Segment
        var answer: Task<PushResponse, any Error>?
    }

    static func send(_ segment: Segment, _ transport: any SyncTransport) -> Task<PushResponse, any Error> {
        Task.detached { try await transport.push(segment) }
    }

    /// What a request running as `task` gave (a push's answer, a pulled page), waited for and
    /// cancelled with the caller; any failure other than a `SyncError` is transient.
    static func awaited<T: Sendable>(_ task: Task<T, any Error>) async throws(SyncError) -> T {
        do {
            return try await withTaskCancellationHandler { try await task.value } onCancel: { task.cancel() }
        } catch let error as SyncError {
            throw error
        } catch {
            throw SyncError.transient(reason: "\(error)", retryAfterSeconds: nil)
        }
    }

    /// Drops a batch read (and perhaps sent) ahead of one that failed: its request is cancelled.
    static func abandon(_ upcoming: Task<OutgoingBatch?, any Error>?) {
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

    /// What one push round has changed of how it pushes: the batch size (halved on 413), whether
    /// the acknowledgements were reset, how often the queue was renumbered.
    private struct PushRoundState {
        var batch: Int
        var resetOnce = false
        var renumberings = 0
    }

    /// Sends the outbox batch by batch, the next one read (and perhaps sent) while the one ahead
    /// waits for its answer, until the outbox has nothing more; returns the server's head.
    func pushBatches(_ report: inout SyncReport, acknowledging: inout Task<Void, Error>?) async throws -> Int64 {
        var head: Int64 = 0
        var state = PushRoundState(batch: configuration.pushBatchOpsMax)
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
                let ops = try store.unacknowledgedOps(limit: state.batch)
                guard !ops.isEmpty else { return head }
                outgoing = OutgoingBatch(ops: ops, segment: try Segment(libraryID: store.libraryID, ops: ops))
            }
            let sentAhead = outgoing.answer != nil
            let answer = outgoing.answer ?? Self.send(outgoing.segment, transport)
            let ops = outgoing.ops
            let first = ops.first!, last = ops.last!
            upcoming = Self.readAhead(after: last.deviceSeq, limit: state.batch, sendsAhead: sendsAhead, store: store, transport: transport)
            let response: PushResponse
            do throws(SyncError) {
                response = try await Self.awaited(answer)
            } catch {
                // What was read and sent behind this batch assumed it went through.
                Self.abandon(upcoming)
                upcoming = nil
                try await recover(from: error, deviceSeqs: first.deviceSeq...last.deviceSeq, sentAhead: sentAhead,
                                  state: &state, report: &report, acknowledging: &acknowledging)
                continue
            }
            try await recordResults(response, of: ops, report: &report)
            // One acknowledgement commits at a time, in order (it never moves backwards anyway).
            try await acknowledging?.value
            let through = last.deviceSeq
            acknowledging = Task.detached { try store.recordAcknowledged(through: through) }
            head = max(head, response.head)
        }
    }

    /// Starts reading (and, with `sendsAhead`, sending) the batch after `deviceSeq`, off the
    /// engine's queue; nil inside when the outbox has nothing after it.
    private static func readAhead(after deviceSeq: Int64, limit: Int, sendsAhead: Bool, store: DeviceStore,
                                  transport: any SyncTransport) -> Task<OutgoingBatch?, any Error> {
        Task.detached {
            let ops = try store.unacknowledgedOps(after: deviceSeq, limit: limit)
            guard !ops.isEmpty else { return nil }
            let segment = try Segment(libraryID: store.libraryID, ops: ops)
            return OutgoingBatch(ops: ops, segment: segment, answer: sendsAhead ? Self.send(segment, transport) : nil)
        }
    }

    /// Answers a failed batch (ops `deviceSeqs`) with what lets the round go on: smaller batches,
    /// the batch sent again, the queue renumbered or the acknowledgements reset, after which the
    /// caller pushes again; otherwise records the failure on the ops and throws `error`.
    private func recover(from error: SyncError, deviceSeqs: ClosedRange<Int64>, sentAhead: Bool, state: inout PushRoundState,
                         report: inout SyncReport, acknowledging: inout Task<Void, Error>?) async throws {
        switch error {
        case .terminal(let refusal) where refusal.status == 413 && state.batch > 1:
            state.batch = max(1, state.batch / 2)   // too big for the server's caps: smaller batches
        case .terminal(let refusal) where refusal.code == ProtocolError.Code.deviceSeqGap && sentAhead:
            // Sent behind a batch that was answered, it outwaited the server's patience
            // for that one: send it again, as the next batch.
            try await acknowledging?.value
            acknowledging = nil
        case .terminal(let refusal) where refusal.code == ProtocolError.Code.deviceSeqReused && state.renumberings < Self.renumberingsMax:
            // This store is an older copy of one that went on syncing: the server already
            // holds ops under the numbers its queue uses. Number them after the server's and
            // push again; the other copy's ops come back with the pull.
            guard let reused = refusal.reusedDeviceSeq, let serverLast = refusal.lastDeviceSeq, serverLast >= reused else {
                try? store.recordPushFailure(deviceSeqs: deviceSeqs, error: error.description)
                throw error
            }
            // Not so where this store holds own ops numbered after the server's last as
            // confirmed: the server lost them (restored from a backup, or salvaged), and
            // numbering the queue after its last would give their numbers to other ops. The
            // round goes back before them first (below, in `syncOnce`).
            if (try? store.seqOfOwnOpsTheServerLost(after: serverLast)) != nil { throw error }
            state.renumberings += 1
            try await acknowledging?.value
            acknowledging = nil
            report.renumbered += try store.renumberOutbox(from: reused, after: serverLast)
        case .terminal(let refusal) where refusal.code == ProtocolError.Code.deviceSeqGap && !state.resetOnce:
            state.resetOnce = true            // our acknowledgements ran ahead of the server: push from the outbox head
            try await acknowledging?.value
            acknowledging = nil
            try store.resetAcknowledged()
        default:
            try? store.recordPushFailure(deviceSeqs: deviceSeqs, error: error.description)
            throw error
        }
    }

    /// Takes the server's answer for `ops`: checks it matches them, confirms duplicates ordered
    /// inside the snapshot this store started from, and drops rejected ops with their verdict.
    private func recordResults(_ response: PushResponse, of ops: [Op], report: inout SyncReport) async throws {
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
    }
}
