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
    /// Row lengths one connection keeps, over all indexes (about 16 bytes each).
    public static let cachedRowsMax = 250_000

    /// The SELECT that reads an index's newest matches with their scores: `?1` the MATCH
    /// expression, `?2` how many → (rowid, score), newest first. The weights are the schema's,
    /// as in the index's configured `rank`.
    public static func windowSQL(_ index: SearchIndexSpec) -> String {
        let fts = ProjectionSchema.quoted(index.index)
        let name = "'" + index.index.replacingOccurrences(of: "'", with: "''") + "'"
        let weights = index.weights.map { CanonicalJSON.format($0) }.joined(separator: ", ")
        return "SELECT rowid, \(functionName)(\(fts), \(name), \(weights)) FROM \(fts) WHERE \(fts) MATCH ?1 ORDER BY rowid DESC LIMIT ?2"
    }

    /// Registers the function on a connection (any `sqlite3*`; the benchmark's raw baseline
    /// registers it too, to run the same SQL). False when the library has no FTS5.
    @discardableResult
    public static func register(on handle: OpaquePointer) -> Bool {
        guard let api = chronicle_fts5_api(handle), let create = api.pointee.xCreateFunction else { return false }
        let cache = Unmanaged.passRetained(RowLengths()).toOpaque()
        return create(api, functionName, cache, chronicleBM25, releaseRowLengths) == SQLITE_OK
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

/// Per statement: each phrase's IDF, the index's mean row length, the column weights.
private final class RankData {
    var lengths = RowLengths.Index()
    var idf: [Double] = []
    var averageLength: Double = 0
    var weights: [Double] = []
}

private func releaseRankData(_ pointer: UnsafeMutableRawPointer?) {
    guard let pointer else { return }
    Unmanaged<RankData>.fromOpaque(pointer).release()
}

private func countRow(_ api: UnsafePointer<Fts5ExtensionApi>?, _ fts: OpaquePointer?, _ context: UnsafeMutableRawPointer?) -> Int32 {
    context?.assumingMemoryBound(to: Int64.self).pointee += 1
    return SQLITE_OK
}

private func rankError(_ context: OpaquePointer, _ message: String, code: Int32 = SQLITE_ERROR) {
    sqlite3_result_error(context, "chronicle_bm25: " + message, -1)
    sqlite3_result_error_code(context, code)
}

private func chronicleBM25(_ api: UnsafePointer<Fts5ExtensionApi>?, _ fts: OpaquePointer?, _ context: OpaquePointer?,
                           _ count: Int32, _ values: UnsafeMutablePointer<OpaquePointer?>?) {
    guard let context else { return }
    guard let api, let fts, count >= 1, let values, let name = sqlite3_value_text(values[0]) else {
        return rankError(context, "expects the index's name, then its column weights")
    }
    let a = api.pointee
    guard let getAux = a.xGetAuxdata, let setAux = a.xSetAuxdata, let phraseCount = a.xPhraseCount, let rowCount = a.xRowCount,
          let totalSize = a.xColumnTotalSize, let queryPhrase = a.xQueryPhrase, let instCount = a.xInstCount, let inst = a.xInst,
          let columnSize = a.xColumnSize, let rowid = a.xRowid, let userData = a.xUserData, let columnCount = a.xColumnCount,
          let lengthsPointer = userData(fts) else {
        return rankError(context, "this SQLite's FTS5 lacks a needed API")
    }
    let lengths = Unmanaged<RowLengths>.fromOpaque(lengthsPointer).takeUnretainedValue()
    var rc = SQLITE_OK
    let data: RankData
    if let existing = getAux(fts, 0) {
        data = Unmanaged<RankData>.fromOpaque(existing).takeUnretainedValue()
    } else {
        // Once per statement, as bm25(): each phrase's IDF over the whole index, the mean row length.
        data = RankData()
        var rows: Int64 = 0, tokens: Int64 = 0
        rc = rowCount(fts, &rows)
        if rc == SQLITE_OK { rc = totalSize(fts, -1, &tokens) }
        guard rc == SQLITE_OK else { return rankError(context, "could not read the index's size", code: rc) }
        data.averageLength = Double(tokens) / Double(rows)
        for phrase in 0..<phraseCount(fts) {
            var hits: Int64 = 0
            rc = queryPhrase(fts, phrase, &hits, countRow)
            guard rc == SQLITE_OK else { return rankError(context, "could not count the phrase's rows", code: rc) }
            var idf = Foundation.log((Double(rows) - Double(hits) + 0.5) / (Double(hits) + 0.5))
            if idf <= 0.0 { idf = 1e-6 }
            data.idf.append(idf)
        }
        data.weights = (0..<Int(columnCount(fts))).map { $0 + 1 < Int(count) ? sqlite3_value_double(values[$0 + 1]) : 1.0 }
        data.lengths = lengths.lengths(of: String(cString: name), sqlite3_context_db_handle(context))
        rc = setAux(fts, Unmanaged.passRetained(data).toOpaque(), releaseRankData)
        guard rc == SQLITE_OK else { return rankError(context, "out of memory", code: rc) }
    }

    // This row's length in tokens, read once per connection until the database changes…
    let id = rowid(fts)
    let known = data.lengths
    var length: Int32 = 0
    if let cached = known.rows[id] {
        length = cached
    } else {
        rc = columnSize(fts, -1, &length)
        guard rc == SQLITE_OK else { return rankError(context, "could not read the row's length", code: rc) }
        known.rows[id] = length
    }
    let idf = data.idf, weights = data.weights, averageLength = data.averageLength
    withUnsafeTemporaryAllocation(of: Double.self, capacity: idf.count) { frequencies in
        // …and the weighted hits of each phrase in it.
        frequencies.initialize(repeating: 0)
        var n: Int32 = 0
        rc = instCount(fts, &n)
        guard rc == SQLITE_OK else { return rankError(context, "could not read the row's matches", code: rc) }
        for i in 0..<n {
            var phrase: Int32 = 0, column: Int32 = 0, offset: Int32 = 0
            rc = inst(fts, i, &phrase, &column, &offset)
            guard rc == SQLITE_OK else { return rankError(context, "could not read the row's matches", code: rc) }
            if Int(phrase) < frequencies.count, Int(column) < weights.count { frequencies[Int(phrase)] += weights[Int(column)] }
        }
        // As fts5Bm25Function (SQLite's ext/fts5/fts5_aux.c), term for term.
        let k1 = 1.2, b = 0.75
        let d = Double(length)
        var score = 0.0
        for i in idf.indices {
            score += idf[i] * ((frequencies[i] * (k1 + 1.0)) / (frequencies[i] + k1 * (1 - b + b * d / averageLength)))
        }
        sqlite3_result_double(context, -1.0 * score)
    }
}
