import ChronicleCore
import Foundation

/// An op the server refused for good, kept so the app can tell the person what happened.
public struct SyncNotice: Sendable, Equatable {
    public var op: Op
    /// The server's stable code, e.g. `unknown_entity`.
    public var code: String
    /// The server's sentence.
    public var message: String
    /// The server's view of the entity when it refused the op (JSON), if it sent one.
    public var verdict: String?
    /// Milliseconds since 1970, by this device's clock.
    public var rejectedAt: Int64
    public var seen: Bool
}

/// What the store knows about syncing, for an honest status line.
public struct SyncState: Sendable, Equatable {
    /// Ops written here that the server has not confirmed back yet.
    public var unsent: Int64
    /// Of those, ops the server has not answered at all (the push queue).
    public var unacknowledged: Int64
    /// Highest serverSeq applied.
    public var cursor: Int64
    /// The server's head when last heard from (0 if never).
    public var serverHead: Int64
    public var lastSyncAt: Int64?
    public var lastAttemptAt: Int64?
    /// Why the last attempt failed; nil when it succeeded.
    public var lastError: String?
    public var unseenNotices: Int64

    /// True when the last attempt failed to reach the server.
    public var isOffline: Bool { lastError != nil }
}

extension DeviceStore {
    /// Outbox ops the server has not answered yet, in device order, at most `limit`; with
    /// `after`, only those past that deviceSeq (the next batch, read while the one before it
    /// is still waiting for its answer).
    public func unacknowledgedOps(after deviceSeq: Int64 = 0, limit: Int) throws -> [Op] {
        try read { db in
            let acked = try LogTables.meta("acked_device_seq", in: db).integerValue ?? 0
            return try db.query("SELECT \(Self.outboxColumns) FROM chronicle_outbox WHERE device_seq > ?1 ORDER BY device_seq LIMIT ?2",
                                [.integer(max(acked, deviceSeq)), .integer(Int64(limit))]) { try outboxOp($0) }
        }
    }

    /// Records that the server answered every op up to `deviceSeq`; the next push starts after it.
    /// Never moves backwards.
    public func recordAcknowledged(through deviceSeq: Int64) throws {
        try writeTransaction { db in
            let acked = try LogTables.meta("acked_device_seq", in: db).integerValue ?? 0
            if deviceSeq > acked { try LogTables.setMeta("acked_device_seq", .integer(deviceSeq), in: db) }
        }
    }

    /// Forgets acknowledgements past the confirmed log so every queued op is pushed again
    /// (the server answers repeats with their original result).
    public func resetAcknowledged() throws {
        try writeTransaction { db in try LogTables.setMeta("acked_device_seq", .integer(0), in: db) }
    }

    /// Called once a pull has caught up with the server's head: queued ops the server already
    /// acknowledged, at seqs that head has passed, should have arrived with it. Any still
    /// queued were lost by the server (its data restored from a backup) while this store's
    /// cursor still agrees with it; their acknowledgements are forgotten, so the next push sends
    /// them again (the server answers the ones it holds as duplicates). Returns how many.
    public func forgetAcknowledgementsTheLogMissed() throws -> Int {
        // Asked after every round's pull: a read, and a write only in the rare case.
        func missed(in db: Database) throws -> Int {
            let acked = try LogTables.meta("acked_device_seq", in: db).integerValue ?? 0
            return Int(try db.scalarInt("SELECT count(*) FROM chronicle_outbox WHERE device_seq <= ?1", [.integer(acked)]) ?? 0)
        }
        guard try read({ try missed(in: $0) }) > 0 else { return 0 }
        return try writeTransaction { db in
            let count = try missed(in: db)
            if count > 0 { try LogTables.setMeta("acked_device_seq", .integer(0), in: db) }
            return count
        }
    }

    /// The deviceSeqs given up by `renumberOutbox`, as `[[first, last], …]` (JSON in `chronicle_meta`).
    static let deviceSeqSkipsKey = "device_seq_skips"

    /// Numbers this device's unsent ops again after the server's: the server holds ops of this
    /// device up to deviceSeq `last` that this store never wrote, and refused a push at `reused`,
    /// a number it had already used (`device_seq_reused`). That happens when the store is an
    /// older copy of one that went on syncing: restored from a backup, or copied to a second
    /// machine that shares its device id. Every queued op from `reused` on keeps its op id,
    /// content and order and takes the next number after `last`; the next local write follows
    /// them. The numbers `reused…last` are recorded as given up (`verify` counts them). The ops
    /// the other copy wrote arrive with the next pull like any other device's. Returns how many
    /// ops were renumbered. One transaction.
    @discardableResult
    public func renumberOutbox(from reused: Int64, after last: Int64) throws -> Int {
        // The server named both numbers: within the protocol's bound they leave room for any queue.
        guard reused >= 1, last >= reused, last <= WireNumber.seqMax else {
            throw ChronicleError(.invalidValue, "Renumbering the outbox needs a reused deviceSeq of at least 1 and a last one at least as high, at most \(WireNumber.seqMax) (got \(reused) and \(last)).")
        }
        return try writeTransaction { db in try Self.renumberQueue(from: reused, after: last, in: db) }
    }

    /// `renumberOutbox` inside the caller's transaction.
    @discardableResult
    static func renumberQueue(from reused: Int64, after last: Int64, in db: Database) throws -> Int {
        let current = try LogTables.meta("last_device_seq", in: db).integerValue ?? 0
        let seqs = try db.query("SELECT device_seq FROM chronicle_outbox WHERE device_seq >= ?1 ORDER BY device_seq", [.integer(reused)]) { $0.int(0) }
        let skip: ClosedRange<Int64>
        if seqs.isEmpty {
            // Nothing queued from there on: the next write follows the server's last.
            guard last > current else { return 0 }
            skip = (current + 1)...last
        } else {
            skip = reused...last
            // Queued ops are immutable (a trigger refuses any change); this is the one change
            // allowed, so the trigger is set aside inside this transaction and put back as it was.
            // A refused op queued again takes its first refusal's record along to its new number,
            // so that the record and the queue never name one number for two ops.
            try withTriggersAside(["chronicle_outbox_fixed", "chronicle_rejected_fixed"], in: db) {
                try moveQueue(seqs, toFollow: last, in: db)
            }
        }
        var skips = try deviceSeqSkips(in: db)
        skips.append([skip.lowerBound, skip.upperBound])
        try setDeviceSeqSkips(skips, in: db)
        try LogTables.setMeta("last_device_seq", .integer(try queueEnd(after: last, count: seqs.count)), in: db)
        return seqs.count
    }

    /// This device's ops just confirmed under `numbers` (in the caller's transaction, after they
    /// left the outbox): where the store wrote no op under the highest of them yet, it is an older
    /// copy (restored from a backup) of a store that went on writing and syncing, and the server
    /// holds the other copy's ops there. The store takes the numbers up to it as used, as
    /// `renumberOutbox` does when the server refuses a number used again: its next write follows
    /// them (its queued ops are all numbered below them, and stay). Without this a write after such
    /// a pull took a number the store held confirmed, and once a restored server lost both, the
    /// store queued only one of the two again (seed 205 of 2,000 steps with app updates). An op
    /// queued before the pull under such a number stays where it is: the server refuses it as
    /// `device_seq_reused` and the queue moves after the server's last then (moving it here could
    /// only lower the numbers of ops queued after it, which the server may hold).
    static func takeConfirmedNumbers(_ numbers: [Int64], in db: Database) throws {
        guard let highest = numbers.max() else { return }
        // A number past the protocol's bound is no op this device wrote: taking it would leave no
        // number for the next write. The pull that carried it fails, and nothing of it is applied.
        guard highest <= WireNumber.seqMax else {
            throw ChronicleError(.malformedSegment, "The server confirmed an op of this device under deviceSeq \(highest), past \(WireNumber.seqMax); this device numbers its ops from 1, one at a time.")
        }
        let last = try LogTables.meta("last_device_seq", in: db).integerValue ?? 0
        if highest > last { try renumberQueue(from: last + 1, after: highest, in: db) }
    }

    /// Before own ops numbered `numbers` go back into the outbox (a rewind), queued ops under
    /// those numbers (written after this store, restored from a backup, pulled them, and before
    /// the server answered with `device_seq_reused`) move after the highest of them with the
    /// queued ops between, in their order, where that leaves every number as high as it was and
    /// below the next queued op's; and the next write follows them. Otherwise nothing changes.
    /// In the caller's transaction.
    static func makeRoomInQueue(for numbers: [Int64], in db: Database) throws {
        guard let highest = numbers.max() else { return }
        let own = Set(numbers)
        let queued = try db.query("SELECT device_seq FROM chronicle_outbox ORDER BY device_seq") { $0.int(0) }
        guard let clash = queued.first(where: own.contains) else { return }
        let moving = queued.filter { $0 >= clash && $0 <= highest }
        if let next = queued.first(where: { $0 > highest }), highest + Int64(moving.count) >= next { return }
        // A refused op queued again keeps its refusal's record under its number: left as it is.
        let bounds: [Value] = [.integer(clash), .integer(highest)]
        if try db.scalarInt("""
            SELECT 1 FROM chronicle_rejected r JOIN chronicle_outbox o ON o.op_id = r.op_id
            WHERE o.device_seq BETWEEN ?1 AND ?2 LIMIT 1
            """, bounds) != nil { return }
        // The new numbers lie above every moving one and below the next queued op: no two meet.
        try withTriggersAside(["chronicle_outbox_fixed"], in: db) {
            let move = try db.statement("UPDATE chronicle_outbox SET device_seq = ?1 WHERE device_seq = ?2")
            for (rank, old) in moving.enumerated().reversed() {
                try move.execute([.integer(highest + 1 + Int64(rank)), .integer(old)])
            }
        }
        let last = try LogTables.meta("last_device_seq", in: db).integerValue ?? 0
        try LogTables.setMeta("last_device_seq", .integer(max(last, highest + Int64(moving.count))), in: db)
    }

    /// The server expects this device's op `last + 1` next, and the queue after `last` does not
    /// hold every number from there on: numbers this store holds no op for (not queued, not
    /// refused, not confirmed in its log or a sealed segment). Either their content went with
    /// history the store dropped past its horizon and the server then lost (restored from a
    /// backup), so they can never be sent again, or they were given up (`device_seq_skips`: the
    /// op was confirmed under another number, or went with the server's data in a rewind). The
    /// queued ops keep their ids, content and order and take the numbers from `last + 1` on;
    /// given-up numbers from there on are forgotten (they are used again). Returns how many of
    /// the numbers closed over were lost here (not given up before), or nil where nothing changed
    /// (the queue holds every number, or the gap is not of that kind). One transaction.
    public func closeOutboxGap(after last: Int64) throws -> Int? {
        try writeTransaction { db -> Int? in
            let seqs = try db.query("SELECT device_seq FROM chronicle_outbox WHERE device_seq > ?1 ORDER BY device_seq",
                                    [.integer(max(0, last))]) { $0.int(0) }
            guard last >= 0, last <= WireNumber.seqMax, let end = seqs.last, end > last + Int64(seqs.count) else { return nil }
            // Refused ops after `last` must be queued again (the rewind did), so that no refusal's
            // number is taken by another op.
            if try db.scalarInt("""
                SELECT 1 FROM chronicle_rejected r WHERE device_seq > ?1
                AND NOT EXISTS (SELECT 1 FROM chronicle_outbox o WHERE o.op_id = r.op_id) LIMIT 1
                """, [.integer(last)]) != nil { return nil }
            // Own ops held as confirmed (in the log or sealed) numbered after `last`: not that kind of gap.
            if try db.scalarInt("SELECT 1 FROM chronicle_own_confirmed WHERE device_seq > ?1 LIMIT 1", [.integer(last)]) != nil { return nil }
            // The numbers closed over that nothing gave up before are lost here.
            let queued = Set(seqs)
            let givenUp = try Self.deviceSeqSkips(in: db)
            let lost = ((last + 1)...end).filter { n in !queued.contains(n) && !givenUp.contains { $0.count == 2 && $0[0] <= n && n <= $0[1] } }.count
            // A refused op queued again keeps its first refusal's record, under its new number too,
            // so that the record and the queue never name one number for two ops.
            try Self.withTriggersAside(["chronicle_outbox_fixed", "chronicle_rejected_fixed"], in: db) {
                try Self.moveQueue(seqs, toFollow: last, in: db)
            }
            let skips = try Self.deviceSeqSkips(in: db).compactMap { range -> [Int64]? in
                guard range.count == 2, range[0] <= last else { return nil }
                return [range[0], min(range[1], last)]
            }
            try Self.setDeviceSeqSkips(skips, in: db)
            try LogTables.setMeta("last_device_seq", .integer(try Self.queueEnd(after: last, count: seqs.count)), in: db)
            try LogTables.setMeta("acked_device_seq", .integer(0), in: db)
            return lost
        }
    }

    /// The queued ops numbered `seqs` (ascending) take the numbers from `last + 1` on, in their
    /// order; the refusal record of any of them (a refused op queued again) follows it to its new
    /// number. Inside the caller's transaction, with `chronicle_outbox_fixed` and
    /// `chronicle_rejected_fixed` set aside.
    static func moveQueue(_ seqs: [Int64], toFollow last: Int64, in db: Database) throws {
        guard let first = seqs.first else { return }
        _ = try queueEnd(after: last, count: seqs.count)   // every new number fits before any is written
        // Negative first, so that no new number meets an old one on the way.
        try db.execute("UPDATE chronicle_rejected SET device_seq = -device_seq WHERE op_id IN (SELECT op_id FROM chronicle_outbox WHERE device_seq >= ?1)",
                       [.integer(first)])
        try db.execute("UPDATE chronicle_outbox SET device_seq = -device_seq WHERE device_seq >= ?1", [.integer(first)])
        let move = try db.statement("UPDATE chronicle_outbox SET device_seq = ?1 WHERE device_seq = ?2")
        for (rank, old) in seqs.enumerated() {
            try move.execute([.integer(last + 1 + Int64(rank)), .integer(-old)])
        }
        try db.execute("""
            UPDATE chronicle_rejected SET device_seq = (SELECT o.device_seq FROM chronicle_outbox o WHERE o.op_id = chronicle_rejected.op_id)
            WHERE device_seq < 0
            """)
    }

    /// The number of the last of `count` ops numbered after `last`, which a server may have named:
    /// past Int64 it is refused (the transaction rolls back, the queue stays as it was), never a trap.
    static func queueEnd(after last: Int64, count: Int) throws -> Int64 {
        guard let end = WireNumber.sum(last, Int64(count)) else {
            throw ChronicleError(.invalidValue, "The queue of \(count) ops cannot be numbered after \(last): the numbers would pass \(Int64.max).")
        }
        return end
    }

    /// The ranges `renumberOutbox` gave up, oldest first.
    static func deviceSeqSkips(in db: Database) throws -> [[Int64]] {
        guard let text = try LogTables.meta(deviceSeqSkipsKey, in: db).textValue else { return [] }
        return try JSONDecoder().decode([[Int64]].self, from: Data(text.utf8))
    }

    static func setDeviceSeqSkips(_ skips: [[Int64]], in db: Database) throws {
        try LogTables.setMeta(deviceSeqSkipsKey, .text(String(decoding: try JSONEncoder().encode(skips), as: UTF8.self)), in: db)
    }

    /// The numbers from `run` that this device's outbox accounts for: queued, refused, given up
    /// (`device_seq_skips`), or confirmed as this device's op, in the log or in sealed history
    /// (a pull's pages are sealed on arrival). `verify` checks that none is missing; a rewind past
    /// lost history gives up the ones that are.
    static func accountedDeviceSeqs(in run: ClosedRange<Int64>, in db: Database) throws -> Set<Int64> {
        let bounds: [Value] = [.integer(run.lowerBound), .integer(run.upperBound)]
        var covered = Set(try db.query("SELECT device_seq FROM chronicle_outbox WHERE device_seq BETWEEN ?1 AND ?2", bounds) { $0.int(0) })
        covered.formUnion(try db.query("SELECT device_seq FROM chronicle_rejected WHERE device_seq BETWEEN ?1 AND ?2", bounds) { $0.int(0) })
        // Own ops confirmed, in the log or in sealed history.
        covered.formUnion(try db.query("SELECT device_seq FROM chronicle_own_confirmed WHERE device_seq BETWEEN ?1 AND ?2", bounds) { $0.int(0) })
        for range in try deviceSeqSkips(in: db) where range.count == 2 {
            let low = max(range[0], run.lowerBound), high = min(range[1], run.upperBound)
            if low <= high { covered.formUnion(low...high) }
        }
        return covered
    }

    /// Counts a failed attempt on the ops at the head of the queue.
    public func recordPushFailure(deviceSeqs: ClosedRange<Int64>, error: String) throws {
        try writeTransaction { db in
            try db.execute("UPDATE chronicle_outbox SET attempts = attempts + 1, last_error = ?1 WHERE device_seq BETWEEN ?2 AND ?3",
                           [.text(error), .integer(deviceSeqs.lowerBound), .integer(deviceSeqs.upperBound)])
        }
    }

    /// The server refused `opID` for good: the op leaves the outbox for the rejected
    /// list, and the row it touched goes back to its confirmed state with this
    /// device's other pending ops on it replayed. One transaction.
    /// - Returns: false if the op was no longer queued (already settled).
    @discardableResult
    public func reject(_ opID: UUID, code: String, message: String, verdict: String?) throws -> Bool {
        let now = clock.nowMilliseconds()
        return try writeTransaction { db in
            let key = opID.lowercased
            let found = try db.query("SELECT \(Self.outboxColumns) FROM chronicle_outbox WHERE op_id = ?1", [.text(key)]) { try outboxOp($0) }
            guard let op = found.first else { return false }
            // An op refused before and queued again (`rewind(toAgreedSeq:)`) keeps its first record.
            try db.execute("""
                INSERT OR IGNORE INTO chronicle_rejected(device_seq, op_id, type, version, entity_id, payload, device_time, base_seq,
                                                         code, message, verdict, rejected_at)
                SELECT device_seq, op_id, type, version, entity_id, payload, device_time, base_seq, ?2, ?3, ?4, ?5
                FROM chronicle_outbox WHERE op_id = ?1
                """, [.text(key), .text(code), .text(message), verdict.map(Value.text) ?? .null, .integer(now)])
            try db.execute("DELETE FROM chronicle_outbox WHERE op_id = ?1", [.text(key)])
            let acked = try LogTables.meta("acked_device_seq", in: db).integerValue ?? 0
            if op.deviceSeq > acked { try LogTables.setMeta("acked_device_seq", .integer(op.deviceSeq), in: db) }

            try rebaseRow(of: op, in: db)
            return true
        }
    }

    /// The refusals that stand: a refused op queued again after the server lost data
    /// (`rewind(toAgreedSeq:)`) is not one while it waits for its answer, nor once the server took
    /// it (this device's op, at its number, in the log; another device's op under the same id, an
    /// `op_id_conflict`, leaves the refusal standing; one taken and already sealed keeps its notice).
    static let standingRefusals = """
        chronicle_rejected r WHERE NOT EXISTS (SELECT 1 FROM chronicle_outbox o WHERE o.op_id = r.op_id)
        AND NOT EXISTS (SELECT 1 FROM chronicle_own_confirmed c WHERE c.op_id = r.op_id AND c.device_seq = r.device_seq
                        AND c.server_seq > max(coalesce(\(StoreFormat.sealedEnd), 0),
                                               coalesce((SELECT value FROM chronicle_meta WHERE key = 'history_base_seq'), 0)))
        """

    /// Ops the server rejected, newest first.
    public func notices(unseenOnly: Bool = false, limit: Int = 1000) throws -> [SyncNotice] {
        try read { db in
            let filter = unseenOnly ? " AND seen = 0" : ""
            return try db.query("""
                SELECT \(Self.outboxColumns), code, message, verdict, rejected_at, seen
                FROM \(Self.standingRefusals)\(filter) ORDER BY device_seq DESC LIMIT ?1
                """, [.integer(Int64(limit))]) { row in
                SyncNotice(op: try outboxOp(row), code: row.text(8), message: row.text(9), verdict: row.optionalText(10),
                           rejectedAt: row.int(11), seen: row.int(12) != 0)
            }
        }
    }

    public func markNoticesSeen() throws {
        try writeTransaction { db in try db.execute("UPDATE chronicle_rejected SET seen = 1 WHERE seen = 0") }
    }

    /// Records the end of a sync attempt: success (clears the error, stamps the time) or the reason it failed.
    public func recordSyncAttempt(error: String?, serverHead: Int64? = nil) throws {
        let now = clock.nowMilliseconds()
        try writeTransaction { db in
            try LogTables.setMeta("last_attempt_at", .integer(now), in: db)
            if let error {
                try LogTables.setMeta("last_sync_error", .text(error), in: db)
            } else {
                try LogTables.setMeta("last_sync_at", .integer(now), in: db)
                try db.execute("DELETE FROM chronicle_meta WHERE key = 'last_sync_error'")
            }
            if let serverHead { try LogTables.setMeta("server_head", .integer(serverHead), in: db) }
        }
    }

    public func syncState() throws -> SyncState {
        try read { db in
            let meta = Dictionary(uniqueKeysWithValues: try db.query("SELECT key, value FROM chronicle_meta") { ($0.text(0), $0.value(1)) })
            let acked = meta["acked_device_seq"]?.integerValue ?? 0
            return SyncState(
                unsent: try db.scalarInt("SELECT count(*) FROM chronicle_outbox") ?? 0,
                unacknowledged: try db.scalarInt("SELECT count(*) FROM chronicle_outbox WHERE device_seq > ?1", [.integer(acked)]) ?? 0,
                cursor: meta["cursor"]?.integerValue ?? 0,
                serverHead: meta["server_head"]?.integerValue ?? 0,
                lastSyncAt: meta["last_sync_at"]?.integerValue,
                lastAttemptAt: meta["last_attempt_at"]?.integerValue,
                lastError: meta["last_sync_error"]?.textValue,
                unseenNotices: try db.scalarInt("SELECT count(*) FROM \(Self.standingRefusals) AND seen = 0") ?? 0)
        }
    }

    /// Binds a store that has never synced to the server's library (what `chronicle login` does):
    /// queued ops take the new library id with them. Refused once the store holds confirmed ops
    /// of another library.
    public static func bindLibrary(at path: String, to library: UUID) throws {
        let store = try DeviceStore.open(at: path)
        if store.libraryID == library { return }
        try store.performUpkeep()
        try store.writeTransaction { db in
            if try LogTables.confirmedCount(in: db) > 0 {
                throw ChronicleError(.wrongLibrary, "\(path) already holds library \(store.libraryID.lowercased); it cannot join library \(library.lowercased). Create a new store for it.")
            }
            try LogTables.setMeta("library_id", .text(library.lowercased), in: db)
        }
    }
}

extension DeviceStore {
    /// Caps the store file at `pages` pages (`PRAGMA max_page_count`), so writes past it
    /// fail as on a full disk (`disk_full`, nothing written). For fault tests and the
    /// simulator; `nil` lifts the cap.
    public func limitFileSize(pages: Int?) throws {
        try writer.withLock { db in
            try db.execute("PRAGMA max_page_count = \(pages ?? 1_073_741_823)")
        }
    }

    /// Pages the store file uses now (`PRAGMA page_count`).
    public func pageCount() throws -> Int {
        try writer.withLock { db in Int(try db.scalarInt("PRAGMA page_count") ?? 0) }
    }
}
