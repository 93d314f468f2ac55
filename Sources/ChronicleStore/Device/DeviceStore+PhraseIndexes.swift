import ChronicleCore
import Foundation

/// How far one phrase index (`PhraseIndex`) has got.
public struct PhraseIndexStatus: Sendable, Equatable {
    /// The word index it answers phrases for, e.g. `article_text_fts`.
    public var index: String
    /// Content rows indexed so far, and how many there are.
    public var rowsIndexed: Int64
    public var rows: Int64
    /// Searches read phrases from it (else from the word index, with the same results).
    public var isComplete: Bool
}

extension DeviceStore {
    /// A phrase index of at most this many rows, holding at most `phraseIndexInlineBytesMax` of
    /// text, is filled in the transaction that emptied it (well under 0.1 s); a larger one by the
    /// background filler.
    static let phraseIndexInlineRowsMax: Int64 = 256
    static let phraseIndexInlineBytesMax: Int64 = 512 << 10
    /// What the filler indexes per transaction: content rows up to this many bytes of text (and
    /// at least one row), at most `phraseIndexChunkRowsMax` rows. 128 KiB is about ten texts of
    /// 2,000 words, about 20 ms holding the writer.
    static let phraseIndexChunkBytes: Int64 = 128 << 10
    static let phraseIndexChunkRowsMax: Int64 = 2_048
    /// After a failed chunk (a full disk, say), the filler does not start again for this long.
    static let phraseIndexRetrySeconds: Double = 10

    /// On create and open: makes the phrase indexes the store lacks and fills them (small ones
    /// at once), then starts the filler if any is not complete.
    func openPhraseIndexes() throws {
        let missing = try read { db in try phraseIndexesMissing(in: db) }
        if missing {
            try writeTransaction(spillToFiles: false) { db in
                let made = try ensurePhraseIndexes(in: db)
                if !made.isEmpty { try resetPhraseIndexes(made, in: db) }
            }
        }
        if try !phraseIndexesComplete() { startPhraseIndexing() }
    }

    /// Whether a phrase table or plan trigger is missing or defined otherwise.
    func phraseIndexesMissing(in db: Database) throws -> Bool {
        let stored = Dictionary(try db.query("SELECT name, sql FROM sqlite_schema WHERE type IN ('table', 'trigger')") { ($0.text(0), $0.text(1)) },
                                uniquingKeysWith: { first, _ in first })
        return phraseIndexes.contains { phrase in
            stored[phrase.table] != phrase.createSQL || phrase.triggerNames(projection).contains { stored[$0] == nil }
        }
    }

    /// Creates the phrase tables this store lacks and the plan triggers; a table defined
    /// otherwise is made again. In `db`'s write transaction; returns the tables made, which the
    /// caller fills (`resetPhraseIndexes`).
    @discardableResult
    func ensurePhraseIndexes(in db: Database) throws -> [String] {
        var made: [String] = []
        for phrase in phraseIndexes {
            let stored = try db.scalarText("SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = ?1", [.text(phrase.table)])
            if stored != phrase.createSQL {
                if stored != nil { try db.execute("DROP TABLE \(ProjectionSchema.quoted(phrase.table))") }
                try db.execute(phrase.createSQL)
                made.append(phrase.table)
            }
            // Dropped with the plan's table by a rebuild or a bootstrap; made again here.
            for trigger in phrase.triggers(projection) { try db.execute(trigger) }
        }
        return made
    }

    /// Empties the phrase indexes named (all by default) after their word indexes were built
    /// anew: each is filled now if its rows are few and short (`phraseIndexFillsInline`), else
    /// its watermark goes to 0 and the filler is started (it waits for this transaction).
    func resetPhraseIndexes(_ tables: [String]? = nil, in db: Database) throws {
        var background = false
        for phrase in phraseIndexes where tables?.contains(phrase.table) ?? true {
            try db.execute(phrase.clearSQL)
            if try phraseIndexFillsInline(phrase, in: db) {
                try db.execute(phrase.fillSQL, [.integer(Int64.min), .integer(Int64.max)])
                try phrase.setWatermark(PhraseIndex.complete, in: db)
            } else {
                try phrase.setWatermark(0, in: db)
                background = true
            }
        }
        if background { startPhraseIndexing() }
    }

    /// Whether `phrase`'s rows are few and short enough to index at once (`phraseIndexInlineRowsMax`).
    /// Measured on the content view, at most one row past the limit read: the word index's totals
    /// (its averages record) are written only when its transaction commits.
    func phraseIndexFillsInline(_ phrase: PhraseIndex, in db: Database) throws -> Bool {
        let bytes = PhraseIndex.bytesSQL(phrase.index)
        let measured = try db.query("SELECT count(*), coalesce(sum(bytes), 0) FROM (SELECT \(bytes) AS bytes FROM \(phrase.view) LIMIT ?1)",
                                    [.integer(Self.phraseIndexInlineRowsMax + 1)]) { ($0.int(0), $0.int(1)) }.first ?? (0, 0)
        return measured.0 <= Self.phraseIndexInlineRowsMax && measured.1 <= Self.phraseIndexInlineBytesMax
    }

    /// Indexes the next rows of the first phrase index that lacks some, in one transaction.
    /// False when every phrase index is complete.
    func fillPhraseIndexChunk(bytes budget: Int64 = phraseIndexChunkBytes, rows: Int64 = phraseIndexChunkRowsMax) throws -> Bool {
        guard try !phraseIndexesComplete() else { return false }
        // The pairs can be made again from the content: the commit need not wait for the disk.
        return try writeTransaction(spillToFiles: false, relaxedSync: true) { db in
            // A bulk apply changes rows without keeping any index up to date; its close starts the filler again.
            guard try LogTables.meta("search_stale", in: db).integerValue != 1 else { return false }
            for phrase in phraseIndexes {
                let through = try phrase.watermark(in: db)
                guard through != PhraseIndex.complete else { continue }
                // The next rows, up to the budget of text.
                var end: Int64?, bytes: Int64 = 0
                try db.statement(phrase.chunkSQL).read([.integer(through), .integer(rows)], while: { row in
                    end = row.int(0)
                    bytes += row.int(1)
                    return bytes < budget
                })
                guard let end else {
                    try phrase.setWatermark(PhraseIndex.complete, in: db)
                    return true
                }
                try db.execute(phrase.fillSQL, [.integer(through), .integer(end)])
                try phrase.setWatermark(end, in: db)
                return true
            }
            return false
        }
    }

    /// Whether every phrase index holds every row (searches read phrases from them).
    public func phraseIndexesComplete() throws -> Bool {
        try read { db in try phraseIndexes.allSatisfy { try $0.watermark(in: db) == PhraseIndex.complete } }
    }

    /// Fills the phrase indexes on this thread until they are complete, in the same short
    /// transactions as the background filler (which may be working beside it). `progress` gets
    /// rows indexed and the total, at most every `progressSeconds` (counting them reads every
    /// content row's rowid) and once at the end.
    public func completePhraseIndexes(progressSeconds: Double = 0.5, progress: ProgressHandler? = nil) throws {
        var reported = DispatchTime.now().uptimeNanoseconds
        func report() throws {
            guard let progress else { return }
            let status = try phraseIndexStatus()
            progress(status.reduce(0) { $0 + $1.rowsIndexed }, status.reduce(0) { $0 + $1.rows })
            reported = DispatchTime.now().uptimeNanoseconds
        }
        while try fillPhraseIndexChunk() {
            if Double(DispatchTime.now().uptimeNanoseconds - reported) / 1e9 >= progressSeconds { try report() }
        }
        try report()
    }

    /// Each phrase index's progress. Reads every content row's rowid: for status, not hot paths.
    public func phraseIndexStatus() throws -> [PhraseIndexStatus] {
        try read { db in
            try phraseIndexes.map { phrase in
                let through = try phrase.watermark(in: db)
                let rows = try db.scalarInt("SELECT count(*) FROM \(phrase.view)") ?? 0
                let indexed = through == PhraseIndex.complete
                    ? rows : try db.scalarInt("SELECT count(*) FROM \(phrase.view) WHERE rid <= ?1", [.integer(through)]) ?? 0
                return PhraseIndexStatus(index: phrase.index.index, rowsIndexed: indexed, rows: rows,
                                         isComplete: through == PhraseIndex.complete)
            }
        }
    }

    /// Starts the background filler unless it runs (then it looks again before it stops). It
    /// holds the store only while it indexes a chunk: a store let go stops it.
    func startPhraseIndexing() {
        guard !phraseIndexes.isEmpty else { return }
        let start = phraseIndexing.withLock { state -> Bool in
            if state.running {
                state.again = true
                return false
            }
            if let failed = state.failedAt, Date().timeIntervalSince(failed) < Self.phraseIndexRetrySeconds { return false }
            state.running = true
            state.again = false
            return true
        }
        guard start else { return }
        let thread = Thread { [weak self] in
            while true {
                guard let store = self else { return }
                let more: Bool
                do {
                    more = try store.fillPhraseIndexChunk()
                } catch {
                    // Left for later: searches read phrases from the word indexes meanwhile.
                    store.phraseIndexing.withLock { $0 = (false, false, Date()) }
                    return
                }
                if !more {
                    let stop = store.phraseIndexing.withLock { state -> Bool in
                        if state.again {
                            state.again = false
                            return false
                        }
                        state.running = false
                        state.failedAt = nil
                        return true
                    }
                    if stop { return }
                }
                // Between chunks, a write waiting for the writer gets it first.
                usleep(500)
            }
        }
        thread.name = "chronicle.phrase-index"
        thread.qualityOfService = .utility
        thread.start()
    }

    /// Waits until the background filler has stopped (tests and benchmarks).
    public func waitForPhraseIndexing(timeoutSeconds: Double = 600) -> Bool {
        let deadline = Date().addingTimeInterval(timeoutSeconds)
        while phraseIndexing.withLock({ $0.running }) {
            if Date() > deadline { return false }
            usleep(2_000)
        }
        return true
    }
}
