import ChronicleCore
import ChronicleStore
import Foundation

// Where the server and this store disagree: finding the last seq both hold, and going back to it.
extension SyncEngine {
    /// The server and this store disagree again after this round went back (or started over)
    /// once: the round stops, and the next one looks again (the disagreement is noted).
    func divergedAgain(_ diverged: Diverged) throws -> SyncError {
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
    func divergence(among ops: [Op]) -> Diverged? {
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
    func lastAgreedSeq(before disagreed: Int64) async throws -> Int64 {
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
    func rewindStore(toAgreedSeq seq: Int64) throws -> RewindReport {
        let before = try store.cursor()
        let report = try store.rewind(toAgreedSeq: seq)
        if report.rewoundTo < before { roundRewindMoved = true }
        return report
    }

    /// Goes back to where this store and the server last agree before `seq`, where the server no
    /// longer holds what this store has; nil if that could not be done now (the probe that
    /// follows reports why).
    func rewind(before seq: Int64) async -> RewindReport? {
        do {
            try store.noteDisagreement(at: seq)
            return try rewindStore(toAgreedSeq: try await lastAgreedSeq(before: seq))
        } catch {
            return nil
        }
    }
}
