import ChronicleCore
import Foundation

// Applying the server's confirmed ops (pulled pages, bulk catch-up) to the log and the projection,
// this device's pending ops rebased on top.

/// What folding one confirmed batch did.
public struct ApplyResult: Sendable, Equatable {
    /// Ops appended to the confirmed log.
    public var applied: Int
    /// Of those, ops this device wrote that left the outbox.
    public var confirmedOwn: Int
    /// Pending ops replayed on top of the new confirmed state.
    public var rebased: Int
    /// The cursor after the batch.
    public var cursor: Int64
}

extension DeviceStore {
    static let outboxColumns = "device_seq, op_id, type, version, entity_id, payload, device_time, base_seq"

    /// Folds a batch of confirmed ops (what sync delivers) into the store, keeping
    /// pending local ops on top: rows with queued edits keep showing them.
    ///
    /// The batch must continue the log exactly (`serverSeq` = cursor + 1, + 2, …);
    /// one transaction: all of it lands or none. Cost is proportional to the
    /// batch and to the pending ops on the rows it touches, not to the library.
    @discardableResult
    public func applyConfirmed(_ ops: [Op]) throws -> ApplyResult {
        guard !ops.isEmpty else {
            return ApplyResult(applied: 0, confirmedOwn: 0, rebased: 0, cursor: try cursor())
        }
        return try writeTransaction { db in try fold(ops, in: db, indexing: try prepareSearchIndexing(in: db)) }
    }

    /// Appends a batch to the log and folds it into the projection, inside the caller's
    /// transaction, keeping the search indexes as `indexing` says (bulk apply defers them).
    /// `prepared`: the same ops' log blocks and statements, built ahead (bulk mode only).
    func fold(_ ops: [Op], in db: Database, indexing: SearchIndexing, prepared: PreparedBatch? = nil, seal: Bool = false) throws -> ApplyResult {
        let applier = applier(in: db, indexing: indexing)
        // Read before the append takes the device's own ops out of the outbox.
        let confirmsOwnHead = try confirmsOutboxHead(ops, in: db)
        let (cursor, own): (Int64, Int)
        if seal, let segments = prepared?.segments, try Self.logEndsAtSealedPrefix(in: db) {
            (cursor, own) = try appendSealed(ops, segments: segments, in: db)
        } else {
            (cursor, own) = try appendConfirmed(ops, in: db, blocks: prepared?.blocks)
        }

        // Rows that both carry pending ops and are touched by the batch go back to
        // their confirmed state first; their pending ops are replayed afterwards.
        let shadowed = try db.query("SELECT entity, id FROM chronicle_shadowed") { ShadowKey(entity: $0.text(0), id: $0.text(1)) }
        var rebase: [ShadowKey] = []
        // Nil: every op of the batch is folded; else only those on these rows.
        var foldOnly: Set<String>?
        if !shadowed.isEmpty {
            let touched = Set(ops.compactMap { op in materializer.entity(of: op).map { ShadowKey(entity: $0.name, id: op.entityID.lowercased) } })
            rebase = shadowed.filter(touched.contains)
            if confirmsOwnHead, rebase.count == touched.count {
                // The batch is the head of the outbox, so the rows already show it. A row with
                // nothing left queued is its confirmed state now: its shadow goes, and nothing is
                // folded or replayed there. Rows with ops still queued, and rows whose entity has
                // a `mergeOrAsk` field (they record the server's order, which a queued op lacks),
                // are rebased as usual.
                let queued = try rowsWithQueuedOps(Set(rebase.map(\.id)), in: db)
                let settled = rebase.filter { !queued.contains($0.id) && !recordsServerOrder($0.entity) }
                try forgetShadows(settled, in: db)
                let settledIDs = Set(settled.map(\.id))
                rebase = rebase.filter { !settledIDs.contains($0.id) }
                foldOnly = Set(rebase.map(\.id))
            }
            try restoreConfirmed(rebase, with: applier, in: db)
        }

        for (index, op) in ops.enumerated() where foldOnly?.contains(op.entityID.lowercased) ?? true {
            if let prepared { try applier.apply(op, steps: prepared.steps[index]) } else { try applier.apply(op) }
        }

        let rebased = try replayPending(on: Set(rebase.map(\.id)), with: applier, in: db)
        try applier.finish()
        return ApplyResult(applied: ops.count, confirmedOwn: own, rebased: rebased, cursor: cursor)
    }

    /// Checks that `ops` continue the log, appends them to it (as blocks: `blocks`, when the
    /// caller encoded them ahead, off the writer), takes this device's own ops out of the outbox
    /// and moves the cursor; the projection is left to the caller.
    /// Returns the new cursor and how many of the ops were this device's.
    func appendConfirmed(_ ops: [Op], in db: Database, blocks: [EncodedSegment]? = nil) throws -> (cursor: Int64, own: Int) {
        let cursor = try checkContinuesLog(ops, in: db)
        // The log and the ids first: their guard triggers make SQLite open a statement savepoint
        // per insert, and once FTS5 tables are written in this transaction every savepoint makes
        // FTS5 flush its pending terms to disk. Projection writes come after.
        try Self.recordConfirmed(ops, deviceID: deviceID, in: db)
        let blocks = try blocks ?? Self.encodeBlocks(ops[...], libraryID: libraryID)
        guard blocks.first?.firstSeq == ops.first?.serverSeq, blocks.last?.lastSeq == cursor else {
            throw ChronicleError(.invariantViolated, "The prepared log blocks do not hold the batch's ops.")
        }
        try Self.insertBlocks(blocks, in: db)
        let own = ops.filter { $0.deviceID == deviceID }.map { (opID: $0.opID.lowercased, deviceSeq: $0.deviceSeq) }
        try settle(own, cursor: cursor, in: db)
        return (cursor, own.count)
    }

    /// `appendConfirmed` for a log that holds nothing after its sealed prefix: the ops (encoded
    /// as `segments` off the writer) are stored as sealed segments after it instead of as log
    /// blocks. The segments must hold exactly `ops`.
    func appendSealed(_ ops: [Op], segments: [EncodedSegment], in db: Database) throws -> (cursor: Int64, own: Int) {
        let cursor = try checkContinuesLog(ops, in: db)
        guard segments.first?.firstSeq == ops.first?.serverSeq, segments.last?.lastSeq == cursor else {
            throw ChronicleError(.invariantViolated, "The prepared segments do not hold the batch's ops.")
        }
        try Self.recordConfirmed(ops, deviceID: deviceID, in: db)
        let now = clock.nowMilliseconds()
        for segment in segments {
            try storeSegment(segment, ops: [], now: now, in: db)
        }
        let own = ops.filter { $0.deviceID == deviceID }.map { (opID: $0.opID.lowercased, deviceSeq: $0.deviceSeq) }
        try settle(own, cursor: cursor, in: db)
        return (cursor, own.count)
    }

    /// Checks that confirmed `ops` continue the log (seqs, times, library); returns the cursor after them.
    private func checkContinuesLog(_ ops: [Op], in db: Database) throws -> Int64 {
        var cursor = try LogTables.meta("cursor", in: db).integerValue ?? 0
        for op in ops {
            guard let seq = op.serverSeq, op.serverTime != nil else {
                throw ChronicleError(.invariantViolated, "Confirmed op \(op.opID.lowercased) has no server sequence or time.")
            }
            guard seq == cursor + 1 else {
                throw ChronicleError(.logGap, "Confirmed ops must continue the log: expected server seq \(cursor + 1), got \(seq).")
            }
            guard op.libraryID == libraryID else {
                throw ChronicleError(.wrongLibrary, "Op \(op.opID.lowercased) belongs to library \(op.libraryID.lowercased), not this store's \(libraryID.lowercased).")
            }
            cursor = seq
        }
        return cursor
    }

    /// This device's ops now confirmed leave the outbox; the cursor moves. An op queued under
    /// another number than the one it was confirmed with (numbered again in a copy of this store
    /// that went on syncing, then this store restored from a backup older than that) leaves its
    /// queued number empty: the number is given up (`device_seq_skips`), and the queue behind it
    /// takes it when the server asks for it (`closeOutboxGap`). Numbers confirmed here past the
    /// last one the store wrote are taken as used (`takeConfirmedNumbers`).
    private func settle(_ own: [(opID: String, deviceSeq: Int64)], cursor: Int64, in db: Database) throws {
        var emptied: [Int64] = []
        for op in own {
            let queued = try db.query("DELETE FROM chronicle_outbox WHERE op_id = ?1 RETURNING device_seq", [.text(op.opID)]) { $0.int(0) }
            if let number = queued.first, number != op.deviceSeq { emptied.append(number) }
        }
        try Self.takeConfirmedNumbers(own.map(\.deviceSeq), in: db)
        if !emptied.isEmpty {
            try Self.setDeviceSeqSkips(try Self.deviceSeqSkips(in: db) + emptied.map { [$0, $0] }, in: db)
        }
        try LogTables.setMeta("cursor", .integer(cursor), in: db)
    }

    struct ShadowKey: Hashable { var entity: String; var id: String }

    /// Puts rows that pending ops sit on back to their confirmed state (from their shadow copies).
    func restoreConfirmed(_ keys: [ShadowKey], with applier: ProjectionApplier, in db: Database) throws {
        for key in keys {
            try applier.rewriting(entity: key.entity, id: key.id) {
                for sql in projection.shadowRestore(schema.entity(key.entity)!) { try db.execute(sql, [.text(key.id)]) }
            }
            try db.execute("DELETE FROM chronicle_shadowed WHERE entity = ?1 AND id = ?2", [.text(key.entity), .text(key.id)])
        }
    }

    /// Rebases one row after an op of this device left the outbox without being folded (refused,
    /// or found inside a snapshot): back to its confirmed state, its other queued ops replayed.
    /// A row no queued op touched is left alone.
    func rebaseRow(of op: Op, in db: Database) throws {
        guard let entity = materializer.entity(of: op) else { return }
        let id = op.entityID.lowercased
        guard try db.scalarInt("SELECT 1 FROM chronicle_shadowed WHERE entity = ?1 AND id = ?2", [.text(entity.name), .text(id)]) != nil else { return }
        let applier = applier(in: db, indexing: try prepareSearchIndexing(in: db))
        try restoreConfirmed([ShadowKey(entity: entity.name, id: id)], with: applier, in: db)
        _ = try replayPending(on: [id], with: applier, in: db)
        try applier.finish()
    }

    /// True when `ops` are exactly the first ops of this device's outbox, as queued (same ids,
    /// order, types, versions and payloads), and every one readable. Folding such an op as
    /// confirmed gives its row what folding it as queued gave it (unless the row records the
    /// server's order: `recordsServerOrder`), so a device confirming its own pushes need not
    /// fold them again. Not where the server's time changes a time the op writes (a delete,
    /// a create by a clock ahead of the server's: `Materializer.foldsAlikeQueuedAndConfirmed`).
    func confirmsOutboxHead(_ ops: [Op], in db: Database) throws -> Bool {
        guard !ops.isEmpty, ops.allSatisfy({ $0.deviceID == deviceID && materializer.entity(of: $0) != nil }) else { return false }
        guard ops.allSatisfy(materializer.foldsAlikeQueuedAndConfirmed) else { return false }
        let head = try db.query("SELECT \(Self.outboxColumns) FROM chronicle_outbox ORDER BY device_seq LIMIT ?1",
                                [.integer(Int64(ops.count))]) { try outboxOp($0) }
        guard head.count == ops.count else { return false }
        for (queued, confirmed) in zip(head, ops) {
            guard queued.opID == confirmed.opID, queued.deviceSeq == confirmed.deviceSeq, queued.type == confirmed.type,
                  queued.version == confirmed.version, queued.entityID == confirmed.entityID, queued.deviceTime == confirmed.deviceTime,
                  queued.baseSeq == confirmed.baseSeq, queued.payload == confirmed.payload else { return false }
        }
        return true
    }

    /// An entity with a `mergeOrAsk` field keeps the seq of each value's op in its rows (and
    /// conflicts by it): a queued op leaves it empty, so confirming one changes the row.
    func recordsServerOrder(_ entity: String) -> Bool {
        schema.entity(entity)?.fields.contains { $0.rule == .mergeOrAsk } ?? true
    }

    /// Ids as a JSON array, for `IN (SELECT value FROM json_each(?))`.
    static func jsonList(_ ids: Set<String>) -> Value {
        .text("[" + ids.map(CanonicalJSON.quote).joined(separator: ",") + "]")
    }

    /// Which of the entity ids still have ops in the outbox.
    func rowsWithQueuedOps(_ ids: Set<String>, in db: Database) throws -> Set<String> {
        guard !ids.isEmpty else { return [] }
        return Set(try db.query("SELECT DISTINCT entity_id FROM chronicle_outbox WHERE entity_id IN (SELECT value FROM json_each(?1))",
                                [Self.jsonList(ids)]) { $0.text(0) })
    }

    /// Rows whose live state is their confirmed state again: their shadow copies go.
    func forgetShadows(_ keys: [ShadowKey], in db: Database) throws {
        for key in keys {
            for sql in projection.shadowDrop(schema.entity(key.entity)!) { try db.execute(sql, [.text(key.id)]) }
            try db.execute("DELETE FROM chronicle_shadowed WHERE entity = ?1 AND id = ?2", [.text(key.entity), .text(key.id)])
        }
    }

    /// Replays the outbox's ops on the given entity ids, in device order, shadowing again as they go.
    func replayPending(on ids: Set<String>, with applier: ProjectionApplier, in db: Database) throws -> Int {
        guard !ids.isEmpty else { return 0 }
        var replayed = 0
        // Only these rows' ops are read (by the outbox's entity index): reading and decoding the
        // whole outbox for every batch made a device confirming its own long outbox (a big
        // push, pulled back in pages) do work quadratic in the outbox.
        let pending = try db.query("""
            SELECT \(Self.outboxColumns) FROM chronicle_outbox WHERE entity_id IN (SELECT value FROM json_each(?1)) ORDER BY device_seq
            """, [Self.jsonList(ids)]) { try outboxOp($0) }
        for op in pending {
            if let entity = materializer.entity(of: op) { try shadowIfNeeded(entity, op.entityID.lowercased, in: db) }
            try applier.apply(op)
            replayed += 1
        }
        return replayed
    }

    /// Decodes a row selected with `logColumns`.
    func logOp(_ row: Row) throws -> Op { try LogTables.logOp(row, libraryID: libraryID) }

    /// Decodes a row selected with `outboxColumns`.
    func outboxOp(_ row: Row) throws -> Op { try Self.outboxOp(row, libraryID: libraryID, deviceID: deviceID) }

    static func outboxOp(_ row: Row, libraryID: UUID, deviceID: UUID) throws -> Op {
        Op(opID: try LogTables.uuid(row, 1), libraryID: libraryID, deviceID: deviceID, deviceSeq: row.int(0),
           type: row.text(2), version: Int(row.int(3)), entityID: try LogTables.uuid(row, 4),
           payload: try row.withBytes(5) { try CanonicalJSON.decodePayload(utf8: $0) }, deviceTime: row.int(6), baseSeq: row.int(7))
    }

    /// The highest server sequence this store has applied.
    public func cursor() throws -> Int64 {
        try read { db in try LogTables.meta("cursor", in: db).integerValue ?? 0 }
    }

    /// Ops waiting to be confirmed, in device order.
    public func pendingOps() throws -> [Op] {
        try read { db in try db.query("SELECT \(Self.outboxColumns) FROM chronicle_outbox ORDER BY device_seq") { try outboxOp($0) } }
    }

    /// Confirmed ops, optionally for one entity, in server order (sealed segments included).
    public func confirmedOps(entity: UUID? = nil, after: Int64 = 0, limit: Int = Int.max) throws -> [Op] {
        try read { db in
            var ops: [Op] = []
            struct Enough: Error {}
            do {
                try LogTables.forEachConfirmedOp(in: db, libraryID: libraryID, after: after, entity: entity?.lowercased) { op in
                    ops.append(op)
                    if ops.count >= limit { throw Enough() }
                }
            } catch is Enough {}
            return ops
        }
    }
}
