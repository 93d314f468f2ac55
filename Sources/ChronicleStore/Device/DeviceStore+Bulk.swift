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
    /// Search indexes and the projection's read indexes
    /// (`ProjectionSchema.readIndexes`: an article's highlights or notes, the
    /// articles with a tag) are dropped first and built once at the end, in one
    /// pass each, instead of being updated row by row; until then `search` finds
    /// nothing new, and a query by article or by tag scans its table. The store records that its indexes
    /// are stale, so a process killed half-way builds them when the store next opens. Use it
    /// when the ops coming in outnumber the rows already indexed; otherwise
    /// `applyConfirmed` does less work.
    ///
    /// With `sealing` (the default), the history it folds is kept as sealed segments, as
    /// `compact` would leave it, rather than as log blocks: every batch of at least
    /// `sealOnArrivalOpsMin` ops but the last is encoded as segments off the writer and
    /// stored with its op ids, as long as the log holds nothing after its sealed prefix (a
    /// first sync; once a batch is logged, the rest are too). The last batch stays in the
    /// log, hot. Segments take less than the log's uncompressed blocks; `audit`, `log` and
    /// `rebuild` read them transparently.
    @discardableResult
    public func applyConfirmedInBulk<Batches: Sequence>(_ batches: Batches, sealing: Bool = true,
                                                        progress: ProgressHandler? = nil) throws -> ApplyResult
        where Batches.Element == [Op] {
        try beginBulk()
        var total = ApplyResult(applied: 0, confirmedOwn: 0, rebased: 0, cursor: try cursor())
        var failure: Error?
        do {
            // Each batch's log blocks and statements are built on another thread while the batch
            // before it is written. The caller's sequence is only ever advanced on this thread.
            var iterator = batches.lazy.filter { !$0.isEmpty }.makeIterator()
            var current = iterator.next().map { prepareBatch($0, sealing: sealing) }
            while current != nil {
                let upcoming = iterator.next().map { PreparingBatch(self, $0, sealing: sealing) }
                defer { current = upcoming?.wait() }
                // `take()`: the batch's only owner is `applyBulkBatch`, which frees it off this thread.
                // Every batch but the last goes straight into sealed segments (when `sealing`).
                let result = try applyBulkBatch(current.take()!, seal: upcoming != nil)
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
    /// asynchronously (sync's catch-up pull): mark the search indexes stale and empty them,
    /// and drop the projection's read indexes…
    ///
    /// Each batch's new highlights, notes, tags and memberships belong to rows all over the
    /// library, so kept up to date each of those indexes had most of its pages rewritten by
    /// every batch's commit: in a 1,000,000-op catch-up, a quarter of all the pages its batches wrote.
    public func beginBulk() throws {
        bulkInProgress.withLock { $0 = true }
        do {
            try emptyIndexesForBulk()
        } catch {
            bulkInProgress.withLock { $0 = false }
            throw error
        }
    }

    private func emptyIndexesForBulk() throws {
        try writeTransaction { db in
            try LogTables.setMeta("search_stale", .integer(1), in: db)
            for index in projection.readIndexes { try db.execute(index.dropSQL) }
            for (_, index) in projection.searchIndexes {
                let fts = ProjectionSchema.quoted(index.index)
                try db.execute("INSERT INTO \(fts)(\(fts)) VALUES ('delete-all')")
            }
            // The phrase indexes too, with their watermarks at 0: no write keeps any of their
            // rows up to date and the filler waits, until the indexes are built again.
            for phrase in phraseIndexes where try db.scalarText("SELECT name FROM sqlite_schema WHERE name = ?1", [.text(phrase.table)]) != nil {
                try db.execute(phrase.clearSQL)
                try phrase.setWatermark(0, in: db)
            }
        }
    }

    /// …fold each batch in its own transaction without touching them…
    @discardableResult
    public func applyBulkBatch(_ ops: [Op], seal: Bool = false) throws -> ApplyResult {
        try applyBulkBatch(prepareBatch(ops, sealing: seal), seal: seal)
    }

    /// `applyBulkBatch` of a batch prepared ahead (`prepareBatch`, on any thread).
    ///
    /// `seal`: the batch goes into sealed segments instead of log blocks, if it was prepared with
    /// `sealing` and the log holds nothing after its sealed prefix; otherwise into the log. A
    /// caller that knows more batches follow passes true for all but the last, which stays hot.
    ///
    /// The batch is freed on a background queue afterwards: freeing a batch's ops, log blocks
    /// and statements (allocated on the thread that prepared them) was about a tenth of the
    /// writer's time. That happens only when the caller hands over its last reference
    /// (`consume`, `Optional.take()`); otherwise the caller's copy is freed where it drops it.
    @discardableResult
    public func applyBulkBatch(_ batch: consuming PreparedBatch, seal: Bool = false) throws -> ApplyResult {
        guard !batch.ops.isEmpty else { return ApplyResult(applied: 0, confirmedOwn: 0, rebased: 0, cursor: try cursor()) }
        let result = try writeTransaction(spillToFiles: false, relaxedSync: true) { db in
            try db.execute("PRAGMA cache_size = -\(Self.bulkCacheKilobytes)")
            return try fold(batch.ops, in: db, indexing: .deferred, prepared: batch, seal: seal)
        }
        ReleaseInBackground.release(consume batch)
        return result
    }

    /// A batch this small is logged even when it could be sealed: segments this short would
    /// cost more in bookkeeping than they save. (`prepareBatch(_:sealing:encoded:sealingOpsMin:)`
    /// takes another minimum: the simulator seals pages of a few ops, to test sealing under faults.)
    public static let sealOnArrivalOpsMin = 1_000

    /// The part of folding a batch that needs no database: the ops' log blocks and the
    /// statements that apply it. Pure, so it runs on any thread — a caller that receives
    /// batches while writing others (sync's catch-up) prepares the next one meanwhile.
    /// `sealing`: also encode the ops as segments (batches of at least `sealOnArrivalOpsMin`),
    /// for `applyBulkBatch(_:seal:)`; `encoded`, the ops' segment body and LZ4 frame as they
    /// arrived (`PullPage.encoded`), is kept as it is where it fits one segment. `sealingOpsMin`:
    /// shorter batches are logged (default `sealOnArrivalOpsMin`).
    public func prepareBatch(_ ops: [Op], sealing: Bool = false, encoded: SegmentBytes? = nil,
                             sealingOpsMin: Int = DeviceStore.sealOnArrivalOpsMin) -> PreparedBatch {
        // Segments only where the writer will be able to use them: the log holds nothing after
        // its sealed prefix now, and during a bulk apply nothing else adds to it. Ops that cannot
        // form segments (the writer refuses them with its own error) are left to the log path.
        let sealable = sealing && ops.count >= max(1, sealingOpsMin)
            && ops.allSatisfy { $0.serverSeq != nil && $0.serverTime != nil }
            && (try? read { db in try Self.logEndsAtSealedPrefix(in: db) }) == true
        let opsMax = CompactionPolicy().segmentOpsMax
        var segments: [EncodedSegment]?
        if sealable, let encoded, ops.count <= opsMax, encoded.body.count <= LogTables.segmentBodyBytesMax {
            segments = [EncodedSegment(firstSeq: ops.first!.serverSeq!, lastSeq: ops.last!.serverSeq!, body: encoded.body,
                                       frame: encoded.frame, filter: SegmentFilter(ids: Set(ops.map(\.entityID))).bytes)]
        } else if sealable {
            segments = try? LogTables.encodeSegments(ops[...], libraryID: libraryID, opsMax: opsMax)
        }
        // A sealed batch needs no log blocks (if the writer logs it after all, it encodes them itself).
        let blocks = segments != nil ? nil : try? Self.encodeBlocks(ops[...], libraryID: libraryID)
        return PreparedBatch(ops: ops, blocks: blocks, steps: ops.map { materializer.steps(for: $0) }, segments: segments)
    }

    /// True when the log holds no confirmed op after the sealed prefix (the cursor is where sealing ends).
    static func logEndsAtSealedPrefix(in db: Database) throws -> Bool {
        try LogTables.sealedUpTo(in: db) == (try LogTables.meta("cursor", in: db).integerValue ?? 0)
    }

    /// …and rebuild them once at the end (always call it, also after a failure).
    public func finishBulk() throws {
        defer { bulkInProgress.withLock { $0 = false } }
        // The indexes' sorts spill to temporary files rather than memory. The indexes'
        // pages are copied from the WAL into the database in the background afterwards.
        try writeTransaction(spillToFiles: true, largeCommit: true) { db in
            // The batches are committed and this transaction changes no content: another
            // connection reads the indexes' views as this one sees them.
            try rebuildBulkIndexes(in: db, contentCommitted: true)
            try db.execute("PRAGMA cache_size = -\(Database.Options.defaultCacheKilobytes)")
        }
    }

    /// Builds what bulk apply dropped: the projection's read indexes, then every search index.
    func rebuildBulkIndexes(in db: Database, contentCommitted: Bool = false) throws {
        // These are built on the writer while another thread builds search indexes.
        try rebuildSearchIndexes(in: db, writerFirst: projection.readIndexes.map(\.createIfMissingSQL),
                                 contentCommitted: contentCommitted)
    }

    /// Readies the search indexes for a write outside bulk apply and says how the write keeps
    /// them. While a bulk apply runs they are stale and emptied, built again from the content at
    /// its close: the write defers to it (an entry removed from an index that does not hold it
    /// would be an error). A bulk apply that could not rebuild them at its end (the disk was
    /// full) left them stale: they are rebuilt first, inside the write's transaction, so search
    /// never silently misses rows while the store keeps running.
    func prepareSearchIndexing(in db: Database) throws -> SearchIndexing {
        guard try needsSearchIndexRebuild(in: db) else { return .incremental }
        if bulkInProgress.withLock({ $0 }) { return .deferred }
        try rebuildBulkIndexes(in: db)
        return .incremental
    }

    /// Whether a bulk apply left the search indexes to be rebuilt (it runs, or it was interrupted).
    func needsSearchIndexRebuild(in db: Database) throws -> Bool {
        try LogTables.meta("search_stale", in: db).integerValue == 1
    }

    /// True while bulk apply has left the search indexes to be rebuilt: `search` does not find
    /// what came in since it began until `finishBulk` (or `performUpkeep`) builds them.
    public func needsSearchIndexRebuild() throws -> Bool {
        try read { db in try needsSearchIndexRebuild(in: db) }
    }
}

/// A batch of confirmed ops with its log blocks and statements built ahead (`DeviceStore.prepareBatch`).
public struct PreparedBatch: Sendable {
    public let ops: [Op]
    /// The ops as log blocks (nil when prepared as segments, or when they cannot be encoded).
    let blocks: [EncodedSegment]?
    let steps: [[SQLStep]]
    /// The ops as sealed segments, when prepared with `sealing`.
    let segments: [EncodedSegment]?
}

/// `prepareBatch` running on a global queue until `wait()`.
final class PreparingBatch: @unchecked Sendable {
    private let done = DispatchSemaphore(value: 0)
    private var batch: PreparedBatch?

    init(_ store: DeviceStore, _ ops: [Op], sealing: Bool) {
        DispatchQueue.global(qos: .userInitiated).async { [self] in
            batch = store.prepareBatch(ops, sealing: sealing)
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
