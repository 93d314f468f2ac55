import ChronicleCore
import ChronicleStore
import Foundation

// Starting from the server's snapshot or its start image instead of the whole log.
extension SyncEngine {
    /// Downloads the server's newest snapshot and starts the store over from it. `optional`: the
    /// store may pull the whole log instead (a new device on a big library), and does where the
    /// snapshot was made with another version of the schema than this build's (the server or this
    /// app not updated yet): the replay then reads each op as this build does. Otherwise (history
    /// before the snapshot is gone) a snapshot of an earlier version has its state carried over,
    /// and one of a later version stops the round: this app must be updated (`update_required`),
    /// and what it queued stays queued. Returns whether the store started over.
    @discardableResult
    func startFromSnapshot(optional: Bool) async throws -> Bool {
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
    func bootstrap(from frame: SnapshotFrame, tail: (ops: [Op], baseOpID: UUID?, incarnation: UUID?)) throws {
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
    func startFromImage() async throws -> Bool {
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
    func snapshotTail(after seq: Int64) async throws -> (ops: [Op], baseOpID: UUID?, incarnation: UUID?) {
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
}
