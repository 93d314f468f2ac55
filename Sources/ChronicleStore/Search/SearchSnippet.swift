import CSQLite
import ChronicleCore

/// `chronicle_snippet(index, open, close, ellipsis, tokens)`: an FTS5 auxiliary function that
/// returns the best `tokens`-token passage of a matched row with the matched words between
/// the markers, as FTS5's own `snippet()` does, without reading the whole document.
///
/// `snippet()` tokenizes every column of the row to its end to place and mark a passage:
/// about 0.1 ms for a 2,000-word article, which made snippets a third of a two-word search.
/// This function picks the passage from the phrase instances FTS5 already knows (`xInst`:
/// column and token offset, no tokenizing), then tokenizes the chosen column only up to the
/// passage's end and stops there. The passage is the window holding the most distinct
/// phrases (then the most instances; the earliest on a tie), with the matches centred where
/// the text allows. See <https://sqlite.org/fts5.html#custom_auxiliary_functions>.
///
/// Over a phrase index (`PhraseIndex`), which is contentless, the row's text comes as one more
/// argument per column, `chronicle_snippet(pairs, open, close, ellipsis, tokens, text…)`, the
/// values its word index holds. A pair token stands at its first word's position, so a phrase of
/// n pairs spans n + 1 words there, and the text is tokenized by the words' tokenizer: the
/// passage is the one the word index gives, read from one token's list instead of the position
/// lists of every word of the phrase.
public enum SearchSnippet {
    /// The SQL name; registered on every connection `Database` opens.
    public static let functionName = "chronicle_snippet"

    /// Registers the function on a connection (any `sqlite3*`: the benchmark's raw baseline
    /// registers it too, to run the same SQL). False when the library has no FTS5.
    @discardableResult
    public static func register(on handle: OpaquePointer) -> Bool {
        guard let api = chronicle_fts5_api(handle), let create = api.pointee.xCreateFunction else { return false }
        // The words' tokenizer, for passages read through a phrase index (given the columns' text).
        let words = WordTokenizer(handle: handle).map { Unmanaged.passRetained($0).toOpaque() }
        let rc = create(api, functionName, words, chronicleSnippet, words == nil ? nil : releaseWordTokenizer)
        // On failure FTS5 has already called the destructor.
        return rc == SQLITE_OK
    }

    /// The tokens of a search hit's passage.
    public static let passageTokens = 12

    /// `?1`/`?2` markers, `?3` match, `?4`…`?5` rowid range, `?6` JSON array of rowids → (rowid,
    /// passage) of the rows of `index` among them that match. (`+rowid`: the list filters the range
    /// scan instead of becoming one seek per rowid.)
    public static func sql(over index: SearchIndexSpec) -> String {
        let fts = ProjectionSchema.quoted(index.index)
        return "SELECT rowid, \(functionName)(\(fts), ?1, ?2, '…', \(passageTokens)) FROM \(fts) WHERE \(fts) MATCH ?3 "
            + "AND rowid BETWEEN ?4 AND ?5 AND +rowid IN (SELECT value FROM json_each(?6))"
    }

    /// The same over the phrase index beside `index` (`SearchPairs.phraseIndexTable`), `?3` a phrase
    /// of pairs (`SearchPairs.phraseMatch`): the passages the word index gives for the phrase of
    /// words, the text read from the rows both indexes hold. Nil if `index` has no phrase index.
    public static func phraseIndexSQL(over index: SearchIndexSpec) -> String? {
        guard let table = SearchPairs.phraseIndexTable(of: index) else { return nil }
        let pairs = ProjectionSchema.quoted(table), q = ProjectionSchema.quoted
        let texts = index.fields.map { "v." + q($0) }.joined(separator: ", ")
        return "SELECT \(pairs).rowid, \(functionName)(\(pairs), ?1, ?2, '…', \(passageTokens), \(texts)) FROM \(pairs) "
            + "CROSS JOIN \(q(ProjectionSchema.contentViewName(of: index))) AS v ON v.rid = \(pairs).rowid WHERE \(pairs) MATCH ?3 "
            + "AND \(pairs).rowid BETWEEN ?4 AND ?5 AND +\(pairs).rowid IN (SELECT value FROM json_each(?6))"
    }

    /// A gap between two hits' rowids past which a phrase's snippets are read in two passes
    /// (`passes`): each pass costs FTS5 a cursor of its own (about 50–75 µs, as much as reading
    /// the position lists of two common words in about 1,000 rows of 2,000 words).
    public static let phrasePassGap: Int64 = 1_000

    /// Whether `query` is one phrase of several words (`passes`), its words as the connection's
    /// search indexes hold them.
    public static func isPhraseOfWords(_ query: SearchQuery, on handle: OpaquePointer) -> Bool {
        query.terms.count == 1 && (SearchPairs.words(of: query.terms[0].text, on: handle)?.count ?? 0) >= 2
    }

    /// The rowid ranges a search reads one index's snippets in (`rowid BETWEEN` each), for the
    /// rowids of its hits.
    ///
    /// One range over them all, unless the query is one phrase of several words. There the word
    /// index finds the phrase in a range by reading the position lists of every row that holds all
    /// its words, and a phrase of common words can be rare: its best 20 hits then lie apart over
    /// the whole index, the range is most of it, and reading it took 4 ms for `"vi mu"` (762 of
    /// 20,000 full texts) where 20 seeks took 1.5. So the hits are cut into runs wherever two are
    /// more than `phrasePassGap` rowids apart.
    public static func passes(over rowids: [Int64], phraseOfWords: Bool) -> [ClosedRange<Int64>] {
        guard let lowest = rowids.min(), let highest = rowids.max() else { return [] }
        guard phraseOfWords else { return [lowest...highest] }
        var ranges: [ClosedRange<Int64>] = []
        var start = lowest, end = lowest
        for rowid in rowids.sorted().dropFirst() {
            if rowid - end > phrasePassGap {
                ranges.append(start...end)
                start = rowid
            }
            end = rowid
        }
        ranges.append(start...end)
        return ranges
    }
}

/// Called by FTS5 when the connection closes or the function is registered again.
private func releaseWordTokenizer(_ box: UnsafeMutableRawPointer?) {
    guard let box else { return }
    Unmanaged<WordTokenizer>.fromOpaque(box).release()
}

/// One phrase instance in the row: which phrase, where, and how many tokens it spans.
struct Instance {
    var phrase: Int32
    var column: Int32
    var offset: Int32
    var size: Int32
    var end: Int32 { offset + size }
}

/// State of one early-stopping tokenization: the byte ranges of tokens `start..<end`.
final class TokenWindow {
    let start: Int32
    let end: Int32
    var position: Int32 = 0
    var ranges: [(start: Int32, end: Int32)] = []
    /// True when the column has tokens past the window (the passage gets a closing ellipsis).
    var more = false

    init(start: Int32, end: Int32) {
        self.start = start
        self.end = end
        ranges.reserveCapacity(Int(end - start))
    }
}

func collectToken(_ context: UnsafeMutableRawPointer?, _ flags: Int32, _ token: UnsafePointer<CChar>?, _ length: Int32,
                          _ start: Int32, _ end: Int32) -> Int32 {
    guard let context else { return SQLITE_ERROR }
    let window = Unmanaged<TokenWindow>.fromOpaque(context).takeUnretainedValue()
    // A colocated token (a synonym) shares the position of the one before it.
    if flags & FTS5_TOKEN_COLOCATED != 0 { return SQLITE_OK }
    let position = window.position
    window.position += 1
    if position < window.start { return SQLITE_OK }
    if position >= window.end {
        window.more = true
        return SQLITE_DONE  // stops the tokenizer; the rest of the text is never read
    }
    window.ranges.append((start, end))
    return SQLITE_OK
}

func valueBytes(_ value: OpaquePointer?) -> [UInt8] {
    guard let value, let text = sqlite3_value_text(value) else { return [] }
    return Array(UnsafeBufferPointer(start: text, count: Int(sqlite3_value_bytes(value))))
}

func fail(_ context: OpaquePointer, _ message: String, code: Int32) {
    sqlite3_result_error(context, "chronicle_snippet: " + message, -1)
    sqlite3_result_error_code(context, code)
}

func chronicleResult(_ context: OpaquePointer, _ bytes: [UInt8]) {
    guard !bytes.isEmpty else {
        _ = chronicle_result_text(context, "", 0)
        return
    }
    bytes.withUnsafeBytes { buffer in
        _ = chronicle_result_text(context, buffer.baseAddress!.assumingMemoryBound(to: CChar.self), Int32(buffer.count))
    }
}
