import ChronicleCore
import Foundation

extension DeviceStore {
    /// Folds a long run of confirmed ops — a first sync, or a device back from
    /// weeks away — faster than batch-by-batch `applyConfirmed`.
    ///
    /// Each batch is its own transaction, so readers see the projection fill
    /// up and a process killed half-way keeps what it folded. Those commits do
    /// not wait for the disk: the store stays consistent across power loss, but
    /// the last batches before one may roll back, and sync pulls them again.
    /// Search indexes and the log's entity index are dropped first and built
    /// once at the end, in one pass each, instead of being updated row by row;
    /// until then `search` finds nothing new and one entity's history is read
    /// by scanning the log. The store records that its indexes are stale, so a
    /// process killed half-way builds them when the store next opens. Use it
    /// when the ops coming in outnumber the rows already indexed; otherwise
    /// `applyConfirmed` does less work.
    @discardableResult
    public func applyConfirmedInBulk<Batches: Sequence>(_ batches: Batches, progress: ProgressHandler? = nil) throws -> ApplyResult
        where Batches.Element == [Op] {
        try beginBulk()
        var total = ApplyResult(applied: 0, confirmedOwn: 0, rebased: 0, cursor: try cursor())
        var failure: Error?
        do {
            // Each batch's log rows and statements are built on another thread while the batch
            // before it is written. The caller's sequence is only ever advanced on this thread.
            var iterator = batches.lazy.filter { !$0.isEmpty }.makeIterator()
            var current = iterator.next().map(prepareBatch)
            while current != nil {
                let upcoming = iterator.next().map { PreparingBatch(self, $0) }
                defer { current = upcoming?.wait() }
                // `take()`: the batch's only owner is `applyBulkBatch`, which frees it off this thread.
                let result = try applyBulkBatch(current.take()!)
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
            try db.execute("DROP INDEX IF EXISTS \(StoreFormat.logEntityIndexName)")
            for (_, index) in projection.searchIndexes {
                let fts = ProjectionSchema.quoted(index.index)
                try db.execute("INSERT INTO \(fts)(\(fts)) VALUES ('delete-all')")
            }
        }
    }

    /// …fold each batch in its own transaction without touching them…
    @discardableResult
    public func applyBulkBatch(_ ops: [Op]) throws -> ApplyResult {
        try applyBulkBatch(prepareBatch(ops))
    }

    /// `applyBulkBatch` of a batch prepared ahead (`prepareBatch`, on any thread).
    ///
    /// The batch is freed on a background queue afterwards: freeing a batch's ops, log rows
    /// and statements (allocated on the thread that prepared them) was about a tenth of the
    /// writer's time. That happens only when the caller hands over its last reference
    /// (`consume`, `Optional.take()`); otherwise the caller's copy is freed where it drops it.
    @discardableResult
    public func applyBulkBatch(_ batch: consuming PreparedBatch) throws -> ApplyResult {
        guard !batch.ops.isEmpty else { return ApplyResult(applied: 0, confirmedOwn: 0, rebased: 0, cursor: try cursor()) }
        let result = try writeTransaction(spillToFiles: false, relaxedSync: true) { db in
            try db.execute("PRAGMA cache_size = -\(Self.bulkCacheKilobytes)")
            return try fold(batch.ops, in: db, indexing: false, prepared: batch)
        }
        ReleaseInBackground.release(consume batch)
        return result
    }

    /// The part of folding a batch that needs no database: each op's log row and the
    /// statements that apply it. Pure, so it runs on any thread — a caller that receives
    /// batches while writing others (sync's catch-up) prepares the next one meanwhile.
    public func prepareBatch(_ ops: [Op]) -> PreparedBatch {
        PreparedBatch(ops: ops, logArguments: ops.map { $0.serverSeq == nil || $0.serverTime == nil ? [] : Self.logArguments($0) },
                      steps: ops.map { materializer.steps(for: $0) })
    }

    /// …and rebuild them once at the end (always call it, also after a failure).
    public func finishBulk() throws {
        defer { bulkInProgress.withLock { $0 = false } }
        // The entity index's sort spills to temporary files rather than memory. The indexes'
        // pages are copied from the WAL into the database in the background afterwards.
        try writeTransaction(spillToFiles: true, largeCommit: true) { db in
            // The batches are committed and this transaction changes no content: another
            // connection reads the indexes' views as this one sees them.
            try rebuildBulkIndexes(in: db, contentCommitted: true)
            try db.execute("PRAGMA cache_size = -\(Database.Options.defaultCacheKilobytes)")
        }
    }

    /// Builds what bulk apply dropped: the log's entity index, then every search index.
    func rebuildBulkIndexes(in db: Database, contentCommitted: Bool = false) throws {
        // The entity index is built on the writer while another thread builds search indexes.
        let entityIndex = try StoreFormat.hasLogEntityIndex(in: db) ? [] : [StoreFormat.logEntityIndex]
        try rebuildSearchIndexes(in: db, writerFirst: entityIndex, contentCommitted: contentCommitted)
    }

    /// When a bulk apply could not rebuild the search indexes at its end (the disk was full),
    /// they stay stale; the next write that indexes rows rebuilds them first, inside its own
    /// transaction, so search never silently misses rows while the store keeps running.
    func rebuildSearchIndexesIfStale(in db: Database) throws {
        guard !bulkInProgress.withLock({ $0 }), try Self.meta("search_stale", in: db).integerValue == 1 else { return }
        try rebuildBulkIndexes(in: db)
    }

    /// True while bulk apply has left the search indexes to be rebuilt.
    public func searchIndexesStale() throws -> Bool {
        try read { db in try Self.meta("search_stale", in: db).integerValue == 1 }
    }
}

/// A batch of confirmed ops with its log rows and statements built ahead (`DeviceStore.prepareBatch`).
public struct PreparedBatch: Sendable {
    public let ops: [Op]
    let logArguments: [[Value]]
    let steps: [[SQLStep]]
}

/// `prepareBatch` running on a global queue until `wait()`.
final class PreparingBatch: @unchecked Sendable {
    private let done = DispatchSemaphore(value: 0)
    private var batch: PreparedBatch?

    init(_ store: DeviceStore, _ ops: [Op]) {
        DispatchQueue.global(qos: .userInitiated).async { [self] in
            batch = store.prepareBatch(ops)
            done.signal()
        }
    }

    func wait() -> PreparedBatch {
        done.wait()
        return batch!
    }
}

/// Frees values on a background queue instead of the thread that is done with them: the
/// writer hands over what it has applied, and freeing a batch's many small allocations
/// happens on the other core while it writes the next one.
public enum ReleaseInBackground {
    private static let queue = DispatchQueue(label: "chronicle.release", qos: .utility)

    private final class Box<T>: @unchecked Sendable {
        var value: T?
        init(_ value: consuming T) { self.value = value }
    }

    /// Takes `value` (pass it with `consume`, or as a temporary) and drops it on the queue.
    public static func release<T>(_ value: consuming T) {
        let box = Box(value)
        queue.async { box.value = nil }
    }
}
