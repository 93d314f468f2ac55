import CSQLite
import ChronicleCore
import Foundation

/// One FTS5 index's content rows, read once by the writer into compact chunks.
///
/// The writer's transaction is invisible to every other connection, so a second thread
/// cannot read a rebuild's content views itself; it builds from these rows instead.
final class SearchContent: Sendable {
    struct Chunk: Sendable {
        var rowids: [Int64] = []
        /// Each cell's byte length in `bytes`, row by row; -1 for NULL.
        var lengths: [Int32] = []
        var bytes: [UInt8] = []
    }

    let index: SearchIndexSpec
    let chunks: [Chunk]
    let byteCount: Int

    /// Chunks stay under glibc's mmap threshold, so they reuse the heap the page cache gave back.
    static let chunkBytes = 64 << 10

    private init(index: SearchIndexSpec, chunks: [Chunk], byteCount: Int) {
        self.index = index
        self.chunks = chunks
        self.byteCount = byteCount
    }

    /// The rows of `index`'s content view (live rows; the plan's text only on premium), in rowid
    /// order: FTS5 writes a segment whenever a rowid is not above the one before.
    /// Nil, having read no further, once the text passes `byteLimit`.
    static func read(_ index: SearchIndexSpec, in db: Database, byteLimit: Int) throws -> SearchContent? {
        let columns = ProjectionSchema.searchColumns(index)
        let view = ProjectionSchema.quoted(ProjectionSchema.contentViewName(of: index))
        let statement = try db.uncached("SELECT rid, \(columns) FROM \(view) ORDER BY rid")
        let handle = statement.handle
        let count = Int32(index.fields.count)
        var chunks: [Chunk] = []
        var chunk = Chunk()
        chunk.bytes.reserveCapacity(chunkBytes)
        var total = 0
        while try statement.step() {
            // FTS5 tokenizes a value's text form, whatever its type; a row stays within one chunk.
            var rowBytes = 0
            for column in 1...count where sqlite3_column_type(handle, column) != SQLITE_NULL {
                _ = sqlite3_column_text(handle, column)
                rowBytes += Int(sqlite3_column_bytes(handle, column))
            }
            total += rowBytes
            if total > byteLimit { return nil }
            if chunk.bytes.count + rowBytes > chunkBytes && !chunk.rowids.isEmpty {
                chunks.append(chunk)
                chunk = Chunk()
                chunk.bytes.reserveCapacity(max(chunkBytes, rowBytes))
            }
            chunk.rowids.append(sqlite3_column_int64(handle, 0))
            for column in 1...count {
                guard sqlite3_column_type(handle, column) != SQLITE_NULL else { chunk.lengths.append(-1); continue }
                let length = Int(sqlite3_column_bytes(handle, column))
                chunk.lengths.append(Int32(length))
                if length > 0, let text = sqlite3_column_text(handle, column) {
                    chunk.bytes.append(contentsOf: UnsafeBufferPointer(start: text, count: length))
                }
            }
        }
        if !chunk.rowids.isEmpty { chunks.append(chunk) }
        return SearchContent(index: index, chunks: chunks, byteCount: total)
    }

    /// Inserts every row into `table`, an FTS5 table with this index's columns on `db`: for an
    /// external-content table that indexes the rows, as its `rebuild` does from the view.
    func insert(into table: String, on db: Database, cancelled: () -> Bool = { false }) throws {
        let columns = ProjectionSchema.searchColumns(index)
        let placeholders = (1...index.fields.count + 1).map { "?\($0)" }.joined(separator: ", ")
        let statement = try db.uncached("INSERT INTO \(ProjectionSchema.quoted(table))(rowid, \(columns)) VALUES (\(placeholders))")
        let handle = statement.handle
        let count = index.fields.count
        for chunk in chunks {
            if cancelled() { throw CancellationError() }
            try chunk.bytes.withUnsafeBufferPointer { bytes in
                var offset = 0
                var cell = 0
                for rowid in chunk.rowids {
                    sqlite3_bind_int64(handle, 1, rowid)
                    for column in 0..<count {
                        let length = Int(chunk.lengths[cell])
                        cell += 1
                        let parameter = Int32(column + 2)
                        if length < 0 {
                            sqlite3_bind_null(handle, parameter)
                        } else if length == 0 {
                            _ = chronicle_bind_text(handle, parameter, "", 0)
                        } else {
                            // The bytes outlive the step: SQLite reads them in place (SQLITE_STATIC).
                            let start = UnsafeRawPointer(bytes.baseAddress! + offset).assumingMemoryBound(to: CChar.self)
                            sqlite3_bind_text(handle, parameter, start, Int32(length), nil)
                            offset += length
                        }
                    }
                    try statement.step()
                    sqlite3_reset(handle)
                }
            }
        }
        sqlite3_clear_bindings(handle)
    }
}

/// One search index to build, and where its rows come from.
enum SearchBuildJob: Sendable {
    /// Rows the writer read ahead from its own transaction.
    case rows(SearchContent)
    /// The index's content view as last committed in the store at `path`: the writer's
    /// transaction has not changed it, so the worker reads it through a connection of its own.
    case committed(SearchIndexSpec, path: String)

    var index: SearchIndexSpec {
        switch self {
        case .rows(let content): content.index
        case .committed(let index, _): index
        }
    }

    /// Unknown (0) for committed content: those are taken in the order they were added.
    var byteCount: Int {
        if case .rows(let content) = self { return content.byteCount }
        return 0
    }
}

/// Builds a transaction's FTS5 indexes on two cores.
///
/// Each index is a `SearchBuildJob`: rows the writer read ahead from its own transaction
/// (`SearchContent`), or a content view already committed. The jobs, largest first, are taken
/// one at a time by the writer, which builds the index in place, and by a worker thread, which
/// builds the same FTS5 table contentless in a scratch database of its own. The writer then copies what the worker built (the FTS5 table's `_data`, `_idx` and
/// `_docsize` rows: the same SQLite building the same table from the same rows) into the store,
/// inside its transaction. A worker that fails leaves its indexes to the writer.
final class ParallelSearchBuild: @unchecked Sendable {
    /// What the worker did with one index.
    enum Built: Sendable {
        /// The scratch database holding the built index.
        case built(SearchIndexSpec, path: String)
        /// The worker could not build it: it goes back to the writer.
        case failed(SearchBuildJob)
    }

    // Guarded by `condition`.
    private let condition = NSCondition()
    private var pending: [SearchBuildJob] = []
    private var adding = true
    private var built: [Built] = []
    private var workerRunning = false
    private var workerJobs = 0
    private var cancelled = false
    private let directory: URL

    /// The most indexes the worker builds: the writer attaches each one's scratch database
    /// until its transaction ends, and SQLite attaches at most 10 by default.
    static let workerJobsMax = 8

    /// Scratch databases go in `directory`.
    init(directory: URL) {
        self.directory = directory
    }

    private func locked<R>(_ body: () -> R) -> R {
        condition.lock()
        defer { condition.unlock() }
        return body()
    }

    /// Queues an index to build; the largest are taken first.
    func add(_ job: SearchBuildJob) {
        locked {
            let position = pending.firstIndex { $0.byteCount < job.byteCount } ?? pending.endIndex
            pending.insert(job, at: position)
            condition.broadcast()
        }
    }

    /// Every index is queued: a worker with nothing left to take stops.
    func finishAdding() {
        locked {
            adding = false
            condition.broadcast()
        }
    }

    /// The writer's next index to build, largest first; nil when none are left (or after `cancelAndClean`).
    /// A started worker takes the first index: the writer waits for it to get going if need be.
    func takeNext() -> SearchBuildJob? {
        locked {
            while workerRunning && workerJobs == 0 && !pending.isEmpty && !cancelled { condition.wait() }
            return cancelled || pending.isEmpty ? nil : pending.removeFirst()
        }
    }

    /// The worker's next index, waiting while the writer is still queueing them.
    private func takeForWorker() -> SearchBuildJob? {
        locked {
            while pending.isEmpty && adding && !cancelled { condition.wait() }
            guard !cancelled, !pending.isEmpty, workerJobs < Self.workerJobsMax else { return nil }
            workerJobs += 1
            condition.broadcast()
            return pending.removeFirst()
        }
    }

    private var isCancelled: Bool { locked { cancelled } }

    /// Starts the worker thread; it takes indexes until none are left.
    func startWorker() {
        locked { workerRunning = true }
        let thread = Thread { [self] in
            while let job = takeForWorker() {
                // Once built, the rows are no longer held.
                let result = buildInScratch(job).map { Built.built(job.index, path: $0) } ?? .failed(job)
                locked {
                    built.append(result)
                    condition.broadcast()
                }
            }
            locked {
                workerRunning = false
                condition.broadcast()
            }
        }
        thread.name = "chronicle.search-build"
        thread.start()
    }

    var isWorkerStarted: Bool { locked { workerRunning || !built.isEmpty } }

    /// The next index the worker finished, waiting for it while the worker runs; nil once the
    /// worker is done and everything it built was handed over.
    func nextBuilt() -> Built? {
        locked {
            while built.isEmpty && workerRunning { condition.wait() }
            return built.isEmpty ? nil : built.removeFirst()
        }
    }

    /// Stops the worker after its current chunk and removes every scratch database.
    func cancelAndClean() {
        locked {
            cancelled = true
            adding = false
            condition.broadcast()
        }
        while let built = nextBuilt() { if case .built(_, let path) = built { Self.remove(path) } }
    }

    private func buildInScratch(_ job: SearchBuildJob) -> String? {
        let path = directory.appendingPathComponent("chronicle-search-\(UUID().uuidString.lowercased()).sqlite").path
        do {
            var options = Database.Options()
            options.scratch = true
            let db = try Database(path: path, options: options)
            // FTS5 appends its segments; a small page cache is enough.
            try db.execute("PRAGMA cache_size = -2000")
            let index = job.index
            let fts = ProjectionSchema.quoted(index.index)
            try db.execute(ProjectionSchema.searchTableSQL(index, content: "content=''"))
            try db.execute("INSERT INTO \(fts)(\(fts), rank) VALUES ('hashsize', \(DeviceStore.searchRebuildHashBytes))")
            switch job {
            case .rows(let content):
                try db.transaction { db in
                    try content.insert(into: index.index, on: db, cancelled: { isCancelled })
                }
            case .committed(_, let store):
                var components = URLComponents()
                components.scheme = "file"
                components.path = store
                components.queryItems = [URLQueryItem(name: "mode", value: "ro")]
                try db.execute("ATTACH DATABASE ?1 AS store", [.text(components.string ?? store)])
                let columns = ProjectionSchema.searchColumns(index)
                let view = ProjectionSchema.quoted(ProjectionSchema.contentViewName(of: index))
                try db.transaction { db in
                    if isCancelled { throw CancellationError() }
                    try db.execute("INSERT INTO main.\(fts)(rowid, \(columns)) SELECT rid, \(columns) FROM store.\(view) ORDER BY rid")
                }
                try db.execute("DETACH DATABASE store")
            }
            return path
        } catch {
            Self.remove(path)
            return nil
        }
    }

    static func remove(_ path: String) {
        for suffix in ["", "-journal", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
    }

    /// The FTS5 tables whose rows make up a built index.
    static let shadowTables = ["data", "idx", "docsize"]

    /// Replaces the store's index with the one the worker built in `path`. The FTS5 table is
    /// dropped and created again first: FTS5 keeps an index's structure in memory per connection,
    /// and a table created in this transaction has read nothing yet. The scratch database is
    /// attached until the transaction ends, so that each shadow table is copied in one
    /// `INSERT … SELECT`, which SQLite does page by page rather than row by row.
    static func copy(_ index: SearchIndexSpec, from path: String, into db: Database) throws {
        let fts = ProjectionSchema.quoted(index.index)
        guard let create = try db.scalarText("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?1", [.text(index.index)]) else {
            throw ChronicleError(.invariantViolated, "The search index \(index.index) is missing from the store.")
        }
        let scratch = try db.attachUntilTransactionEnds(path)
        try db.withoutDefensive {
            try db.execute("DROP TABLE \(fts)")
            try db.execute(create)
            for suffix in shadowTables {
                let table = ProjectionSchema.quoted(index.index + "_" + suffix)
                try db.execute("DELETE FROM main.\(table)")
                try db.execute("INSERT INTO main.\(table) SELECT * FROM \(scratch).\(table)")
            }
        }
        // Through FTS5, after the copy: it records the setting in the copied structure too.
        try db.execute(ProjectionSchema.searchRankSQL(index))
    }
}
