import ChronicleCore
import Foundation

extension DeviceStore {
    /// Starts the store over from a server snapshot: what a new device does on a big
    /// library, and what a device does when it was away longer than the server's
    /// retention horizon. One transaction.
    ///
    /// The projection becomes the snapshot's state with this device's queued ops replayed
    /// on top (the outbox is kept, and pushed afterwards); confirmed ops the store had up
    /// to the snapshot leave the log (their ids are kept so each still applies at most
    /// once), and history now begins after `snapshot.seq`. Pulling continues from there.
    public func bootstrap(from snapshot: Snapshot) throws {
        try bootstrap(from: SnapshotFrame(snapshot))
    }

    /// `bootstrap(from:)` reading the snapshot's frame as it goes (a download in a file):
    /// rows go into the projection as they are decoded and the frame is kept as it came,
    /// so memory stays flat whatever the library's size. A damaged frame (its checksum is
    /// checked at its end) rolls everything back. Returns the snapshot's seq.
    ///
    /// `tail`: confirmed ops right after the snapshot (from its seq + 1, gap-free), already
    /// fetched. They join the log in the same transaction and are folded before the
    /// indexes are built, instead of each updating the search indexes afterwards.
    ///
    /// `baseOpID`: the op the server holds at the snapshot's seq (the first tail pull names it,
    /// `PullPage.afterOpID`). The store keeps it, so that a server that later lost that history
    /// (restored from a backup) is found out at the store's cursor even before any op follows it.
    ///
    /// `incarnation`: the incarnation of the server's file that first page named
    /// (`PullPage.incarnation`). Kept, so that the next pull compares it with the server's; without
    /// it the store took the next pull's for its own, and a server salvaged or restored below the
    /// snapshot in between went unnoticed where that pull came after it (damage soak seed 1138:
    /// the store kept the state of the history the server lost, beneath all the ops it pulled).
    @discardableResult
    public func bootstrap(from frame: SnapshotFrame, tail: [Op] = [], baseOpID: UUID? = nil, incarnation: UUID? = nil) throws -> Int64 {
        try writeTransaction(spillToFiles: true, largeCommit: true) { db in
            let cursor = try LogTables.meta("cursor", in: db).integerValue ?? 0
            try db.execute("PRAGMA cache_size = -\(Self.bulkCacheKilobytes)")
            defer { try? db.execute("PRAGMA cache_size = -\(Database.Options.defaultCacheKilobytes)") }
            var loader = SnapshotLoader(store: self, db: db, cursor: cursor, baseOpID: baseOpID, incarnation: incarnation)
            let header = try Self.readOnAnotherThread(frame, into: &loader)
            let seq = header.seq
            
            // The snapshot as it came: history may only be dropped where one covers it. The frame
            // ends the row (store format v4), so its zeroblob is reserved without being built in memory.
            let frameBytes = try frame.byteCount()
            try db.execute("INSERT OR REPLACE INTO chronicle_snapshots(seq, state_digest, body_bytes, created_at, body) VALUES (?1, '', 0, ?3, zeroblob(?2))",
                           [.integer(seq), .integer(Int64(frameBytes)), .integer(clock.nowMilliseconds())])
            try db.writeBlob(table: "chronicle_snapshots", column: "body", rowid: seq) { write in
                try frame.forEachPiece { try write($0) }
            }
            try db.execute("DELETE FROM chronicle_segments WHERE last_seq <= ?1", [.integer(seq)])
            try db.execute("DELETE FROM chronicle_snapshots WHERE seq < ?1", [.integer(seq)])

            // The tail continues the log from the snapshot (its checks are the log's own).
            if !tail.isEmpty { _ = try appendConfirmed(tail, in: db) }

            // The tail's ops and queued ops on top, then the indexes, each built once.
            _ = try ProjectionTables.replay(from: db, into: db, materializer, projection, after: seq, upTo: nil, includePending: true, progress: nil)
            // The index builds run with a small page cache (`rebuildSearchIndexes` sets it): SQLite
            // sizes an index build's in-memory sort by it, so the sorts spill to their temporary files.
            for statement in projection.searchStatements { try db.execute(statement) }
            try rebuildSearchIndexes(in: db, writerFirst: projection.tableStatements.filter { $0.hasPrefix("CREATE INDEX") })
            return seq
        }
    }

    /// One thing a snapshot read hands its visitor.
    enum SnapshotEvent: Sendable {
        case header(SnapshotHeader)
        case table(name: String, columns: [String], rowCount: Int)
        case row([Value])
    }

    /// `SnapshotCodec.read(frame, into: &visitor)` with the reading on another thread: the
    /// frame is read, decompressed and decoded there while this thread hands the rows to
    /// `visitor` (the writer inserting them), in the same order and with the same errors; a
    /// damaged frame still fails only after the rows, so the caller's transaction must stay
    /// open until this returns. Decoding was about a tenth of a bootstrap's time.
    /// Either side failing stops both; the reading thread is waited for before this returns.
    static func readOnAnotherThread<V: SnapshotVisitor>(_ frame: SnapshotFrame, into visitor: inout V) throws -> SnapshotHeader {
        let result = Locked<SnapshotHeader?>(nil)
        try PrefetchChannel<SnapshotEvent>.stream(capacity: 4, produce: { channel in
            var forwarder = SnapshotForwarder(channel: channel)
            let header = try SnapshotCodec.read(frame, into: &forwarder)
            try forwarder.flush()
            result.withLock { $0 = header }
        }, consume: { event in
            switch event {
            case .header(let header): try visitor.header(header)
            case .table(let name, let columns, let rowCount): try visitor.table(name, columns: columns, rowCount: rowCount)
            case .row(let values): try visitor.row(values)
            }
        })
        guard let header = result.withLock({ $0 }) else {
            throw ChronicleError(.malformedSnapshot, "The snapshot ended before its header was read.")
        }
        return header
    }

    /// Checks a snapshot against this store as it is read (`ProjectionFiller`), starts the store
    /// over at its header, and inserts the rows as they come (inside the caller's transaction).
    private struct SnapshotLoader: SnapshotVisitor {
        let store: DeviceStore
        let db: Database
        let cursor: Int64
        let baseOpID: UUID?
        let incarnation: UUID?
        var filler: ProjectionFiller

        init(store: DeviceStore, db: Database, cursor: Int64, baseOpID: UUID?, incarnation: UUID?) {
            self.store = store
            self.db = db
            self.cursor = cursor
            self.baseOpID = baseOpID
            self.incarnation = incarnation
            // A snapshot of an earlier version of the schema (the server not updated yet) has its state carried over.
            filler = ProjectionFiller(db: db, projection: store.projection, libraryID: store.libraryID, migrating: true)
        }

        mutating func header(_ header: SnapshotHeader) throws {
            try filler.header(header)
            guard header.seq >= cursor else {
                throw ChronicleError(.invariantViolated, "The snapshot at seq \(header.seq) is older than this store's cursor \(cursor); pull instead.")
            }
            let seq = header.seq
            let projection = store.projection
            try LogTables.setMeta("history_base_seq", .integer(seq), in: db)
            try LogTables.setMeta("history_dropped_at", .integer(store.clock.nowMilliseconds()), in: db)
            if let baseOpID {
                try LogTables.setMeta("history_base_op_id", .text(baseOpID.lowercased), in: db)
            } else {
                try db.execute("DELETE FROM chronicle_meta WHERE key = 'history_base_op_id'")
            }
            // The log's ops up to the snapshot go (their ids stay); this device's among them are no
            // longer held, as behind any history base.
            try db.execute("DELETE FROM chronicle_log_blocks WHERE last_seq <= ?1", [.integer(seq)])
            try db.execute("DELETE FROM chronicle_own_confirmed WHERE server_seq <= ?1", [.integer(seq)])
            try LogTables.setMeta("cursor", .integer(seq), in: db)
            // History starts over here: a disagreement noted in what went before is settled, and the
            // incarnation of the server's file is the one the snapshot's tail named (where none was
            // given, the one the next pull names).
            try DeviceStore.forgetDisagreement(in: db)
            try db.execute("DELETE FROM chronicle_meta WHERE key = ?1", [.text(DeviceStore.stateCarriedOverKey)])
            try LogTables.setMeta(DeviceStore.serverSnapshotKey, .integer(seq), in: db)
            // A snapshot of an earlier schema version (the server not updated yet) gives a state
            // carried over here, which the server's own carry-over, when it is updated, may not
            // match even at this seq (it may carry over from an earlier snapshot and replay up to
            // it, which knows more): the sync engine then starts over from the server's snapshot.
            if filler.migratedFrom != nil {
                try LogTables.setMeta(DeviceStore.serverSnapshotCarriedOverKey, .integer(seq), in: db)
            } else {
                try db.execute("DELETE FROM chronicle_meta WHERE key = ?1", [.text(DeviceStore.serverSnapshotCarriedOverKey)])
            }
            try DeviceStore.setServerIncarnation(incarnation, in: db)
            // Every queued op is pushed again: the answers say which ones the snapshot already holds.
            try LogTables.setMeta("acked_device_seq", .integer(0), in: db)

            // The projection starts empty, without its indexes (built once, after the rows).
            try db.withoutDefensive {
                for (kind, name) in projection.droppableObjects { try db.execute("DROP \(kind) IF EXISTS \(ProjectionSchema.quoted(name))") }
            }
            try db.execute("DELETE FROM chronicle_shadowed")
            for statement in projection.tableStatements where !statement.hasPrefix("CREATE INDEX") { try db.execute(statement) }
        }

        mutating func table(_ name: String, columns: [String], rowCount: Int) throws {
            try filler.table(name, columns: columns, rowCount: rowCount)
        }

        mutating func row(_ values: [Value]) throws {
            try filler.row(values)
        }
    }

    /// The server answered a queued op as a duplicate ordered at `seq`, inside the
    /// snapshot this store started from: the op is confirmed but will never come back in
    /// a pull. It leaves the outbox, and its row goes back to the confirmed (snapshot)
    /// state with the other queued ops replayed. Returns false if it was not queued.
    @discardableResult
    public func confirmInSnapshot(_ opID: UUID, serverSeq seq: Int64) throws -> Bool {
        try writeTransaction { db in
            let key = opID.lowercased
            guard seq >= 1, seq <= (try LogTables.historyBase(in: db)),
                  let op = try db.query("SELECT \(Self.outboxColumns) FROM chronicle_outbox WHERE op_id = ?1", [.text(key)], { try outboxOp($0) }).first else {
                return false
            }
            try db.statement("INSERT OR IGNORE INTO chronicle_op_ids(op_id, server_seq) VALUES (?1, ?2)")
                .execute([.null, .integer(seq)], uuid: opID, at: 1)
            try db.execute("DELETE FROM chronicle_outbox WHERE op_id = ?1", [.text(key)])
            try rebaseRow(of: op, in: db)
            return true
        }
    }

    /// Where this store's history begins: 1, or the seq after a horizon dropped older history
    /// (or the snapshot the store started from), with when that happened.
    public func historyStart() throws -> (seq: Int64, droppedAt: Int64?) {
        try read { db in
            (try LogTables.historyBase(in: db) + 1, try LogTables.meta("history_dropped_at", in: db).integerValue)
        }
    }

    /// The seq before which this store has no history (0 unless it started from a snapshot
    /// or a compaction horizon dropped older history).
    public func historyBaseSeq() throws -> Int64 {
        try read { db in try LogTables.historyBase(in: db) }
    }
}

/// Hands each snapshot event, in chunks, to the writer (`DeviceStore.readOnAnotherThread`).
private struct SnapshotForwarder: SnapshotVisitor {
    let channel: PrefetchChannel<DeviceStore.SnapshotEvent>
    var chunk: [DeviceStore.SnapshotEvent] = []

    init(channel: PrefetchChannel<DeviceStore.SnapshotEvent>) { self.channel = channel }

    mutating func add(_ event: DeviceStore.SnapshotEvent) throws {
        chunk.append(event)
        if chunk.count == LogTables.prefetchChunkOps { try flush() }
    }

    mutating func flush() throws {
        guard !chunk.isEmpty else { return }
        try channel.put(chunk)
        chunk = []
        chunk.reserveCapacity(LogTables.prefetchChunkOps)
    }

    mutating func header(_ header: SnapshotHeader) throws { try add(.header(header)) }
    mutating func table(_ name: String, columns: [String], rowCount: Int) throws {
        try add(.table(name: name, columns: columns, rowCount: rowCount))
    }
    mutating func row(_ values: [Value]) throws { try add(.row(values)) }
}
