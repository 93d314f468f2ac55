import CSQLite
import ChronicleCore
import Foundation

/// `chronicle_bm25(index, 'name', weight, …)`: FTS5's `bm25()` — the same formula, constants
/// and order of operations, so the same scores — with each row's length in tokens remembered
/// by the connection until the database next changes.
///
/// FTS5's `bm25()` reads a row's length from the index's `_docsize` table with one SQL
/// statement per ranked row; for the short rows of titles and highlights that was half the
/// cost of ranking a window of 1,000 matches. Here a length read once is kept in a table per
/// connection and per index (`name`, the index's own name), which is emptied when
/// `SQLITE_FCNTL_DATA_VERSION` says the database changed since (any connection's commit) and
/// when it grows past `cachedRowsMax`. See <https://sqlite.org/fts5.html#the_bm25_function>.
public enum SearchRank {
    public static let functionName = "chronicle_bm25"
    /// `chronicle_bm25_term(index, 'name', window, weight, …)`: for a query of one phrase, a
    /// row's bm25 before the phrase's IDF, so the IDF can come from the window's own length
    /// (`score(idf:term:)`, `WindowCounts`). An SQL error for a query of more phrases.
    public static let termFunctionName = "chronicle_bm25_term"
    /// `chronicle_bm25_term_reading_on(index, 'name', window, weight, …)`: `chronicle_bm25_term`
    /// for a statement with no LIMIT (`termWindowReadingOnSQL`): the first `window` rows get
    /// their value, every later row NULL, and all of them are counted, so the phrase's matches
    /// are counted in the window's own pass.
    public static let termReadingOnFunctionName = "chronicle_bm25_term_reading_on"
    /// Row lengths one connection keeps, over all indexes (about 16 bytes each).
    public static let cachedRowsMax = 250_000

    /// The SELECT that reads an index's newest matches with their scores: `?1` the MATCH
    /// expression, `?2` how many → (rowid, score), newest first. The weights are the schema's,
    /// as in the index's configured `rank`.
    public static func windowSQL(_ index: SearchIndexSpec) -> String {
        newestMatchesSQL(index, function: functionName)
    }

    /// `SELECT rowid, function(index, 'name', extra…, weights…)` over the newest `?2` matches of `?1`
    /// (over all of them, newest first, without `limited`).
    /// `table`: another FTS5 table with the index's columns and row lengths (its phrase index).
    private static func newestMatchesSQL(_ index: SearchIndexSpec, function: String, extraArguments: String = "",
                                         limited: Bool = true, table: String? = nil) -> String {
        let fts = ProjectionSchema.quoted(table ?? index.index)
        let name = "'" + (table ?? index.index).replacingOccurrences(of: "'", with: "''") + "'"
        let weights = index.weights.map { CanonicalJSON.format($0) }.joined(separator: ", ")
        return "SELECT rowid, \(function)(\(fts), \(name), \(extraArguments)\(weights)) FROM \(fts) WHERE \(fts) MATCH ?1 ORDER BY rowid DESC"
            + (limited ? " LIMIT ?2" : "")
    }

    /// The SELECT that reads the newest matches of a one-phrase query: `?1` the MATCH expression,
    /// `?2` how many → (rowid, score before the IDF), newest first. The phrase's IDF then comes
    /// from `WindowCounts.idf`.
    ///
    /// FTS5's bm25() counts the phrase's matches over the whole index before it ranks the first
    /// row: a second pass over the index. Here a window that holds every match has that count
    /// as its length. A full window of a phrase of several words (where FTS5 spends its time
    /// matching positions in rows that hold every word, and only some rows match) is followed by
    /// `restCountSQL`, which counts only the older matches; a full window of one word or prefix
    /// (whose rows are cheap to find and many) is counted on its last row by FTS5's phrase
    /// query, as bm25() counts.
    public static func termWindowSQL(_ index: SearchIndexSpec, table: String? = nil) -> String {
        newestMatchesSQL(index, function: termFunctionName, extraArguments: "?2, ", table: table)
    }

    /// `termWindowSQL` that reads on past the window: `?1` the MATCH expression, `?2` the window's
    /// size → (rowid, score before the IDF) of the newest `?2` matches, then (rowid, NULL) for each
    /// older one, which `chronicle_bm25_term_reading_on` counts into `WindowCounts.hits`.
    ///
    /// For a prefix that no prefix index of the index serves (`readsOn`; in an index of long rows,
    /// `hasLongRows`), FTS5 merges the rows of every indexed word that begins with it before it
    /// returns the first row, and a second query of the prefix (bm25()'s count, or `restCountSQL`)
    /// merges them all again: on 20,000 long articles 5 ms each for a four-letter prefix of a
    /// common stem. Stepping through the merged rows costs a fraction of that.
    public static func termWindowReadingOnSQL(_ index: SearchIndexSpec) -> String {
        newestMatchesSQL(index, function: termReadingOnFunctionName, extraArguments: "?2, ", limited: false)
    }

    /// Whether a search reads `query`'s window with `termWindowReadingOnSQL` in an index with
    /// prefix indexes of `prefixLengths` (`ProjectionSchema.prefixIndexLengths(of:)`): a query of
    /// one prefix of one token (letters and digits only) whose length in bytes, as FTS5 measures a
    /// prefix, has no prefix index there; it does so in the indexes of long rows (`hasLongRows`).
    /// The counts, and so the scores, are the same either way; only the time differs.
    public static func readsOn(_ query: SearchQuery, prefixLengths: [Int] = ProjectionSchema.prefixIndexLengths) -> Bool {
        guard query.terms.count == 1, let term = query.terms.first, term.isPrefix,
              term.text.allSatisfy({ $0.isLetter || $0.isNumber }) else { return false }
        return !prefixLengths.contains(term.text.lowercased().utf8.count)
    }

    /// Rows of at least this many tokens on average make an index one of long rows (`hasLongRows`).
    public static let readingOnRowTokensMin: Int64 = 100

    /// Whether a long prefix is read on past its window in an index of `rows` rows holding
    /// `tokens` tokens: where rows are long (article text, transcripts), merging a prefix's words
    /// means merging their many positions in each row, and reading on costs less than merging
    /// twice; where they are short (titles, tags), merging costs little, and stepping through
    /// every match (all 100,000 titles for `http*`) costs more.
    public static func hasLongRows(rows: Int64, tokens: Int64) -> Bool {
        rows > 0 && tokens / rows >= readingOnRowTokensMin
    }

    /// The row count and token total (over all columns) in FTS5's averages record (an index's
    /// `_data` row 1: the row count, then each column's token total, as SQLite varints); zeros
    /// where the record is short or not as described.
    public static func indexTotals(averagesRecord bytes: UnsafeRawBufferPointer) -> (rows: Int64, tokens: Int64) {
        var values: [Int64] = [], offset = 0
        while offset < bytes.count, let (value, length) = sqliteVarint(bytes, at: offset) {
            values.append(value)
            offset += length
        }
        return (max(0, values.first ?? 0), values.dropFirst().reduce(0) { $0 &+ max(0, $1) })
    }

    /// An SQLite varint (big-endian, 7 bits a byte while the high bit is set, all 8 bits of a
    /// ninth byte) at `offset`: its value and length, nil if the bytes end first.
    static func sqliteVarint(_ bytes: UnsafeRawBufferPointer, at offset: Int) -> (Int64, Int)? {
        var value: UInt64 = 0
        for i in 0..<9 {
            guard offset + i < bytes.count else { return nil }
            let byte = bytes[offset + i]
            if i == 8 { return (Int64(bitPattern: value << 8 | UInt64(byte)), 9) }
            value = value << 7 | UInt64(byte & 0x7F)
            if byte & 0x80 == 0 { return (Int64(bitPattern: value), i + 1) }
        }
        return nil
    }

    /// `?1` the MATCH expression, `?2` the oldest rowid of a full window → how many older rows match.
    public static func restCountSQL(_ index: SearchIndexSpec, table: String? = nil) -> String {
        let fts = ProjectionSchema.quoted(table ?? index.index)
        return "SELECT count(*) FROM \(fts) WHERE \(fts) MATCH ?1 AND rowid < ?2"
    }

    /// `restCountSQL` over part of the older rows: `?1` the MATCH expression, rowids from `?2` up to
    /// (not including) `?3` → how many of them match. A search counts two parts at once.
    public static func rangeCountSQL(_ index: SearchIndexSpec, table: String? = nil) -> String {
        let fts = ProjectionSchema.quoted(table ?? index.index)
        return "SELECT count(*) FROM \(fts) WHERE \(fts) MATCH ?1 AND rowid >= ?2 AND rowid < ?3"
    }

    /// What the last `chronicle_bm25_term` statement on a connection found, for its phrase's IDF.
    /// Read after the statement has given its rows, on the connection's thread.
    public final class WindowCounts {
        /// Rows in the index (bm25's N); set on the statement's first row.
        public fileprivate(set) var rows: Int64 = 0
        /// Tokens in the phrase; set on the statement's first row.
        public fileprivate(set) var tokens = 0
        /// The phrase's matches over the whole index: of a one-token phrase, counted on a full
        /// window's last row; with `chronicle_bm25_term_reading_on`, every row read so far.
        public fileprivate(set) var hits: Int64?
        /// Whether the statement reads on past its window, counting (`termWindowReadingOnSQL`).
        public fileprivate(set) var readingOn = false

        /// Whether a full window's older matches are for the caller to count (`restCountSQL`).
        public var callerCountsRest: Bool { tokens > 1 && !readingOn }

        /// The phrase's IDF after a window of `returned` rows with `window` as its limit; `rest`
        /// counts a full window's older matches when `callerCountsRest`.
        public func idf(returned: Int, window: Int, rest: () throws -> Int64) rethrows -> Double {
            let matches: Int64
            if returned < window { matches = Int64(returned) }
            else if callerCountsRest { matches = Int64(returned) + (try rest()) }
            else { matches = hits ?? Int64(returned) }
            return SearchRank.idf(rows: rows, hits: matches)
        }
    }

    /// bm25's IDF of a phrase found in `hits` of the index's `rows` rows (never below 1e-6).
    public static func idf(rows: Int64, hits: Int64) -> Double {
        let idf = Foundation.log((Double(rows) - Double(hits) + 0.5) / (Double(hits) + 0.5))
        return idf <= 0.0 ? 1e-6 : idf
    }

    /// One phrase's part of bm25 in a row before its IDF: its weighted hits in the row
    /// (`frequency`), against the row's length and the index's mean row length.
    @inline(__always)
    static func term(frequency: Double, length: Double, averageLength: Double) -> Double {
        let k1 = 1.2, b = 0.75
        return (frequency * (k1 + 1.0)) / (frequency + k1 * (1 - b + b * length / averageLength))
    }

    /// The score bm25() gives a row for a one-phrase query, from `chronicle_bm25_term`'s value:
    /// the same operations in the same order (`fts5Bm25Function`), so the same bits.
    public static func score(idf: Double, term: Double) -> Double {
        var score = 0.0
        score += idf * term
        return -1.0 * score
    }

    /// Registers the functions on a connection (any `sqlite3*`; the benchmark's raw baseline
    /// registers them too, to run the same SQL). Nil when the library has no FTS5; else where
    /// `chronicle_bm25_term` leaves its counts on this connection.
    @discardableResult
    public static func register(on handle: OpaquePointer) -> WindowCounts? {
        guard let api = chronicle_fts5_api(handle), let create = api.pointee.xCreateFunction else { return nil }
        // Both functions share the remembered lengths.
        let lengths = RowLengths()
        guard create(api, functionName, Unmanaged.passRetained(lengths).toOpaque(), chronicleBM25, releaseRowLengths) == SQLITE_OK,
              create(api, termFunctionName, Unmanaged.passRetained(lengths).toOpaque(), chronicleBM25Term, releaseRowLengths) == SQLITE_OK,
              create(api, termReadingOnFunctionName, Unmanaged.passRetained(lengths).toOpaque(), chronicleBM25TermReadingOn,
                     releaseRowLengths) == SQLITE_OK
        else { return nil }
        return lengths.window
    }
}

/// One connection's remembered row lengths, by index and rowid. Used only by the thread that
/// runs the connection's statement, as the connection itself is.
final class RowLengths {
    /// One index's lengths by rowid.
    final class Index {
        var rows: [Int64: Int32]
        init() {
            rows = [:]
            rows.reserveCapacity(4_096)   // a window's worth without growing
        }
    }

    var dataVersion: UInt32?
    var byIndex: [String: Index] = [:]
    /// The counts of the connection's last `chronicle_bm25_term` statement.
    let window = SearchRank.WindowCounts()

    /// The lengths kept for `index`, all forgotten first when the database has changed since
    /// they were read (or there are too many). Inside a write transaction the connection may
    /// change rows before its own commit moves the data version, so nothing is kept or reused.
    func lengths(of index: String, _ db: OpaquePointer?) -> Index {
        if sqlite3_txn_state(db, "main") == SQLITE_TXN_WRITE {
            byIndex.removeAll()
            dataVersion = nil
            return Index()
        }
        var version: UInt32 = 0
        let known = sqlite3_file_control(db, "main", SQLITE_FCNTL_DATA_VERSION, &version) == SQLITE_OK
        if !known || version != dataVersion || byIndex.values.reduce(0, { $0 + $1.rows.count }) > SearchRank.cachedRowsMax {
            byIndex.removeAll()
        }
        dataVersion = known ? version : nil
        if let existing = byIndex[index] { return existing }
        let made = Index()
        byIndex[index] = made
        return made
    }
}

private func releaseRowLengths(_ pointer: UnsafeMutableRawPointer?) {
    guard let pointer else { return }
    Unmanaged<RowLengths>.fromOpaque(pointer).release()
}

/// Per statement: each phrase's IDF (none for `chronicle_bm25_term`), the index's mean row
/// length, the column weights.
private final class RankData {
    var lengths = RowLengths.Index()
    var idf: [Double] = []
    var averageLength: Double = 0
    var weights: [Double] = []
    /// `chronicle_bm25_term`: rows ranked so far, and the window's size (its LIMIT).
    var ranked = 0
    var windowSize = 0
}

private func releaseRankData(_ pointer: UnsafeMutableRawPointer?) {
    guard let pointer else { return }
    Unmanaged<RankData>.fromOpaque(pointer).release()
}

private func countRow(_ api: UnsafePointer<Fts5ExtensionApi>?, _ fts: OpaquePointer?, _ context: UnsafeMutableRawPointer?) -> Int32 {
    context?.assumingMemoryBound(to: Int64.self).pointee += 1
    return SQLITE_OK
}

private func rankError(_ context: OpaquePointer, _ function: String, _ message: String, code: Int32 = SQLITE_ERROR) {
    sqlite3_result_error(context, function + ": " + message, -1)
    sqlite3_result_error_code(context, code)
}

/// What both rank functions need of FTS5's extension API.
private struct RankAPI {
    let getAux: @convention(c) (OpaquePointer?, Int32) -> UnsafeMutableRawPointer?
    let setAux: @convention(c) (OpaquePointer?, UnsafeMutableRawPointer?, (@convention(c) (UnsafeMutableRawPointer?) -> Void)?) -> Int32
    let phraseCount: @convention(c) (OpaquePointer?) -> Int32
    let phraseSize: @convention(c) (OpaquePointer?, Int32) -> Int32
    let rowCount: @convention(c) (OpaquePointer?, UnsafeMutablePointer<sqlite3_int64>?) -> Int32
    let totalSize: @convention(c) (OpaquePointer?, Int32, UnsafeMutablePointer<sqlite3_int64>?) -> Int32
    let queryPhrase: @convention(c) (OpaquePointer?, Int32, UnsafeMutableRawPointer?,
                                     (@convention(c) (UnsafePointer<Fts5ExtensionApi>?, OpaquePointer?, UnsafeMutableRawPointer?) -> Int32)?) -> Int32
    let instCount: @convention(c) (OpaquePointer?, UnsafeMutablePointer<Int32>?) -> Int32
    let inst: @convention(c) (OpaquePointer?, Int32, UnsafeMutablePointer<Int32>?, UnsafeMutablePointer<Int32>?, UnsafeMutablePointer<Int32>?) -> Int32
    let columnSize: @convention(c) (OpaquePointer?, Int32, UnsafeMutablePointer<Int32>?) -> Int32
    let rowid: @convention(c) (OpaquePointer?) -> sqlite3_int64
    let columnCount: @convention(c) (OpaquePointer?) -> Int32
    let lengths: RowLengths

    init?(_ api: UnsafePointer<Fts5ExtensionApi>, _ fts: OpaquePointer) {
        let a = api.pointee
        guard let getAux = a.xGetAuxdata, let setAux = a.xSetAuxdata, let phraseCount = a.xPhraseCount, let phraseSize = a.xPhraseSize, let rowCount = a.xRowCount,
              let totalSize = a.xColumnTotalSize, let queryPhrase = a.xQueryPhrase, let instCount = a.xInstCount, let inst = a.xInst,
              let columnSize = a.xColumnSize, let rowid = a.xRowid, let userData = a.xUserData, let columnCount = a.xColumnCount,
              let lengthsPointer = userData(fts) else { return nil }
        self.getAux = getAux; self.setAux = setAux; self.phraseCount = phraseCount; self.phraseSize = phraseSize; self.rowCount = rowCount
        self.totalSize = totalSize; self.queryPhrase = queryPhrase; self.instCount = instCount; self.inst = inst
        self.columnSize = columnSize; self.rowid = rowid; self.columnCount = columnCount
        lengths = Unmanaged<RowLengths>.fromOpaque(lengthsPointer).takeUnretainedValue()
    }
}

/// The statement's `RankData`, made on its first row: the mean row length, the weights (the
/// arguments after the index's name) and, with `idf`, each phrase's IDF over the whole index.
private func rankData(_ api: RankAPI, _ fts: OpaquePointer, _ context: OpaquePointer, _ function: String,
                      _ count: Int32, _ values: UnsafeMutablePointer<OpaquePointer?>, name: UnsafePointer<UInt8>, idf: Bool,
                      firstWeight: Int = 1) -> RankData? {
    if let existing = api.getAux(fts, 0) { return Unmanaged<RankData>.fromOpaque(existing).takeUnretainedValue() }
    let data = RankData()
    var rows: Int64 = 0, tokens: Int64 = 0
    var rc = api.rowCount(fts, &rows)
    if rc == SQLITE_OK { rc = api.totalSize(fts, -1, &tokens) }
    guard rc == SQLITE_OK else { rankError(context, function, "could not read the index's size", code: rc); return nil }
    data.averageLength = Double(tokens) / Double(rows)
    if idf {
        // As bm25(): each phrase's matches counted over the whole index.
        for phrase in 0..<api.phraseCount(fts) {
            var hits: Int64 = 0
            rc = api.queryPhrase(fts, phrase, &hits, countRow)
            guard rc == SQLITE_OK else { rankError(context, function, "could not count the phrase's rows", code: rc); return nil }
            data.idf.append(SearchRank.idf(rows: rows, hits: hits))
        }
    }
    data.weights = (0..<Int(api.columnCount(fts))).map { $0 + firstWeight < Int(count) ? sqlite3_value_double(values[$0 + firstWeight]) : 1.0 }
    data.lengths = api.lengths.lengths(of: String(cString: name), sqlite3_context_db_handle(context))
    rc = api.setAux(fts, Unmanaged.passRetained(data).toOpaque(), releaseRankData)
    guard rc == SQLITE_OK else { rankError(context, function, "out of memory", code: rc); return nil }
    return data
}

/// The current row's length in tokens, read once per connection until the database changes.
private func rowLength(_ api: RankAPI, _ fts: OpaquePointer, _ data: RankData) -> (length: Int32, rc: Int32) {
    let id = api.rowid(fts)
    if let cached = data.lengths.rows[id] { return (cached, SQLITE_OK) }
    var length: Int32 = 0
    let rc = api.columnSize(fts, -1, &length)
    if rc == SQLITE_OK { data.lengths.rows[id] = length }
    return (length, rc)
}

/// The current row's weighted hits of each phrase, into `frequencies` (zeroed first).
private func phraseFrequencies(_ api: RankAPI, _ fts: OpaquePointer, _ weights: [Double], into frequencies: UnsafeMutableBufferPointer<Double>) -> Int32 {
    frequencies.initialize(repeating: 0)
    var n: Int32 = 0
    var rc = api.instCount(fts, &n)
    guard rc == SQLITE_OK else { return rc }
    for i in 0..<n {
        var phrase: Int32 = 0, column: Int32 = 0, offset: Int32 = 0
        rc = api.inst(fts, i, &phrase, &column, &offset)
        guard rc == SQLITE_OK else { return rc }
        if Int(phrase) < frequencies.count, Int(column) < weights.count { frequencies[Int(phrase)] += weights[Int(column)] }
    }
    return SQLITE_OK
}

private func chronicleBM25(_ api: UnsafePointer<Fts5ExtensionApi>?, _ fts: OpaquePointer?, _ context: OpaquePointer?,
                           _ count: Int32, _ values: UnsafeMutablePointer<OpaquePointer?>?) {
    let function = SearchRank.functionName
    guard let context else { return }
    guard let api, let fts, count >= 1, let values, let name = sqlite3_value_text(values[0]) else {
        return rankError(context, function, "expects the index's name, then its column weights")
    }
    guard let rank = RankAPI(api, fts) else { return rankError(context, function, "this SQLite's FTS5 lacks a needed API") }
    guard let data = rankData(rank, fts, context, function, count, values, name: name, idf: true) else { return }
    let (length, rc) = rowLength(rank, fts, data)
    guard rc == SQLITE_OK else { return rankError(context, function, "could not read the row's length", code: rc) }
    let idf = data.idf, averageLength = data.averageLength
    withUnsafeTemporaryAllocation(of: Double.self, capacity: idf.count) { frequencies in
        let rc = phraseFrequencies(rank, fts, data.weights, into: frequencies)
        guard rc == SQLITE_OK else { return rankError(context, function, "could not read the row's matches", code: rc) }
        // As fts5Bm25Function (SQLite's ext/fts5/fts5_aux.c), term for term.
        let d = Double(length)
        var score = 0.0
        for i in idf.indices {
            score += idf[i] * SearchRank.term(frequency: frequencies[i], length: d, averageLength: averageLength)
        }
        sqlite3_result_double(context, -1.0 * score)
    }
}

/// `chronicle_bm25_term`: the one phrase's `SearchRank.term` in this row, the IDF left to the caller
/// (`SearchRank.WindowCounts`).
private func chronicleBM25Term(_ api: UnsafePointer<Fts5ExtensionApi>?, _ fts: OpaquePointer?, _ context: OpaquePointer?,
                               _ count: Int32, _ values: UnsafeMutablePointer<OpaquePointer?>?) {
    bm25Term(SearchRank.termFunctionName, readingOn: false, api, fts, context, count, values)
}

/// `chronicle_bm25_term_reading_on`: the same for the window's rows, NULL for every later row, all counted.
private func chronicleBM25TermReadingOn(_ api: UnsafePointer<Fts5ExtensionApi>?, _ fts: OpaquePointer?, _ context: OpaquePointer?,
                                        _ count: Int32, _ values: UnsafeMutablePointer<OpaquePointer?>?) {
    bm25Term(SearchRank.termReadingOnFunctionName, readingOn: true, api, fts, context, count, values)
}

private func bm25Term(_ function: String, readingOn: Bool, _ api: UnsafePointer<Fts5ExtensionApi>?, _ fts: OpaquePointer?,
                      _ context: OpaquePointer?, _ count: Int32, _ values: UnsafeMutablePointer<OpaquePointer?>?) {
    guard let context else { return }
    guard let api, let fts, count >= 2, let values, let name = sqlite3_value_text(values[0]),
          sqlite3_value_type(values[1]) == SQLITE_INTEGER, sqlite3_value_int64(values[1]) > 0 else {
        return rankError(context, function, "expects the index's name, the window's size, then its column weights")
    }
    guard let rank = RankAPI(api, fts) else { return rankError(context, function, "this SQLite's FTS5 lacks a needed API") }
    guard rank.phraseCount(fts) == 1 else { return rankError(context, function, "ranks a query of exactly one phrase") }
    let first = rank.getAux(fts, 0) == nil
    guard let data = rankData(rank, fts, context, function, count, values, name: name, idf: false, firstWeight: 2) else { return }
    let counts = rank.lengths.window
    if first {
        var rows: Int64 = 0
        let rc = rank.rowCount(fts, &rows)
        guard rc == SQLITE_OK else { return rankError(context, function, "could not read the index's size", code: rc) }
        counts.rows = rows
        counts.hits = nil
        counts.tokens = Int(rank.phraseSize(fts, 0))
        counts.readingOn = readingOn
        data.windowSize = Int(min(sqlite3_value_int64(values[1]), Int64(Int.max)))
    }
    data.ranked += 1
    if readingOn {
        counts.hits = Int64(data.ranked)
        // Past the window a row is only counted.
        guard data.ranked <= data.windowSize else { return sqlite3_result_null(context) }
    } else if data.ranked == data.windowSize && !counts.callerCountsRest {
        // A full window of a one-token phrase: its matches are counted as bm25() counts them.
        var hits: Int64 = 0
        let rc = rank.queryPhrase(fts, 0, &hits, countRow)
        guard rc == SQLITE_OK else { return rankError(context, function, "could not count the phrase's rows", code: rc) }
        counts.hits = hits
    }
    let (length, rc) = rowLength(rank, fts, data)
    guard rc == SQLITE_OK else { return rankError(context, function, "could not read the row's length", code: rc) }
    var frequency = 0.0
    let found = withUnsafeMutablePointer(to: &frequency) {
        phraseFrequencies(rank, fts, data.weights, into: UnsafeMutableBufferPointer(start: $0, count: 1))
    }
    guard found == SQLITE_OK else { return rankError(context, function, "could not read the row's matches", code: found) }
    sqlite3_result_double(context, SearchRank.term(frequency: frequency, length: Double(length), averageLength: data.averageLength))
}
