import CSQLite
import ChronicleCore
import Foundation

/// `chronicle_pairs(text)`: a column's text as the tokens of an index of adjacent word pairs,
/// the idea behind Elasticsearch's `index_phrases`.
///
/// The words are the ones every search index holds: the text goes through FTS5's own
/// tokenizer with `ProjectionSchema.searchTokenizer`'s arguments, so case, diacritics and
/// separators are treated exactly as the word indexes treat them. Each word is then joined to
/// the next with `_` (which that tokenizer never leaves inside a word), and the last word to
/// nothing: `"Déjà vu, again"` gives `deja_vu vu_again again_`. An FTS5 index over that text
/// with `pairTokenize` (`_` kept inside tokens) holds one token per word, at the word's
/// position, so:
/// - a phrase of words `a b c` matches the same rows, as often, as the pair phrase `a_b b_c`
///   (`phraseMatch`) does in the pair index, without matching positions;
/// - every column keeps its length in tokens (the last word's `c_` counts), so bm25() sees the
///   same lengths and averages, and scores the same.
///
/// The store keeps such indexes beside its indexes over documents and entities' own (`PhraseIndex`) and writes
/// them through this function, which every connection of the store registers.
public enum SearchPairs {
    /// The SQL name.
    public static let functionName = "chronicle_pairs"
    /// The tokenizer option of a pair index: the word indexes' tokenizer, keeping `_` inside tokens.
    public static let pairTokenize = (ProjectionSchema.searchTokenizer + ["tokenchars", "'_'"]).joined(separator: " ")

    /// The phrase index the store keeps beside `index` (`PhraseIndex`): its FTS5 table; nil for
    /// an index over a set (tags) and for one whose hits count for another row (`owner`: notes,
    /// highlights) unless it holds documents (`SearchIndexSpec.holdsDocuments`).
    public static func phraseIndexTable(of index: SearchIndexSpec) -> String? {
        index.setField == nil && (index.holdsDocuments || index.owner == nil) ? index.index + "_pairs" : nil
    }

    /// The `chronicle_meta` key of that phrase index's watermark (`PhraseIndex`).
    public static func phraseIndexWatermarkKey(of index: SearchIndexSpec) -> String { "phrase_index_through:" + index.index }

    /// The watermark of a phrase index that holds every row.
    public static let phraseIndexComplete = Int64.max

    /// Registers the function on a connection. False when the library has no FTS5 or no
    /// `unicode61` tokenizer. Deterministic and innocuous, so triggers may call it.
    @discardableResult
    public static func register(on handle: OpaquePointer) -> Bool {
        guard let tokenizer = WordTokenizer(handle: handle) else { return false }
        let box = Unmanaged.passRetained(tokenizer).toOpaque()
        let rc = sqlite3_create_function_v2(handle, functionName, 1, SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS,
                                            box, chroniclePairs, nil, nil, releaseTokenizer)
        // On failure SQLite has already called the destructor.
        return rc == SQLITE_OK
    }

    /// The words of `text` as the search indexes hold them, through the connection's FTS5
    /// tokenizer; nil when the library has none.
    public static func words(of text: String, on handle: OpaquePointer) -> [String]? {
        guard let tokenizer = WordTokenizer(handle: handle) else { return nil }
        return tokenizer.words(Array(text.utf8)).map { String(decoding: $0, as: UTF8.self) }
    }

    /// The pair tokens of a column whose words are `words`, space-separated.
    public static func pairText(_ words: [[UInt8]]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(words.reduce(0) { $0 + 2 * $1.count + 2 })
        for (n, word) in words.enumerated() {
            if n > 0 {
                out.append(UInt8(ascii: " "))
            }
            out += word
            out.append(UInt8(ascii: "_"))
            if n + 1 < words.count { out += words[n + 1] }
        }
        return out
    }

    /// The FTS5 query, in a pair index, for the phrase of `words` (at least two): `"a_b b_c"`.
    public static func phraseMatch(_ words: [String]) -> String {
        precondition(words.count >= 2, "a pair phrase needs two words")
        let pairs = zip(words, words.dropFirst()).map { $0 + "_" + $1 }
        return "\"" + pairs.joined(separator: " ").replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}

/// One instance of FTS5's `unicode61` tokenizer with the search indexes' arguments, made on
/// a connection (through its `fts5_api`) and used only on it.
final class WordTokenizer {
    private var tokenizer = fts5_tokenizer()
    private let instance: OpaquePointer

    init?(handle: OpaquePointer) {
        guard let api = chronicle_fts5_api(handle), let find = api.pointee.xFindTokenizer else { return nil }
        let name = ProjectionSchema.searchTokenizer[0]
        var userData: UnsafeMutableRawPointer?
        guard find(api, name, &userData, &tokenizer) == SQLITE_OK, let create = tokenizer.xCreate else { return nil }
        let arguments = ProjectionSchema.searchTokenizer.dropFirst().map { strdup($0) }
        defer { arguments.forEach { free($0) } }
        var pointers: [UnsafePointer<CChar>?] = arguments.map { UnsafePointer($0) }
        var made: OpaquePointer?
        let rc = pointers.withUnsafeMutableBufferPointer { create(userData, $0.baseAddress, Int32($0.count), &made) }
        guard rc == SQLITE_OK, let made else { return nil }
        instance = made
    }

    deinit { tokenizer.xDelete?(instance) }

    /// The pair text of UTF-8 `text` (`SearchPairs.pairText`), written in one pass as the
    /// tokenizer gives the words.
    func pairText(_ text: UnsafeBufferPointer<UInt8>) -> [UInt8] {
        let writer = PairWriter(capacity: 2 * text.count + 2)
        guard let tokenize = tokenizer.xTokenize, !text.isEmpty else { return [] }
        let context = Unmanaged.passUnretained(writer).toOpaque()
        _ = text.withMemoryRebound(to: CChar.self) { chars in
            tokenize(instance, context, FTS5_TOKENIZE_DOCUMENT, chars.baseAddress, Int32(chars.count), writePair)
        }
        return writer.finish()
    }

    /// Tokenizes `bytes` of UTF-8 `text` as a document, calling `callback` with `context` for each
    /// token as FTS5's `xTokenize` does (a callback's `SQLITE_DONE` stops it early).
    func tokenize(_ text: UnsafePointer<CChar>, _ bytes: Int32, _ context: UnsafeMutableRawPointer,
                  _ callback: @convention(c) (UnsafeMutableRawPointer?, Int32, UnsafePointer<CChar>?, Int32, Int32, Int32) -> Int32) -> Int32 {
        guard let tokenize = tokenizer.xTokenize else { return SQLITE_ERROR }
        return tokenize(instance, context, FTS5_TOKENIZE_DOCUMENT, text, bytes, callback)
    }

    /// The words of UTF-8 `text`, folded as the indexes fold them. Colocated tokens (synonyms,
    /// which `unicode61` never emits) would share a position and are skipped.
    func words(_ text: [UInt8]) -> [[UInt8]] {
        let collector = WordCollector()
        guard let tokenize = tokenizer.xTokenize, !text.isEmpty else { return [] }
        let context = Unmanaged.passUnretained(collector).toOpaque()
        _ = text.withUnsafeBufferPointer { bytes in
            bytes.withMemoryRebound(to: CChar.self) { chars in
                tokenize(instance, context, FTS5_TOKENIZE_DOCUMENT, chars.baseAddress, Int32(chars.count), collectWord)
            }
        }
        return collector.words
    }
}

/// Pair text as the words come: `a_b` when `b` comes, then `b_` at the end.
private final class PairWriter {
    private(set) var out: [UInt8] = []
    private var previous: [UInt8] = []
    private var words = 0

    init(capacity: Int) { out.reserveCapacity(capacity) }

    func add(_ word: UnsafeBufferPointer<UInt8>) {
        if words > 0 {
            if words > 1 { out.append(UInt8(ascii: " ")) }
            out += previous
            out.append(UInt8(ascii: "_"))
            out += word
        }
        previous.removeAll(keepingCapacity: true)
        previous += word
        words += 1
    }

    func finish() -> [UInt8] {
        guard words > 0 else { return [] }
        if words > 1 { out.append(UInt8(ascii: " ")) }
        out += previous
        out.append(UInt8(ascii: "_"))
        return out
    }
}

private func writePair(_ context: UnsafeMutableRawPointer?, _ flags: Int32, _ token: UnsafePointer<CChar>?, _ length: Int32,
                       _ start: Int32, _ end: Int32) -> Int32 {
    guard let context else { return SQLITE_ERROR }
    if flags & FTS5_TOKEN_COLOCATED != 0 { return SQLITE_OK }
    guard let token, length > 0 else { return SQLITE_OK }
    let writer = Unmanaged<PairWriter>.fromOpaque(context).takeUnretainedValue()
    token.withMemoryRebound(to: UInt8.self, capacity: Int(length)) { writer.add(UnsafeBufferPointer(start: $0, count: Int(length))) }
    return SQLITE_OK
}

private final class WordCollector {
    var words: [[UInt8]] = []
}

private func collectWord(_ context: UnsafeMutableRawPointer?, _ flags: Int32, _ token: UnsafePointer<CChar>?, _ length: Int32,
                         _ start: Int32, _ end: Int32) -> Int32 {
    guard let context else { return SQLITE_ERROR }
    if flags & FTS5_TOKEN_COLOCATED != 0 { return SQLITE_OK }
    let collector = Unmanaged<WordCollector>.fromOpaque(context).takeUnretainedValue()
    guard let token, length > 0 else { return SQLITE_OK }
    collector.words.append(token.withMemoryRebound(to: UInt8.self, capacity: Int(length)) {
        Array(UnsafeBufferPointer(start: $0, count: Int(length)))
    })
    return SQLITE_OK
}

private func releaseTokenizer(_ box: UnsafeMutableRawPointer?) {
    guard let box else { return }
    Unmanaged<WordTokenizer>.fromOpaque(box).release()
}

/// The SQL function's body: NULL for NULL, the pair text of anything else read as text.
private func chroniclePairs(_ context: OpaquePointer?, _ count: Int32, _ values: UnsafeMutablePointer<OpaquePointer?>?) {
    guard let context, count == 1, let value = values?[0], let box = sqlite3_user_data(context) else { return }
    if sqlite3_value_type(value) == SQLITE_NULL {
        sqlite3_result_null(context)
        return
    }
    let tokenizer = Unmanaged<WordTokenizer>.fromOpaque(box).takeUnretainedValue()
    // The text, then its length (sqlite3_value_bytes after sqlite3_value_text, as SQLite asks).
    let text = sqlite3_value_text(value)
    let pairs = text.map { tokenizer.pairText(UnsafeBufferPointer(start: $0, count: Int(sqlite3_value_bytes(value)))) } ?? []
    guard !pairs.isEmpty else {
        _ = chronicle_result_text(context, "", 0)
        return
    }
    pairs.withUnsafeBufferPointer { bytes in
        bytes.withMemoryRebound(to: CChar.self) { _ = chronicle_result_text(context, $0.baseAddress, Int32($0.count)) }
    }
}
