import ChronicleCore
import ChronicleStore
import Foundation

// Pulling the server's order: pages folded in as they come, the next fetched meanwhile.
extension SyncEngine {
    /// Pulls pages until caught up (or, with a wait, until the first page arrives and
    /// everything after it is in). Fetches the next page while folding the current one.
    func pullAll(waitMilliseconds: Int) async throws -> (head: Int64, count: Int) {
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


    static let damagedSnapshot: Set<ChronicleError.Code> = [.malformedSnapshot, .futureSnapshotVersion, .malformedFrame, .segmentChecksum, .segmentTooLarge]

    /// Pulls pages from the store's cursor until the server says there are no more, folding
    /// each in; the next page is fetched meanwhile. Switches to bulk apply when far behind.
    func pullPages(waitMilliseconds: Int, mayStartFromSnapshot: Bool) async throws -> (head: Int64, count: Int) {
        var count = 0
        var cursor = try store.cursor()
        var bulk = false
        var head: Int64 = 0
        let limit = configuration.pullPageOpsMax
        // In bulk mode the next page's log blocks and statements are built as it arrives, off the
        // engine's queue, while the page before it is written.
        var next: Task<(PullPage, PreparedBatch?), Error>? = Self.fetchPage(
            after: cursor, limit: limit, waitMilliseconds: waitMilliseconds, preparingWithSealingOpsMin: nil,
            transport: transport, store: store)
        defer { next?.cancel() }
        do {
            while let pending = next {
                let page: PullPage
                let prepared: PreparedBatch?
                (page, prepared) = try await Self.awaited(pending)
                next = nil
                head = max(head, page.head)
                if count == 0 { try checkFirstPage(page, cursor: cursor, mayStartFromSnapshot: mayStartFromSnapshot) }
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
                    next = Self.fetchPage(
                        after: after, limit: bulk ? max(limit, configuration.bulkPullPageOpsMax) : limit, waitMilliseconds: 0,
                        preparingWithSealingOpsMin: bulk ? configuration.sealOnArrivalOpsMin : nil, transport: transport, store: store)
                }
                let pageOps = ops.count
                try applyPage(consume page, ops: consume ops, prepared: consume prepared, bulk: bulk)
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

    /// Starts fetching the page after `after`, off the engine's queue; with `sealingOpsMin`
    /// (bulk mode) the page's batch is prepared for `applyBulkBatch` as it arrives.
    private static func fetchPage(after: Int64, limit: Int, waitMilliseconds: Int, preparingWithSealingOpsMin sealingOpsMin: Int?,
                          transport: any SyncTransport, store: DeviceStore) -> Task<(PullPage, PreparedBatch?), Error> {
        Task.detached { [transport] in
            let page = try await transport.pull(after: after, limit: limit, waitMilliseconds: waitMilliseconds)
            return (page, sealingOpsMin.map { store.prepareBatch(page.segment.ops, sealing: true, encoded: page.encoded,
                                                                 sealingOpsMin: $0) })
        }
    }

    /// Checks the first page of a pull against this store, before any of it is folded in: throws
    /// `Diverged`, `StartOverFromServer` or `StartFromSnapshot.requested` where the server's history
    /// is not the one this store goes on from, and records the server's incarnation.
    private func checkFirstPage(_ page: PullPage, cursor: Int64, mayStartFromSnapshot: Bool) throws {
        // The server holds another op where this store's log ends: it lost what this store
        // had from it (restored from a backup) and has ordered other ops since. Looked up by
        // id on both sides, so sealed history costs no decoding.
        if let theirs = page.afterOpID, try store.holdsConfirmed(theirs, at: cursor) == false {
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
        if let at = page.stateCarriedOverAt, roundRewind == nil {
            let started = try store.serverSnapshotSeq() ?? -1
            let carriedHere = started == at ? try store.serverSnapshotCarriedOver() : false
            if started < at || carriedHere { throw StartOverFromServer() }
        }
        if let theirs = page.incarnation, case let ours = try store.serverIncarnation(), ours != theirs {
            if ours != nil, roundRewind == nil, roundBootstrap == nil, cursor > 0 { throw Diverged(cursor: cursor + 1) }
            try store.setServerIncarnation(theirs)
        }
        if mayStartFromSnapshot, cursor == 0, let snapshotSeq = page.snapshotSeq,
           snapshotSeq >= configuration.snapshotStartOpsMin {
            throw StartFromSnapshot.requested   // a new device on a big library: start from the snapshot
        }
    }

    /// Folds one page's ops in: in bulk mode as a batch (prepared on arrival, or here), its memory
    /// released off this queue; otherwise as confirmed ops. A failure that shows the server's
    /// history differs from this store's is thrown as `Diverged`.
    private func applyPage(_ page: consuming PullPage, ops: consuming [Op], prepared: consuming PreparedBatch?, bulk: Bool) throws {
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
    }
}
