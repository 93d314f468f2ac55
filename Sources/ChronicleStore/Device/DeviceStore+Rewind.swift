import ChronicleCore
import Foundation

/// What `DeviceStore.rewind(toAgreedSeq:)` did.
public struct RewindReport: Sendable, Equatable {
    /// The last seq at which the server holds the same op as this store (below its cursor).
    public var agreedSeq: Int64
    /// The seq the store went back to: `agreedSeq`, or before it where a sealed segment spans
    /// it (the segment goes whole and its ops are pulled again), or 0 where the store started
    /// from a snapshot past it.
    public var rewoundTo: Int64
    /// Confirmed ops after `rewoundTo` the store let go: the server sends again those it holds.
    public var dropped: Int64
    /// This device's own ops among them, queued again with their ids and numbers: the server
    /// answers those it holds as duplicates and takes the ones it lost.
    public var requeued: Int
    /// This device's ops the server had refused that may have been refused after its backup,
    /// queued again too: the restored server may not know their numbers. It answers them again
    /// (the same refusal where it kept it, which changes nothing here).
    public var refusedRequeued = 0
    /// This device's own ops after the point whose content the store no longer held (dropped past
    /// its retention horizon, trusting the server that then lost them): they cannot be sent
    /// again, and their numbers are given up (`device_seq_skips`). Gone with the server's data.
    public var lost = 0
}

extension DeviceStore {
    /// Goes back to what the server holds when the server's log agrees with this store's only
    /// up to seq `agreed`, before this store's cursor: the server's data directory was restored
    /// from a backup, and the ops ordered after it are gone from the server (which may have
    /// ordered other ops since: `cursor_ahead`, or a pull whose `afterOpID` differs).
    ///
    /// One transaction. Confirmed ops after the rewind point leave the log (and sealed segments
    /// and snapshots past it go); this device's own ops among them go back into the outbox, ahead
    /// of its queued ops, with their op ids, deviceSeqs and content, so that they are pushed again;
    /// the projection is rebuilt from what stays, with every queued op on top, and the cursor
    /// moves back, so the next pull brings the server's ops after it. Ops other devices wrote that
    /// the server lost come back only if those devices push them again. Own ops folded into a
    /// snapshot the store started from cannot be taken apart and are not queued again.
    @discardableResult
    public func rewind(toAgreedSeq head: Int64) throws -> RewindReport {
        guard head >= 0 else {
            throw ChronicleError(.invalidValue, "The seq to go back to must be 0 or more; got \(head).")
        }
        var report = RewindReport(agreedSeq: head, rewoundTo: head, dropped: 0, requeued: 0)
        guard try cursor() > head else {
            try writeTransaction { db in try Self.forgetDisagreement(in: db) }
            return report
        }
        _ = try rebuild(beforeReplay: { db in
            let cursor = try LogTables.meta("cursor", in: db).integerValue ?? 0
            try Self.forgetDisagreement(in: db)
            guard cursor > head else { return }
            try self.goBack(to: head, report: &report, in: db)
        }, alsoInTransaction: nil)
        return report
    }

    /// `rewind`'s change to the log, inside the rebuild's transaction (before its replay).
    private func goBack(to head: Int64, report: inout RewindReport, in db: Database) throws {
        if head == 0 { try db.execute("DELETE FROM chronicle_meta WHERE key = ?1", [.text(Self.stateCarriedOverKey)]) }
        if let started = try LogTables.meta(Self.serverSnapshotKey, in: db).integerValue, head < started {
            try db.execute("DELETE FROM chronicle_meta WHERE key = ?1", [.text(Self.serverSnapshotKey)])
            try db.execute("DELETE FROM chronicle_meta WHERE key = ?1", [.text(Self.serverSnapshotCarriedOverKey)])
        }
        // Keep whole segments only; before a snapshot the store started from there is no op to keep.
        var point = head
        if let spanning = try db.scalarInt("SELECT first_seq FROM chronicle_segments WHERE first_seq <= ?1 AND last_seq > ?1", [.integer(point)]) {
            point = spanning - 1
        }
        let base = try LogTables.historyBase(in: db)
        if point < base { point = 0 }
        report.rewoundTo = point

        // This device's ops after the point, from the segments and the log, in server order.
        var own: [Op] = []
        var dropped: Int64 = 0
        try LogTables.forEachConfirmedOp(in: db, libraryID: libraryID, after: point) { op in
            dropped += 1
            if op.deviceID == deviceID { own.append(op) }
        }
        report.dropped = dropped

        // The confirmed history after the point goes; the triggers that guard it are set aside
        // for this one change and put back as they were.
        try Self.withTriggersAside(["chronicle_log_blocks_leave_only_sealed", "chronicle_segments_dropped_only_behind_a_snapshot"]
                                   + Self.requeueTriggers, in: db) {
            try dropHistory(after: point, base: base, in: db)
            // Own ops back in the queue, ahead of the ops queued since (their numbers are lower).
            report.requeued = try Self.queueAgain(own, in: db)
            // Refused ops after this device's last op the log still holds: the restored server may
            // have lost those refusals, and would wait for their numbers before any op after them.
            // That includes an op refused as an op_id_conflict, whose id the log holds as another
            // device's op (so `chronicle_outbox_once` is set aside too): the server refuses it again.
            let keptOwn = try Self.lastOwnDeviceSeq(in: db)
            report.refusedRequeued = try Self.queueRefusedAgain(after: keptOwn, in: db)
            // Own ops whose content is no longer here cannot be queued again: below the history
            // base, those that went with dropped history; anywhere, those whose last copy was on
            // a page a salvage could not read (seed 724 of the damage soak, where the server had
            // lost them to a restore). Their numbers are given up, so the outbox still accounts
            // for each.
            report.lost = try Self.giveUpUnheldNumbers(in: db)
        }
        try LogTables.setMeta("cursor", .integer(point), in: db)
        // Every queued op is pushed again: the answers say which ones the server holds.
        try LogTables.setMeta("acked_device_seq", .integer(0), in: db)
    }

    /// Drops the confirmed history after `point`: segments, op ids, snapshots, log blocks (a
    /// block that spans the point is encoded again from the new sealed end).
    private func dropHistory(after point: Int64, base: Int64, in db: Database) throws {
        try db.execute("DELETE FROM chronicle_segments WHERE first_seq > ?1", [.integer(point)])
        try db.execute("DELETE FROM chronicle_op_ids WHERE server_seq > ?1", [.integer(point)])
        try db.execute("DELETE FROM chronicle_own_confirmed WHERE server_seq > ?1", [.integer(point)])
        try db.execute("DELETE FROM chronicle_snapshots WHERE seq > ?1", [.integer(point)])
        if point < base {
            try LogTables.setMeta("history_base_seq", .integer(0), in: db)
            try db.execute("DELETE FROM chronicle_meta WHERE key IN ('history_dropped_at', 'history_base_op_id')")
        }
        try Self.truncateBlocks(after: point, libraryID: libraryID, in: db)
    }

    /// Puts this device's confirmed ops the store is giving up back into the outbox, with their
    /// ids, numbers and content, ahead of the ops queued since (their numbers are lower). An op
    /// queued under the number of one of them (written before the server refused that number as
    /// used again) moves after them where there is room, so that both are queued. Ops already
    /// queued are skipped. Returns how many were queued.
    static func queueAgain(_ own: [Op], in db: Database) throws -> Int {
        var seen = Set<UUID>()
        let unqueued = try own.filter { op in
            try seen.insert(op.opID).inserted && db.scalarInt("SELECT 1 FROM chronicle_outbox WHERE op_id = ?1", [.text(op.opID.lowercased)]) == nil
        }
        guard !unqueued.isEmpty else { return 0 }
        try makeRoomInQueue(for: unqueued.map(\.deviceSeq), in: db)
        let queue = try db.statement("""
            INSERT INTO chronicle_outbox(device_seq, op_id, type, version, entity_id, payload, device_time, base_seq)
            VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
            """)
        var queued = 0
        for op in unqueued where try db.scalarInt("SELECT 1 FROM chronicle_outbox WHERE op_id = ?1 OR device_seq = ?2",
                                                  [.text(op.opID.lowercased), .integer(op.deviceSeq)]) == nil {
            try queue.execute([.integer(op.deviceSeq), .text(op.opID.lowercased), .text(op.type), .integer(Int64(op.version)),
                               .text(op.entityID.lowercased), .text(CanonicalJSON.encode(op.payload)), .integer(op.deviceTime),
                               .integer(op.baseSeq)])
            queued += 1
        }
        return queued
    }

    /// Meta key: the seq of the snapshot of an earlier schema version the projection's state was
    /// carried over from (`SnapshotMigration`), where history before it was gone when the app
    /// was updated. Such a state lacks what only the log could give (who set a field that became
    /// `mergeOrAsk`), so it may differ from the server's; a rewind to 0 or a start from the
    /// server's snapshot takes the server's state and clears it.
    static let stateCarriedOverKey = "state_carried_over_from"

    /// Whether the projection's state was carried over from a snapshot of an earlier schema
    /// version (see `stateCarriedOverKey`): the sync engine then starts over from the server.
    public func stateCarriedOver() throws -> Bool {
        try read { db in try LogTables.meta(Self.stateCarriedOverKey, in: db).integerValue != nil }
    }

    /// Meta key: the seq of the server's snapshot this store started from, while its state still
    /// comes from it (a rewind below it removes it).
    static let serverSnapshotKey = "server_snapshot_seq"

    /// The seq of the server's snapshot this store's state comes from, if it started from one
    /// (and has not gone back before it since).
    public func serverSnapshotSeq() throws -> Int64? {
        try read { db in try LogTables.meta(Self.serverSnapshotKey, in: db).integerValue }
    }

    /// Meta key: the seq of the server's snapshot this store started from (`serverSnapshotKey`)
    /// where that snapshot was of an earlier schema version and its state was carried over here.
    static let serverSnapshotCarriedOverKey = "server_snapshot_carried_over"

    /// Whether the server's snapshot this store's state comes from was of an earlier schema
    /// version, its state carried over on this device: a server that has carried its own state
    /// over since (`PullPage.stateCarriedOverAt`), at that seq or later, may hold another state
    /// there, and the sync engine starts over from the server's.
    public func serverSnapshotCarriedOver() throws -> Bool {
        try read { db in try LogTables.meta(Self.serverSnapshotCarriedOverKey, in: db).integerValue != nil }
    }

    /// Meta key: the lowest seq at which a sync found that the server holds other ops than this
    /// store (or none), while the search for where the two agree has not ended in a rewind yet.
    static let disagreementKey = "disagreed_at"

    /// Remembers that the server holds other ops than this store from `seq` on (at the latest),
    /// before the search for where the two agree starts: a search cut short (the network went
    /// away in the middle of it) is taken up again next round, even where nothing else would
    /// show the disagreement again (the op at the cursor can match by chance once others' lost
    /// ops were pushed again). `rewind(toAgreedSeq:)` and a start from a snapshot forget it.
    public func noteDisagreement(at seq: Int64) throws {
        try writeTransaction { db in
            if let noted = try LogTables.meta(Self.disagreementKey, in: db).integerValue, noted <= seq { return }
            try LogTables.setMeta(Self.disagreementKey, .integer(max(0, seq)), in: db)
        }
    }

    /// The seq `noteDisagreement(at:)` recorded, while no rewind has settled it; nil if none.
    public func noticedDisagreement() throws -> Int64? {
        try read { db in try LogTables.meta(Self.disagreementKey, in: db).integerValue }
    }

    /// The incarnation of the server's copy of the library this store last synced with
    /// (`PullPage.incarnation`); nil before the first pull that named one.
    public func serverIncarnation() throws -> UUID? {
        try read { db in try LogTables.meta(Self.serverIncarnationKey, in: db).textValue.flatMap(UUID.init(uuidString:)) }
    }

    public func setServerIncarnation(_ incarnation: UUID) throws {
        try writeTransaction { db in try Self.setServerIncarnation(incarnation, in: db) }
    }

    /// Keeps `incarnation` (nil: none known). Where it replaces another one, the server's copy of
    /// the library was restored or salvaged, and may lack files it held: every file this store
    /// holds whole goes back into the upload queue, and the engine asks the server about each
    /// (`GET …/status`) and sends the ones it lacks, whoever added them here.
    static func setServerIncarnation(_ incarnation: UUID?, in db: Database) throws {
        let before = try LogTables.meta(serverIncarnationKey, in: db).textValue
        // Forgetting a known one (the next pull names it) may hide a change: asked about all the same.
        if let before, before != incarnation?.lowercased {
            try db.execute("UPDATE chronicle_blobs SET state = 'queued', uploaded = 0, done_at = NULL WHERE state IN ('uploaded', 'fetched')")
        }
        guard let incarnation else {
            try db.execute("DELETE FROM chronicle_meta WHERE key = ?1", [.text(serverIncarnationKey)])
            return
        }
        try LogTables.setMeta(serverIncarnationKey, .text(incarnation.lowercased), in: db)
    }

    static let serverIncarnationKey = "server_incarnation"

    static func forgetDisagreement(in db: Database) throws {
        try db.execute("DELETE FROM chronicle_meta WHERE key = ?1", [.text(disagreementKey)])
    }

    /// Numbers between the outbox's oldest op and the last deviceSeq that nothing accounts for
    /// (`accountedDeviceSeqs`) are recorded as given up. Returns how many.
    static func giveUpUnheldNumbers(in db: Database) throws -> Int {
        guard let first = try db.scalarInt("SELECT min(device_seq) FROM chronicle_outbox") else { return 0 }
        let last = try LogTables.meta("last_device_seq", in: db).integerValue ?? 0
        guard last > first else { return 0 }
        let held = try accountedDeviceSeqs(in: first...last, in: db)
        var skips = try deviceSeqSkips(in: db)
        var lost = 0
        var open: Int64?
        for n in first...(last + 1) {
            if n <= last, !held.contains(n) {
                if open == nil { open = n }
                lost += 1
            } else if let start = open {
                skips.append([start, n - 1])
                open = nil
            }
        }
        if lost > 0 { try setDeviceSeqSkips(skips, in: db) }
        return lost
    }

    /// The triggers that guard the outbox's numbering, set aside while ops go back into it with
    /// the numbers they had.
    static let requeueTriggers = ["chronicle_outbox_gap_free", "chronicle_outbox_advance", "chronicle_outbox_once"]

    /// Refused ops numbered after `deviceSeq` back into the outbox with their numbers and ids
    /// (their first refusal stays on record); inside the caller's transaction, with
    /// `requeueTriggers` set aside. Returns how many.
    static func queueRefusedAgain(after deviceSeq: Int64, in db: Database) throws -> Int {
        try db.execute("""
            INSERT INTO chronicle_outbox(device_seq, op_id, type, version, entity_id, payload, device_time, base_seq)
            SELECT device_seq, op_id, type, version, entity_id, payload, device_time, base_seq FROM chronicle_rejected r
            WHERE device_seq > ?1 AND NOT EXISTS (SELECT 1 FROM chronicle_outbox o WHERE o.device_seq = r.device_seq OR o.op_id = r.op_id)
            AND NOT EXISTS (SELECT 1 FROM chronicle_own_confirmed c WHERE c.op_id = r.op_id AND c.server_seq > ?2)
            """, [.integer(deviceSeq), .integer(try LogTables.sealedUpTo(in: db))])
        return db.changes
    }

    /// The server expects this device's op `last + 1` next (`device_seq_gap`), so it holds nothing
    /// of this device's numbered after `last`, refusals included: where this store holds ops
    /// refused after `last` that are not queued, the server lost those refusals (restored from a
    /// backup), or holds them under other numbers (this store is a copy from before its queue was
    /// numbered again). They go back into the outbox, to be answered again. One transaction;
    /// returns how many.
    public func queueRefusedAgain(after last: Int64) throws -> Int {
        let held = try read { db in
            try db.scalarInt("""
                SELECT 1 FROM chronicle_rejected r WHERE device_seq > ?1
                AND NOT EXISTS (SELECT 1 FROM chronicle_outbox o WHERE o.op_id = r.op_id) LIMIT 1
                """, [.integer(last)]) != nil
        }
        guard held else { return 0 }
        var queued = 0
        // The projection shows queued ops on top, in their order: it is rebuilt with these among them.
        _ = try rebuild(beforeReplay: { db in
            try Self.withTriggersAside(Self.requeueTriggers, in: db) {
                queued = try Self.queueRefusedAgain(after: last, in: db)
            }
            if queued > 0 { try LogTables.setMeta("acked_device_seq", .integer(0), in: db) }
        }, alsoInTransaction: nil)
        return queued
    }

    /// This device's last deviceSeq among the confirmed ops the store holds (in its log or in
    /// sealed segments: `chronicle_own_confirmed`), or 0.
    static func lastOwnDeviceSeq(in db: Database) throws -> Int64 {
        try db.scalarInt("SELECT max(device_seq) FROM chronicle_own_confirmed") ?? 0
    }

    /// Whether the op this store holds at `seq` is `opID`, looked up by id (in the log, or among
    /// the sealed op ids: nothing is decoded). Every seq after the store's history base holds an
    /// op it knows the id of, so there an id found elsewhere or nowhere means another op. At the
    /// base of a store that started from a snapshot, the op the server named there when the store
    /// started (`history_base_op_id`) is compared. Nil where the store cannot tell: past its
    /// cursor, or before its history (at its base, when it has no id for it).
    public func holdsConfirmed(_ opID: UUID, at seq: Int64) throws -> Bool? {
        try read { db in
            guard seq > 0, seq <= (try LogTables.meta("cursor", in: db).integerValue ?? 0) else { return nil }
            if let found = try Self.confirmedSeq(of: opID, in: db) { return found == seq }
            let base = try LogTables.historyBase(in: db)
            if seq > base { return false }
            if seq == base, let named = try LogTables.meta("history_base_op_id", in: db).textValue { return named == opID.lowercased }
            return nil
        }
    }

    /// Which op a confirmed op is: its id, its author and the server's time of it. Two ops can
    /// share an id (a device that reused another's: the server refuses the second as a clash, but
    /// after a restore from a backup the other one can land first), so an id alone does not say
    /// two logs agree. Nor does the same op at the same seq: a server that lost it and had it
    /// pushed again gave it another server time, and the projection folds the op by that time
    /// (`Materializer.createdTime`, `deletedTime`), so a store holding the earlier one goes back
    /// and takes the server's.
    public struct ConfirmedOpIdentity: Hashable, Sendable {
        public var opID: UUID
        public var deviceID: UUID
        public var serverTime: Int64?
        public init(opID: UUID, deviceID: UUID, serverTime: Int64?) {
            self.opID = opID
            self.deviceID = deviceID
            self.serverTime = serverTime
        }
    }

    /// The confirmed ops after `after` up to `upTo` that this store holds, by seq (from its log
    /// and sealed segments, which are decoded for it).
    public func confirmedOpIdentities(after: Int64, upTo: Int64) throws -> [Int64: ConfirmedOpIdentity] {
        let libraryID = self.libraryID
        return try read { db in
            var ids: [Int64: ConfirmedOpIdentity] = [:]
            try LogTables.forEachConfirmedOp(in: db, libraryID: libraryID, after: max(after, try LogTables.historyBase(in: db)), upTo: upTo) { op in
                if let seq = op.serverSeq { ids[seq] = ConfirmedOpIdentity(opID: op.opID, deviceID: op.deviceID, serverTime: op.serverTime) }
            }
            return ids
        }
    }

    /// Where this store must go back to, at the latest, when the server waits for this device's
    /// op `last + 1` (`device_seq_gap`); nil where nothing it holds shows that the server lost
    /// any of its ops. The server takes a device's ops in their order, so it holds none numbered
    /// after `last`:
    /// - an own op numbered after `last` that this store holds as confirmed (in its log, or a
    ///   sealed segment, decoded for it) was ordered by a copy of the library the server no
    ///   longer has (restored from a backup): its seq;
    /// - an op `last + 1` that the store does not hold at all (not queued, refused, given up or
    ///   confirmed) went with history it dropped past its horizon, at or before its history
    ///   base: the base (going back before it is starting over from what the server holds).
    public func seqOfOwnOpsTheServerLost(after last: Int64) throws -> Int64? {
        try read { db in
            let base = try LogTables.historyBase(in: db)
            // `last` is the server's word (Chronicle-Last-Device-Seq): nothing is numbered after Int64.max.
            if base > 0, last < Int64.max, last + 1 <= (try LogTables.meta("last_device_seq", in: db).integerValue ?? 0),
               try Self.accountedDeviceSeqs(in: (last + 1)...(last + 1), in: db).isEmpty {
                return base
            }
            // Own ops held, sealed or in the log, are all after the history base.
            return try db.scalarInt("SELECT min(server_seq) FROM chronicle_own_confirmed WHERE device_seq > ?1", [.integer(last)])
        }
    }

    /// The seq at which this store holds `opID` as confirmed (in its log, sealed, or before its
    /// history base where it had it), or nil.
    public func confirmedSeq(of opID: UUID) throws -> Int64? {
        try read { db in try Self.confirmedSeq(of: opID, in: db) }
    }

    static func confirmedSeq(of opID: UUID, in db: Database) throws -> Int64? {
        try db.scalarInt("SELECT server_seq FROM chronicle_op_ids WHERE op_id = \(UUIDBlobFunction.name)(?1)", [.text(opID.lowercased)])
    }

    /// Runs `body` with the named triggers dropped, and creates them again, as they were, after it
    /// (inside the caller's transaction: nothing else sees the store without them).
    static func withTriggersAside(_ names: [String], in db: Database, _ body: () throws -> Void) throws {
        var saved: [String] = []
        for name in names {
            guard let sql = try db.scalarText("SELECT sql FROM sqlite_schema WHERE type = 'trigger' AND name = ?1", [.text(name)]) else { continue }
            saved.append(sql)
            try db.execute("DROP TRIGGER \(name)")
        }
        try body()
        for sql in saved { try db.execute(sql) }
    }
}
