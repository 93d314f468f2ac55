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
private struct Instance {
    var phrase: Int32
    var column: Int32
    var offset: Int32
    var size: Int32
    var end: Int32 { offset + size }
}

/// State of one early-stopping tokenization: the byte ranges of tokens `start..<end`.
private final class TokenWindow {
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

private func collectToken(_ context: UnsafeMutableRawPointer?, _ flags: Int32, _ token: UnsafePointer<CChar>?, _ length: Int32,
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

private func valueBytes(_ value: OpaquePointer?) -> [UInt8] {
    guard let value, let text = sqlite3_value_text(value) else { return [] }
    return Array(UnsafeBufferPointer(start: text, count: Int(sqlite3_value_bytes(value))))
}

private func fail(_ context: OpaquePointer, _ message: String, code: Int32) {
    sqlite3_result_error(context, "chronicle_snippet: " + message, -1)
    sqlite3_result_error_code(context, code)
}

private func chronicleSnippet(_ api: UnsafePointer<Fts5ExtensionApi>?, _ fts: OpaquePointer?, _ context: OpaquePointer?,
                              _ count: Int32, _ values: UnsafeMutablePointer<OpaquePointer?>?) {
    guard let context else { return }
    guard let api, let fts, let values else {
        return fail(context, "expects an open marker, a close marker, an ellipsis and a token count", code: SQLITE_ERROR)
    }
    let a = api.pointee
    guard let instCount = a.xInstCount, let inst = a.xInst, let phraseSize = a.xPhraseSize, let phraseCount = a.xPhraseCount,
          let columnCount = a.xColumnCount, let columnSize = a.xColumnSize, let columnText = a.xColumnText,
          let tokenize = a.xTokenize, let userData = a.xUserData else {
        return fail(context, "this SQLite's FTS5 lacks a needed API", code: SQLITE_ERROR)
    }
    // Four arguments, or four and the text of every column over a phrase index.
    let pairs = count == 4 + columnCount(fts) && count > 4
    guard count == 4 || pairs else {
        return fail(context, "expects an open marker, a close marker, an ellipsis and a token count (and over a phrase index the text of every column)",
                    code: SQLITE_ERROR)
    }
    let words = userData(fts).map { Unmanaged<WordTokenizer>.fromOpaque($0).takeUnretainedValue() }
    if pairs && words == nil { return fail(context, "has no word tokenizer for a phrase index", code: SQLITE_ERROR) }
    let open = valueBytes(values[0]), close = valueBytes(values[1]), ellipsis = valueBytes(values[2])
    let tokens = Int32(max(1, min(64, sqlite3_value_int(values[3]))))

    // 1. The phrase instances, by column and offset.
    var n: Int32 = 0
    var rc = instCount(fts, &n)
    guard rc == SQLITE_OK else { return fail(context, "could not read the row's matches", code: rc) }
    let phrases = Int(max(0, phraseCount(fts)))
    var instances: [Instance] = []
    instances.reserveCapacity(Int(n))
    for i in 0..<n {
        var phrase: Int32 = 0, column: Int32 = 0, offset: Int32 = 0
        rc = inst(fts, i, &phrase, &column, &offset)
        guard rc == SQLITE_OK else { return fail(context, "could not read the row's matches", code: rc) }
        guard phrase >= 0, Int(phrase) < phrases else { continue }
        instances.append(Instance(phrase: phrase, column: column, offset: offset, size: max(1, phraseSize(fts, phrase)) + (pairs ? 1 : 0)))
    }
    instances.sort { ($0.column, $0.offset) < ($1.column, $1.offset) }

    // 2. The window: from each instance, the distinct phrases (then instances) that fit in `tokens`.
    var column: Int32 = 0
    var start: Int32 = 0
    if instances.isEmpty {
        // No instance (a match through NOT, say): the start of the first column with text.
        for c in 0..<columnCount(fts) {
            var text: UnsafePointer<CChar>?
            var bytes: Int32 = 0
            if pairs {
                if sqlite3_value_bytes(values[Int(4 + c)]) > 0 { column = c; break }
            } else if columnText(fts, c, &text, &bytes) == SQLITE_OK, bytes > 0 { column = c; break }
        }
    } else {
        var best = (distinct: -1, total: 0, index: 0, end: Int32(0))
        var lastCounted = [Int](repeating: -1, count: phrases)
        for i in instances.indices {
            let anchor = instances[i]
            var distinct = 0, total = 0, end = anchor.end
            var j = i
            while j < instances.count, instances[j].column == anchor.column, instances[j].offset < anchor.offset + tokens {
                let candidate = instances[j]
                if j == i || candidate.end <= anchor.offset + tokens {
                    if lastCounted[Int(candidate.phrase)] != i { lastCounted[Int(candidate.phrase)] = i; distinct += 1 }
                    total += 1
                    end = max(end, candidate.end)
                }
                j += 1
            }
            if distinct > best.distinct || (distinct == best.distinct && total > best.total) {
                best = (distinct, total, i, end)
            }
        }
        let anchor = instances[best.index]
        column = anchor.column
        let span = min(tokens, best.end - anchor.offset)
        start = anchor.offset - (tokens - span) / 2
        var size: Int32 = 0
        if columnSize(fts, column, &size) == SQLITE_OK, start + tokens > size { start = size - tokens }
        start = max(0, start)
    }

    // 3. The column's text, tokenized only up to the window's end.
    var text: UnsafePointer<CChar>?
    var bytes: Int32 = 0
    if pairs {
        // The text, then its length (sqlite3_value_bytes after sqlite3_value_text, as SQLite asks).
        let value = values[Int(4 + column)]
        text = UnsafeRawPointer(sqlite3_value_text(value)).map { $0.assumingMemoryBound(to: CChar.self) }
        bytes = sqlite3_value_bytes(value)
    } else {
        rc = columnText(fts, column, &text, &bytes)
        guard rc == SQLITE_OK else { return fail(context, "could not read the row's text", code: rc) }
    }
    guard let text, bytes > 0 else { return chronicleResult(context, []) }
    let window = TokenWindow(start: start, end: start + tokens)
    rc = withExtendedLifetime(window) {
        let context = Unmanaged.passUnretained(window).toOpaque()
        if pairs, let words { return words.tokenize(text, bytes, context, collectToken) }
        return tokenize(fts, text, bytes, context, collectToken)
    }
    guard rc == SQLITE_OK || rc == SQLITE_DONE else { return fail(context, "could not tokenize the row's text", code: rc) }
    guard let first = window.ranges.first else { return chronicleResult(context, []) }

    // 4. The passage, each run of matched tokens between one pair of markers.
    var lit = [Bool](repeating: false, count: window.ranges.count)
    for instance in instances where instance.column == column {
        let from = max(instance.offset, start), to = min(instance.end, start + Int32(window.ranges.count))
        if from < to { for t in from..<to { lit[Int(t - start)] = true } }
    }
    let source = UnsafeRawBufferPointer(start: text, count: Int(bytes))
    func copy(_ from: Int32, _ to: Int32, into out: inout [UInt8]) {
        let lower = Int(max(0, min(from, bytes))), upper = Int(max(0, min(to, bytes)))
        if lower < upper { out.append(contentsOf: source[lower..<upper]) }
    }
    var out: [UInt8] = []
    out.reserveCapacity(Int(window.ranges.last!.end - first.start) + 32)
    // Like snippet(): a passage at the text's start or end keeps what lies before its first
    // token or after its last (an opening quote, a closing full stop).
    if start > 0 { out += ellipsis }
    var cursor = start > 0 ? first.start : 0, previousEnd = cursor, inRun = false
    for (k, range) in window.ranges.enumerated() {
        if lit[k] && !inRun {
            copy(cursor, range.start, into: &out)
            out += open
            cursor = range.start
            inRun = true
        } else if !lit[k] && inRun {
            copy(cursor, previousEnd, into: &out)
            out += close
            cursor = previousEnd
            inRun = false
        }
        previousEnd = range.end
    }
    copy(cursor, previousEnd, into: &out)
    if inRun { out += close }
    if window.more { out += ellipsis } else { copy(previousEnd, bytes, into: &out) }
    chronicleResult(context, out)
}

private func chronicleResult(_ context: OpaquePointer, _ bytes: [UInt8]) {
    guard !bytes.isEmpty else {
        _ = chronicle_result_text(context, "", 0)
        return
    }
    bytes.withUnsafeBytes { buffer in
        _ = chronicle_result_text(context, buffer.baseAddress!.assumingMemoryBound(to: CChar.self), Int32(buffer.count))
    }
}
