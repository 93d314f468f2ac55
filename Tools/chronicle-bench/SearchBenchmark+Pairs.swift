import CSQLite
import ChronicleCore
import ChronicleStore
import Foundation

/// Diagnostic (`CHRONICLE_BENCH_SEARCH_PAIRS=1`): what an index of adjacent word pairs would
/// do for phrase queries, the idea behind Elasticsearch's `index_phrases`.
///
/// In a separate file, beside the store, it builds contentless FTS5 indexes over the rows of
/// the store's titles index (`article_fts`) and full-text index (`article_text_fts`), each read
/// from the store's content view: one of words, as the store's indexes are, and one of pairs
/// (`chronicle_pairs`, `SearchPairs`: `a b c` as `a_b b_c c_`, so bm25() sees the same lengths
/// and averages). A phrase `"a b"` is then the single token `a_b`: the same rows, the same
/// counts, the same scores, without matching positions. It prints each side's build time
/// (both with the engine's rebuild term buffer) and bytes, then times every phrase query of
/// the run on both sides as bm25() ranks it (its IDF counted over every match, the window the
/// newest rows), and checks that both sides give the same rows and scores.
enum PairIndexes {
    static let diagnostic = ProcessInfo.processInfo.environment["CHRONICLE_BENCH_SEARCH_PAIRS"] == "1"

    /// The two indexes: the store's name, the content view's columns, the schema weights.
    static let indexes: [(store: String, columns: [String], weights: [Double])] = [
        ("article_fts", ["title", "author", "url"], [10, 2, 1]),
        ("article_text_fts", ["text"], [1]),
    ]

    /// Builds `words_<index>` and `pairs_<index>` for both indexes in `directory/pairs.sqlite`
    /// from the store at `storePath`, printing times and bytes under `label`; returns the
    /// connection, with `chronicle_pairs` registered.
    static func build(storePath: String, directory: String, label: String) throws -> RawDatabase {
        let path = directory + "/pairs.sqlite"
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        let pairs = try RawDatabase(path: path)
        guard SearchPairs.register(on: pairs.handle) else { throw BenchError("\(label): no FTS5 unicode61 tokenizer") }
        try pairs.exec("PRAGMA synchronous = OFF")
        // The store's content views, read by both builds alike.
        try pairs.exec("ATTACH '\(storePath.replacingOccurrences(of: "'", with: "''"))' AS store")
        var lines: [String] = []
        var totals: [String: Double] = [:]
        for index in indexes {
            let columns = index.columns.map { ProjectionSchema.quoted($0) }
            let view = "store." + ProjectionSchema.quoted(index.store + "_content")
            var built: [String: (seconds: Double, bytes: Int64)] = [:]
            let tokenize = ProjectionSchema.searchTokenizer.joined(separator: " ")
            // The word index as the store defines it (a prefix index of 4 too for the full text).
            let spec = ProjectionSchema(schema: .readItLater).searchIndexes.first { $0.index.index == index.store }?.index
            let prefixes = (spec.map(ProjectionSchema.prefixIndexLengths(of:)) ?? ProjectionSchema.prefixIndexLengths)
                .map(String.init).joined(separator: " ")
            for (side, options, values) in [("words", "tokenize='\(tokenize)', prefix='\(prefixes)'", columns),
                                            ("pairs", "tokenize=\"\(SearchPairs.pairTokenize)\"", columns.map { "\(SearchPairs.functionName)(\($0))" })] {
                let table = "\(side)_\(index.store)"
                try pairs.exec("CREATE VIRTUAL TABLE \(table) USING fts5(\(columns.joined(separator: ", ")), content='', \(options))")
                // The term buffer the engine's index builds use.
                try pairs.exec("INSERT INTO \(table)(\(table), rank) VALUES ('hashsize', \(DeviceStore.searchRebuildHashBytes))")
                let t0 = nowNanoseconds()
                try pairs.exec("INSERT INTO \(table)(rowid, \(columns.joined(separator: ", "))) SELECT rid, \(values.joined(separator: ", ")) FROM \(view)")
                let seconds = Double(nowNanoseconds() - t0) / 1e9
                let rows = try pairs.scalarInt("SELECT count(*) FROM \(view)") ?? 0
                let bytes = try pairs.scalarInt("SELECT sum(pgsize) FROM dbstat WHERE name LIKE '\(table)%'") ?? 0
                built[side] = (seconds, bytes)
                totals[side, default: 0] += seconds
                progress("\(label): \(index.store) as \(side): \(formatCount(Double(rows))) rows indexed in \(formatFixed(seconds, 2)) s, \(formatFixed(Double(bytes) / 1e6, 1)) MB")
            }
            let words = built["words"]!, pairsBuilt = built["pairs"]!
            lines.append("\(index.store): pairs build \(formatFixed(pairsBuilt.seconds / words.seconds, 2))x the words' time, \(formatFixed(Double(pairsBuilt.bytes) / Double(words.bytes), 2))x their bytes")
        }
        for line in lines { progress("\(label): " + line) }
        progress("\(label): both indexes on one thread: words \(formatFixed(totals["words"] ?? 0, 2)) s, pairs \(formatFixed(totals["pairs"] ?? 0, 2)) s")
        try pairs.exec("PRAGMA synchronous = FULL")
        return pairs
    }
}

extension SearchBenchmark {
    func runPairsDiagnostic(store raw: RawDatabase, phrases: [String], window: Int) throws {
        let pairs = try PairIndexes.build(storePath: raw.path, directory: directory, label: "search pairs")
        let pairIndexes = PairIndexes.indexes
        // Every phrase query on both sides, words and pairs taking turns to go first.
        var wordTimes = Samples(capacity: phrases.count), pairTimes = Samples(capacity: phrases.count)
        var differ = 0
        let weights = pairIndexes.map { $0.weights.map { formatFixed($0, 1) }.joined(separator: ", ") }
        let statements = try ["words", "pairs"].map { side in
            try zip(pairIndexes, weights).map { index, weights in
                let table = "\(side)_\(index.store)"
                return try pairs.prepare("""
                    SELECT rowid, bm25(\(table), \(weights)) FROM \(table) WHERE \(table) MATCH ?1 ORDER BY rowid DESC LIMIT \(window)
                    """)
            }
        }
        for (n, phrase) in phrases.enumerated() {
            guard let words = SearchPairs.words(of: phrase, on: pairs.handle), words.count >= 2 else { continue }
            let match = ["\"" + words.joined(separator: " ") + "\"", SearchPairs.phraseMatch(words)]
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
        progress("search pairs: \(wordTimes.count) phrases over titles and full text, bm25() ranking the newest \(formatCount(Double(window))): words p50 \(formatFixed(wordTimes.percentileMilliseconds(0.5), 3)) p99 \(formatFixed(wordTimes.percentileMilliseconds(0.99), 3)) ms; pairs p50 \(formatFixed(pairTimes.percentileMilliseconds(0.5), 3)) p99 \(formatFixed(pairTimes.percentileMilliseconds(0.99), 3)) ms; results differ in \(differ)")
    }
}
