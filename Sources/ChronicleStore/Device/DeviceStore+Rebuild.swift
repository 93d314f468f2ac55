import ChronicleCore
import Foundation

/// What a rebuild did.
public struct RebuildReport: Sendable {
    public var confirmedReplayed: Int64
    public var pendingReplayed: Int
    public var seconds: Double
    public var digest: String
    /// The seq of the snapshot the replay started from (nil: from the first op).
    public var fromSnapshot: Int64? = nil
}

/// Progress of long work: done so far and the total.
public typealias ProgressHandler = (_ done: Int64, _ total: Int64) -> Void

extension DeviceStore {
    /// Page cache for rebuilds and bulk apply, in KiB; the usual is `Database.Options.defaultCacheKilobytes`.
    public static let bulkCacheKilobytes = 64_000

    /// Drops every projection table and FTS index and replays the log (then the
    /// outbox on top). One transaction: readers keep seeing the old projection
    /// until it commits, and an interrupted rebuild leaves the store as it was.
    /// Streams the log; memory does not grow with it.
    ///
    /// By default it starts from the newest snapshot and replays the ops after it;
    /// `fromGenesis` replays every op from the first (sealed segments included). Both
    /// give the same state digest. The projection is built in the shape of the schema the store
    /// was opened with, which the store records: a store whose schema changed is usable again.
    @discardableResult
    public func rebuild(fromGenesis: Bool = false, progress: ProgressHandler? = nil) throws -> RebuildReport {
        try rebuild(fromGenesis: fromGenesis, progress: progress, alsoInTransaction: nil)
    }

    /// `rebuild`, running `alsoInTransaction` inside the same transaction, and `beforeReplay` first (it may change the log and the outbox: the
    /// replay then reads them on this connection, as this transaction sees them).
    func rebuild(fromGenesis: Bool = false, progress: ProgressHandler? = nil,
                 beforeReplay: ((Database) throws -> Void)? = nil,
                 alsoInTransaction: ((Database) throws -> Void)?) throws -> RebuildReport {
        let start = DispatchTime.now().uptimeNanoseconds
        var from: Int64?
        let (confirmed, pending, digest) = try writeTransaction(spillToFiles: false, largeCommit: true, ignoringUpkeep: true) { db in
            try beforeReplay?(db)
            let base: Int64?
            if fromGenesis {
                let horizon = try LogTables.historyBase(in: db)
                guard horizon == 0 else {
                    throw ChronicleError(.historyDropped, "History before seq \(horizon) was dropped by a compaction horizon; rebuild from the snapshot at seq \(horizon) instead (without --from-genesis).")
                }
                base = nil
            } else {
                base = try LogTables.replayBase(in: db, projection, preferLatest: true)
            }
            // A rebuild touches every page: a larger cache for its duration saves re-reading them.
            try db.execute("PRAGMA cache_size = -\(Self.bulkCacheKilobytes)")
            defer { try? db.execute("PRAGMA cache_size = -\(Database.Options.defaultCacheKilobytes)") }
            try db.withoutDefensive {
                for (kind, name) in projection.droppableObjects { try db.execute("DROP \(kind) IF EXISTS \(ProjectionSchema.quoted(name))") }
            }
            try db.execute("DELETE FROM chronicle_shadowed")
            // Secondary indexes are built after the replay, in one sorted pass each,
            // rather than kept up to date row by row.
            let statements = projection.tableStatements
            for statement in statements where !statement.hasPrefix("CREATE INDEX") { try db.execute(statement) }
            if let base, try ProjectionTables.load(storedAt: base, from: db, into: db, projection, libraryID: libraryID) != nil {
                // The state was carried over from a snapshot of an earlier schema version: the next
                // sync starts over from the server's (`stateCarriedOver`).
                try LogTables.setMeta(Self.stateCarriedOverKey, .integer(base), in: db)
            }
            from = base
            // The log is as last committed (this transaction changes only the projection, unless
            // `beforeReplay` changed it), so another connection reads and decodes it while this one writes.
            let counts = try ProjectionTables.replay(from: db, into: db, materializer, projection, after: base ?? 0, upTo: nil,
                                         includePending: true, prefetch: beforeReplay == nil ? readers : nil, progress: progress)
            // The FTS indexes are built on two cores; meanwhile the writer builds the secondary
            // indexes, one pass each, and takes the digest of the projection, which is now final.
            for statement in projection.searchStatements { try db.execute(statement) }
            var digest = ""
            try rebuildSearchIndexes(in: db, writerFirst: statements.filter { $0.hasPrefix("CREATE INDEX") }) { db in
                digest = try ProjectionTables.digest(projection, in: db)
            }
            // Recorded in the same transaction, so an interrupted rebuild simply happens again.
            try LogTables.setMeta("schema_fingerprint", .text(schema.fingerprint), in: db)
            try LogTables.setMeta("schema_version", .integer(Int64(schema.version)), in: db)
            try alsoInTransaction?(db)
            return (counts.0, counts.1, digest)
        }
        schemaRebuildDue.withLock { $0 = false }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        return RebuildReport(confirmedReplayed: confirmed, pendingReplayed: pending, seconds: seconds, digest: digest, fromSnapshot: from)
    }

    /// FTS5's buffer of terms not yet written (its `hashsize`, 1 MiB by default) during a
    /// rebuild. Each time it fills, FTS5 writes a segment and later merges segments; 4 MiB
    /// built the notes, highlights and titles of a 1,000,000-op library 28% faster for
    /// about 10 MB more memory (8 MiB: 30% for 27 MB; 16 MiB was slower).
    public static let searchRebuildHashBytes = 4 << 20
    static let searchDefaultHashBytes = 1 << 20

    /// The statements that refill one FTS5 index from its content: a larger term buffer
    /// for the rebuild only, the rebuild, the usual buffer back (FTS5 keeps the setting).
    /// An index the plan keeps empty (`gatedOff`: premium text on a free plan) is only
    /// emptied: its content view is empty, but reading it still scans every article.
    public static func searchIndexRebuildSQL(_ index: String, gatedOff: Bool = false) -> [String] {
        let fts = ProjectionSchema.quoted(index)
        if gatedOff { return ["INSERT INTO \(fts)(\(fts)) VALUES ('delete-all')"] }
        return ["INSERT INTO \(fts)(\(fts), rank) VALUES ('hashsize', \(searchRebuildHashBytes))",
                "INSERT INTO \(fts)(\(fts)) VALUES ('rebuild')",
                "INSERT INTO \(fts)(\(fts), rank) VALUES ('hashsize', \(searchDefaultHashBytes))"]
    }

    /// Who built which search index in `rebuildSearchIndexes`.
    struct SearchBuildReport {
        /// Built by the worker in a scratch database and copied in.
        var workerBuilt: [String]
        /// Built by FTS5's `rebuild` from the content view on the writer (premium text, and
        /// indexes past the read-ahead budget).
        var streamed: [String]
    }

    /// Below this much text the search indexes are built on the writer alone: a second thread
    /// and its scratch databases cost more than they save.
    static let parallelSearchBuildMinBytes = 256 << 10
    /// With committed content (the close of a bulk apply), sizes are not known ahead: a store
    /// file smaller than this builds its indexes on the writer alone.
    static let parallelSearchBuildMinStoreBytes = 16 << 20
    /// The most text read ahead for the two threads; indexes past it are built by FTS5's own `rebuild`.
    static let searchBuildContentBytesMax = 32 << 20
    /// On one core a second thread only adds its scratch databases.
    static var searchBuildHasSecondCore: Bool { ProcessInfo.processInfo.activeProcessorCount >= 2 }
    /// The writer's page cache while the search indexes are built, in KiB.
    static let searchBuildCacheKilobytes = 4_000

    /// Refills every FTS5 index from its content view in one pass each (premium-only indexes
    /// stay empty on a free plan) and clears the stale mark bulk apply sets. `writerFirst` (index
    /// builds of the same transaction), then `meanwhile`, run on the writer while another
    /// thread builds search indexes.
    ///
    /// The indexes are built on two cores (`ParallelSearchBuild`); premium full text, which
    /// can be far larger than memory should hold, is left to FTS5's own `rebuild` on the writer.
    @discardableResult
    func rebuildSearchIndexes(in db: Database, writerFirst: [String] = [],
                              scratchDirectory: URL = FileManager.default.temporaryDirectory,
                              parallelMinBytes: Int = parallelSearchBuildMinBytes,
                              contentBytesMax: Int = searchBuildContentBytesMax,
                              contentCommitted: Bool = false,
                              parallelMinStoreBytes: Int = parallelSearchBuildMinStoreBytes,
                              meanwhile: (Database) throws -> Void = { _ in }) throws -> SearchBuildReport {
        // Each index's content view decides what it holds (live rows; premium text on premium only).
        let premium = try db.scalarInt("SELECT \(projection.premiumCondition)") == 1
        // The content read below takes the place of the page cache, which FTS5 appending its
        // segments and the index builds (their sorts spill past it) hardly need.
        try db.execute("PRAGMA cache_size = -\(Self.searchBuildCacheKilobytes)")
        defer { try? db.execute("PRAGMA cache_size = -\(Database.Options.defaultCacheKilobytes)") }
        var streamed: [SearchIndexSpec] = []
        let build = ParallelSearchBuild(directory: scratchDirectory)
        defer { build.cancelAndClean() }
        var bytes = 0
        for (_, index) in projection.searchIndexes {
            if index.requiresPremium {
                if premium { streamed.append(index) } else {
                    for sql in Self.searchIndexRebuildSQL(index.index, gatedOff: true) { try db.execute(sql) }
                }
                continue
            }
            if contentCommitted {
                // Nothing to read ahead: the worker reads its indexes' views itself.
                build.add(.committed(index, path: path))
                continue
            }
            // The worker starts as soon as there is enough to build, while the rest is read.
            // Past the budget, FTS5 reads the view itself on the writer.
            guard let content = try SearchContent.read(index, in: db, byteLimit: contentBytesMax - bytes) else {
                streamed.append(index)
                continue
            }
            bytes += content.byteCount
            // An empty index is only emptied; no thread needs to build it.
            if content.chunks.isEmpty {
                try buildInPlace(.rows(content), in: db)
                continue
            }
            build.add(.rows(content))
            if bytes >= parallelMinBytes && !build.isWorkerStarted && Self.searchBuildHasSecondCore { build.startWorker() }
        }
        if contentCommitted && Self.searchBuildHasSecondCore,
           try (db.scalarInt("PRAGMA page_count") ?? 0) * (db.scalarInt("PRAGMA page_size") ?? 0) >= Int64(parallelMinStoreBytes) {
            build.startWorker()
        }
        build.finishAdding()

        for sql in writerFirst { try db.execute(sql) }
        try meanwhile(db)
        for index in streamed {
            for sql in Self.searchIndexRebuildSQL(index.index) { try db.execute(sql) }
        }
        while let job = build.takeNext() { try buildInPlace(job, in: db) }
        var workerBuilt: [String] = []
        while let built = build.nextBuilt() {
            switch built {
            case .built(let index, let path):
                defer { ParallelSearchBuild.remove(path) }
                try ParallelSearchBuild.copy(index, from: path, into: db)
                workerBuilt.append(index.index)
            case .failed(let job):
                try buildInPlace(job, in: db)
            }
        }
        try db.execute("DELETE FROM chronicle_meta WHERE key = 'search_stale'")
        // The phrase indexes start over from the new word indexes (small ones filled now, the
        // rest by the filler once this transaction commits).
        try ensurePhraseIndexes(in: db)
        try resetPhraseIndexes(in: db)
        return SearchBuildReport(workerBuilt: workerBuilt, streamed: streamed.map(\.index))
    }

    /// Indexes the job's rows in the store's FTS5 table, as its `rebuild` would from the view
    /// (for committed content, that `rebuild`).
    private func buildInPlace(_ job: SearchBuildJob, in db: Database) throws {
        guard case .rows(let content) = job else {
            for sql in Self.searchIndexRebuildSQL(job.index.index) { try db.execute(sql) }
            return
        }
        let fts = ProjectionSchema.quoted(content.index.index)
        try db.execute("INSERT INTO \(fts)(\(fts)) VALUES ('delete-all')")
        try db.execute("INSERT INTO \(fts)(\(fts), rank) VALUES ('hashsize', \(Self.searchRebuildHashBytes))")
        try content.insert(into: content.index.index, on: db)
        try db.execute("INSERT INTO \(fts)(\(fts), rank) VALUES ('hashsize', \(Self.searchDefaultHashBytes))")
    }

}
