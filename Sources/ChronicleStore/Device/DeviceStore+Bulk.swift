import ChronicleCore
import Foundation

extension DeviceStore {
    /// Folds a long run of confirmed ops — a first sync, or a device back from
    /// weeks away — faster than batch-by-batch `applyConfirmed`.
    ///
    /// Each batch is its own transaction, so progress is durable and readers
    /// see the projection fill up. Search indexes are emptied first and rebuilt
    /// once at the end, in one pass each, instead of being updated row by row;
    /// until then `search` finds nothing new. The store records that its
    /// indexes are stale, so a process killed half-way rebuilds them when the
    /// store next opens. Use it when the ops coming in outnumber the rows
    /// already indexed; otherwise `applyConfirmed` does less work.
    @discardableResult
    public func applyConfirmedInBulk<Batches: Sequence>(_ batches: Batches, progress: ProgressHandler? = nil) throws -> ApplyResult
        where Batches.Element == [Op] {
        try beginBulk()
        var total = ApplyResult(applied: 0, confirmedOwn: 0, rebased: 0, cursor: try cursor())
        var failure: Error?
        do {
            for batch in batches where !batch.isEmpty {
                let result = try applyBulkBatch(batch)
                total.applied += result.applied
                total.confirmedOwn += result.confirmedOwn
                total.rebased += result.rebased
                total.cursor = result.cursor
                progress?(Int64(total.applied), 0)
            }
        } catch {
            failure = error
        }
        // Indexes are rebuilt even when a batch failed: what did land must be searchable.
        try finishBulk()
        if let failure { throw failure }
        return total
    }

    /// The three steps of `applyConfirmedInBulk`, for callers whose batches arrive
    /// asynchronously (sync's catch-up pull): mark the search indexes stale and empty them…
    public func beginBulk() throws {
        bulkInProgress.withLock { $0 = true }
        try writeTransaction { db in
            try Self.setMeta("search_stale", .integer(1), in: db)
            for (_, index) in projection.searchIndexes {
                let fts = ProjectionSchema.quoted(index.index)
                try db.execute("INSERT INTO \(fts)(\(fts)) VALUES ('delete-all')")
            }
        }
    }

    /// …fold each batch in its own transaction without touching them…
    @discardableResult
    public func applyBulkBatch(_ ops: [Op]) throws -> ApplyResult {
        guard !ops.isEmpty else { return ApplyResult(applied: 0, confirmedOwn: 0, rebased: 0, cursor: try cursor()) }
        return try writeTransaction { db in
            try db.execute("PRAGMA cache_size = -\(Self.bulkCacheKilobytes)")
            return try fold(ops, in: db, indexing: false)
        }
    }

    /// …and rebuild them once at the end (always call it, also after a failure).
    public func finishBulk() throws {
        defer { bulkInProgress.withLock { $0 = false } }
        try writeTransaction { db in
            try rebuildSearchIndexes(in: db)
            try db.execute("PRAGMA cache_size = -\(Database.Options.defaultCacheKilobytes)")
        }
    }

    /// When a bulk apply could not rebuild the search indexes at its end (the disk was full),
    /// they stay stale; the next write that indexes rows rebuilds them first, inside its own
    /// transaction, so search never silently misses rows while the store keeps running.
    func rebuildSearchIndexesIfStale(in db: Database) throws {
        guard !bulkInProgress.withLock({ $0 }), try Self.meta("search_stale", in: db).integerValue == 1 else { return }
        try rebuildSearchIndexes(in: db)
    }

    /// True while bulk apply has left the search indexes to be rebuilt.
    public func searchIndexesStale() throws -> Bool {
        try read { db in try Self.meta("search_stale", in: db).integerValue == 1 }
    }
}
