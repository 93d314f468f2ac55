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
        try writeTransaction { db in
            let cursor = try Self.meta("cursor", in: db).integerValue ?? 0
            guard snapshot.seq >= cursor else {
                throw ChronicleError(.invariantViolated, "The snapshot at seq \(snapshot.seq) is older than this store's cursor \(cursor); pull instead.")
            }
            try db.execute("PRAGMA cache_size = -\(Self.bulkCacheKilobytes)")
            defer { try? db.execute("PRAGMA cache_size = -\(Database.Options.defaultCacheKilobytes)") }
            // The snapshot first: history may only be dropped where one covers it.
            try db.statement("INSERT OR REPLACE INTO chronicle_snapshots(seq, body, state_digest, body_bytes, created_at) VALUES (?1, ?2, '', ?3, ?4)")
                .execute([.integer(snapshot.seq), .null, .integer(0), .integer(clock.nowMilliseconds())],
                         blob: SnapshotCodec.encode(snapshot), at: 2)
            try Self.setMeta("history_base_seq", .integer(snapshot.seq), in: db)
            try Self.setMeta("history_dropped_at", .integer(clock.nowMilliseconds()), in: db)
            try db.execute("""
                INSERT OR IGNORE INTO chronicle_sealed_ops(op_id, server_seq, device_id)
                SELECT op_id, server_seq, device_id FROM chronicle_log WHERE server_seq <= ?1
                """, [.integer(snapshot.seq)])
            try db.execute("DELETE FROM chronicle_log WHERE server_seq <= ?1", [.integer(snapshot.seq)])
            try db.execute("DELETE FROM chronicle_segments WHERE last_seq <= ?1", [.integer(snapshot.seq)])
            try db.execute("DELETE FROM chronicle_snapshots WHERE seq < ?1", [.integer(snapshot.seq)])
            try Self.setMeta("cursor", .integer(snapshot.seq), in: db)
            // Every queued op is pushed again: the answers say which ones the snapshot already holds.
            try Self.setMeta("acked_device_seq", .integer(0), in: db)

            // The projection: the snapshot's rows, then the outbox on top.
            try db.withoutDefensive {
                for (kind, name) in projection.droppableObjects { try db.execute("DROP \(kind) IF EXISTS \(ProjectionSchema.quoted(name))") }
            }
            try db.execute("DELETE FROM chronicle_shadowed")
            let statements = projection.tableStatements
            for statement in statements where !statement.hasPrefix("CREATE INDEX") { try db.execute(statement) }
            try Self.load(snapshot, into: db, projection, libraryID: libraryID)
            _ = try Self.replay(from: db, into: db, materializer, projection, after: snapshot.seq, upTo: nil, includePending: true, progress: nil)
            for statement in statements where statement.hasPrefix("CREATE INDEX") { try db.execute(statement) }
            for statement in projection.searchStatements { try db.execute(statement) }
            try rebuildSearchIndexes(in: db)
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
            guard seq <= (try Self.historyBase(in: db)),
                  let op = try db.query("SELECT \(Self.outboxColumns) FROM chronicle_outbox WHERE op_id = ?1", [.text(key)], { try outboxOp($0) }).first else {
                return false
            }
            try db.execute("INSERT OR IGNORE INTO chronicle_sealed_ops(op_id, server_seq, device_id) VALUES (?1, ?2, ?3)",
                           [.text(key), .integer(seq), .text(deviceID.lowercased)])
            try db.execute("DELETE FROM chronicle_outbox WHERE op_id = ?1", [.text(key)])
            guard let entity = materializer.entity(of: op) else { return true }
            let id = op.entityID.lowercased
            try rebuildSearchIndexesIfStale(in: db)
            let batch = SearchIndexer.Batch()
            if try db.scalarInt("SELECT 1 FROM chronicle_shadowed WHERE entity = ?1 AND id = ?2", [.text(entity.name), .text(id)]) != nil {
                try restoreConfirmed([ShadowKey(entity: entity.name, id: id)], in: db, batch: batch, indexing: true)
                _ = try replayPending(on: [id], in: db, batch: batch, indexing: true)
            }
            try indexer.flush(batch, in: db)
            return true
        }
    }

    /// Where this store's history begins: 1, or the seq after a horizon dropped older history
    /// (or the snapshot the store started from), with when that happened.
    public func historyStart() throws -> (seq: Int64, droppedAt: Int64?) {
        try read { db in
            (try Self.historyBase(in: db) + 1, try Self.meta("history_dropped_at", in: db).integerValue)
        }
    }

    /// The seq before which this store has no history (0 unless it started from a snapshot
    /// or a compaction horizon dropped older history).
    public func historyBaseSeq() throws -> Int64 {
        try read { db in try Self.historyBase(in: db) }
    }
}
