import CSQLite
import ChronicleCore
import Foundation

/// Diagnostic (`CHRONICLE_BENCH_SEARCH_PAIRS=1`): what an index of adjacent word pairs would
/// do for phrase queries, the idea behind Elasticsearch's `index_phrases`.
///
/// In a separate file, beside the store, it builds contentless FTS5 indexes over the same
/// rows as the store's titles index (`article_fts`) and full-text index (`article_text_fts`):
/// one of words, tokenized as the store's are, and one of pairs, where a row whose words are
/// `a b c` holds the tokens `a_b b_c c_` (the last one keeps each column's length in tokens,
/// so bm25() sees the same lengths and averages in both). A two-word phrase `"a b"` is then
/// the single token `a_b`: the same rows, the same counts, the same bm25() scores, without
/// matching positions. It prints each side's build time and bytes, then times every phrase
/// query of the run on both sides as bm25() ranks it (its IDF counted over every match, the
/// window the newest rows), and checks that both sides give the same rows and scores.
///
/// The pairs are made here by splitting on ASCII letters and digits, which is how unicode61
/// splits the benchmark's ASCII text; the equality check is what shows that holds.
extension SearchBenchmark {
    static let pairsDiagnostic = ProcessInfo.processInfo.environment["CHRONICLE_BENCH_SEARCH_PAIRS"] == "1"

    /// The two indexes: the store's name, the content view's columns, the schema weights.
    private static let pairIndexes: [(store: String, columns: [String], weights: [Double])] = [
        ("article_fts", ["title", "author", "url"], [10, 2, 1]),
        ("article_text_fts", ["text"], [1]),
    ]

    func runPairsDiagnostic(store raw: RawDatabase, phrases: [String], window: Int) throws {
        let path = directory + "/pairs.sqlite"
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        let pairs = try RawDatabase(path: path)
        try pairs.exec("PRAGMA synchronous = OFF")
        var lines: [String] = []
        for index in Self.pairIndexes {
            let columns = index.columns.map { ProjectionSchema.quoted($0) }
            let view = ProjectionSchema.quoted(index.store + "_content")
            // The rows the store's index holds, read once; the text is not part of either timing.
            var rows: [(rid: Int64, columns: [String])] = []
            let select = try raw.prepare("SELECT rid, \(columns.joined(separator: ", ")) FROM \(view)")
            while sqlite3_step(select) == SQLITE_ROW {
                rows.append((sqlite3_column_int64(select, 0), (0..<columns.count).map { column in
                    sqlite3_column_text(select, Int32(column + 1)).map { String(cString: $0) } ?? ""
                }))
            }
            sqlite3_reset(select)
            let pairRows = rows.map { ($0.rid, $0.columns.map(Self.pairText)) }
            var built: [String: (seconds: Double, bytes: Int64)] = [:]
            for (side, tokenize, prefix, data) in [("words", "unicode61 remove_diacritics 2", "prefix='2 3', ", rows.map { ($0.rid, $0.columns) }),
                                                   ("pairs", "unicode61 remove_diacritics 2 tokenchars '_'", "", pairRows)] {
                let table = "\(side)_\(index.store)"
                try pairs.exec("CREATE VIRTUAL TABLE \(table) USING fts5(\(columns.joined(separator: ", ")), content='', \(prefix)tokenize=\"\(tokenize)\")")
                let placeholders = (0...columns.count).map { "?\($0 + 1)" }.joined(separator: ", ")
                let insert = try pairs.prepare("INSERT INTO \(table)(rowid, \(columns.joined(separator: ", "))) VALUES (\(placeholders))")
                let t0 = nowNanoseconds()
                try pairs.exec("BEGIN")
                for (rid, values) in data {
                    try pairs.run(insert, [.integer(rid)] + values.map { .text($0) })
                }
                try pairs.exec("COMMIT")
                let seconds = Double(nowNanoseconds() - t0) / 1e9
                let bytes = try pairs.scalarInt("SELECT sum(pgsize) FROM dbstat WHERE name LIKE '\(table)%'") ?? 0
                built[side] = (seconds, bytes)
                progress("search pairs: \(index.store) as \(side): \(formatCount(Double(data.count))) rows indexed in \(formatFixed(seconds, 2)) s, \(formatFixed(Double(bytes) / 1e6, 1)) MB")
            }
            let words = built["words"]!, pairsBuilt = built["pairs"]!
            lines.append("\(index.store): pairs build \(formatFixed(pairsBuilt.seconds / words.seconds, 2))x the words' time, \(formatFixed(Double(pairsBuilt.bytes) / Double(words.bytes), 2))x their bytes")
        }
        try pairs.exec("PRAGMA synchronous = FULL")

        // Every phrase query on both sides, words and pairs taking turns to go first.
        var wordTimes = Samples(capacity: phrases.count), pairTimes = Samples(capacity: phrases.count)
        var differ = 0
        let weights = Self.pairIndexes.map { $0.weights.map { formatFixed($0, 1) }.joined(separator: ", ") }
        let statements = try ["words", "pairs"].map { side in
            try zip(Self.pairIndexes, weights).map { index, weights in
                let table = "\(side)_\(index.store)"
                return try pairs.prepare("""
                    SELECT rowid, bm25(\(table), \(weights)) FROM \(table) WHERE \(table) MATCH ?1 ORDER BY rowid DESC LIMIT \(window)
                    """)
            }
        }
        for (n, phrase) in phrases.enumerated() {
            let words = Self.words(of: phrase)
            guard words.count == 2 else { continue }
            let match = ["\"\(words[0]) \(words[1])\"", "\(words[0])_\(words[1])"]
            var results: [[String]] = [[], []]
            for side in n % 2 == 0 ? [0, 1] : [1, 0] {
                let t0 = nowNanoseconds()
                for statement in statements[side] {
                    try pairs.bind(statement, [.text(match[side])])
                    while sqlite3_step(statement) == SQLITE_ROW {
                        results[side].append("\(sqlite3_column_int64(statement, 0)):\(formatFixed(sqlite3_column_double(statement, 1), 9))")
                    }
                    sqlite3_reset(statement)
                }
                if side == 0 { wordTimes.add(nowNanoseconds() - t0) } else { pairTimes.add(nowNanoseconds() - t0) }
            }
            if results[0] != results[1] { differ += 1 }
        }
        for line in lines { progress("search pairs: " + line) }
        progress("search pairs: \(wordTimes.count) phrases over titles and full text, bm25() ranking the newest \(formatCount(Double(window))): words p50 \(formatFixed(wordTimes.percentileMilliseconds(0.5), 3)) p99 \(formatFixed(wordTimes.percentileMilliseconds(0.99), 3)) ms; pairs p50 \(formatFixed(pairTimes.percentileMilliseconds(0.5), 3)) p99 \(formatFixed(pairTimes.percentileMilliseconds(0.99), 3)) ms; results differ in \(differ)")
    }

    /// `text`'s words as unicode61 gives them for ASCII text: runs of letters and digits, lowercased.
    static func words(of text: String) -> [String] {
        var words: [String] = []
        var current: [UInt8] = []
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"), 0x80...:
                current.append(byte)
            case UInt8(ascii: "A")...UInt8(ascii: "Z"):
                current.append(byte + 32)
            default:
                if !current.isEmpty { words.append(String(decoding: current, as: UTF8.self)); current.removeAll(keepingCapacity: true) }
            }
        }
        if !current.isEmpty { words.append(String(decoding: current, as: UTF8.self)) }
        return words
    }

    /// A column's pair tokens: each word joined to the next with `_`, the last to nothing.
    static func pairText(_ text: String) -> String {
        let words = words(of: text)
        var tokens: [String] = []
        tokens.reserveCapacity(words.count)
        for (n, word) in words.enumerated() { tokens.append(word + "_" + (n + 1 < words.count ? words[n + 1] : "")) }
        return tokens.joined(separator: " ")
    }
}
