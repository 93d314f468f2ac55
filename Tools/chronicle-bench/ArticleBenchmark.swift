import CXML2
import ChronicleArticles
import ChronicleCore
import Foundation

/// The article fetcher's reading of pages (`ArticleExtractor.extract`: libxml2's HTML parser,
/// then a walk for the title, author and readable text), beside libxml2 alone parsing the same
/// bytes into a tree and freeing it (`htmlReadMemory`, `xmlFreeDoc`): MB/s of HTML and the ratio.
/// The fetch itself is the network's; this is the server's CPU per page.
struct ArticleBenchmark {
    struct Result {
        var pages: Int
        var bytes: Int
        var seconds: Double
        var baselineSeconds: Double
        var words: Int
        var mbPerSecond: Double { Double(bytes) / 1e6 / seconds }
        var baselineMBPerSecond: Double { Double(bytes) / 1e6 / baselineSeconds }
        var ratio: Double { baselineSeconds / seconds }
    }

    let pages: Int
    let seed: UInt64
    let vocabulary: Vocabulary

    /// A page as the web serves them: a head with metadata and a script, navigation, a header,
    /// an article of 20–40 paragraphs, an aside and a footer.
    func page(_ index: Int, _ rng: inout SplitMix64) -> [UInt8] {
        var html = "<!doctype html><html><head><meta charset=\"utf-8\"><title>\(vocabulary.title(words: 6, &rng)) | Site</title>"
        html += "<meta property=\"og:title\" content=\"\(vocabulary.title(words: 6, &rng))\"><meta name=\"author\" content=\"Author \(index)\">"
        html += "<script>window.analytics = { id: \(index), events: [] };</script><style>body { font: 16px serif }</style></head><body>"
        html += "<header><a href=\"/\">Site</a></header><nav><ul>" + (0..<8).map { "<li><a href=\"/s/\($0)\">Section \($0)</a></li>" }.joined() + "</ul></nav>"
        html += "<article><h1>\(vocabulary.title(words: 6, &rng))</h1>"
        for _ in 0..<(20 + Int(rng.next() % 21)) {
            html += "<p>\(vocabulary.text(words: 40 + Int(rng.next() % 80), &rng)) <a href=\"https://example.com/\(rng.next() % 1000)\">link</a> <em>\(vocabulary.text(words: 3, &rng))</em>.</p>"
        }
        html += "</article><aside>\(vocabulary.text(words: 30, &rng))</aside><footer>© Site</footer></body></html>"
        return Array(html.utf8)
    }

    func run() -> Result {
        progress("articles: \(formatCount(Double(pages))) pages…")
        var rng = SplitMix64(seed: seed ^ 0xA271_C1E5)
        let corpus = (0..<pages).map { page($0, &rng) }
        let bytes = corpus.reduce(0) { $0 + $1.count }
        let options = Int32(HTML_PARSE_RECOVER.rawValue | HTML_PARSE_NOERROR.rawValue | HTML_PARSE_NOWARNING.rawValue
                            | HTML_PARSE_NONET.rawValue | HTML_PARSE_COMPACT.rawValue)
        func baseline() -> Double {
            let t0 = nowNanoseconds()
            for html in corpus {
                html.withUnsafeBufferPointer { buffer in
                    buffer.withMemoryRebound(to: CChar.self) { chars in
                        if let doc = htmlReadMemory(chars.baseAddress, Int32(chars.count), "https://example.com/", "utf-8", options) { xmlFreeDoc(doc) }
                    }
                }
            }
            return Double(nowNanoseconds() - t0) / 1e9
        }
        var words = 0
        func engine() -> Double {
            words = 0
            let t0 = nowNanoseconds()
            for html in corpus { words += ArticleExtractor.extract(html: html, url: "https://example.com/", charset: "utf-8")?.wordCount ?? 0 }
            return Double(nowNanoseconds() - t0) / 1e9
        }
        // Each side twice, alternating; the faster of each.
        var base = Double.infinity, mine = Double.infinity
        for _ in 0..<2 {
            base = min(base, baseline())
            mine = min(mine, engine())
        }
        return Result(pages: pages, bytes: bytes, seconds: mine, baselineSeconds: base, words: words)
    }
}

extension ArticleBenchmark.Result {
    func report(rows: inout [TableRow], json: inout [(String, JSON)], notes: inout [String]) {
        rows.append(TableRow(measurement: "articles: \(formatCount(Double(pages))) pages read (ArticleExtractor) (base: libxml2 parse + free)",
                             chronicle: formatFixed(mbPerSecond, 1) + " MB/s", baseline: formatFixed(baselineMBPerSecond, 1) + " MB/s",
                             ratio: ratioText(ratio), target: "", verdict: ""))
        notes.append("articles: \(formatCount(Double(pages))) generated pages (\(formatFixed(Double(bytes) / 1e6, 1)) MB of HTML, \(bytes / pages / 1024) KiB each: metadata, a script, navigation, an article of 20-40 paragraphs, an aside) read in \(formatFixed(seconds, 2)) s, \(formatFixed(Double(pages) / seconds, 0)) pages/s, \(formatCount(Double(words))) words; libxml2 alone parsing them into a tree and freeing it: \(formatFixed(baselineSeconds, 2)) s. The faster of two runs each, alternating. No target: the fetch's network time dwarfs either.")
        json.append(("articles", .object([("pages", .int(Int64(pages))), ("bytes", .int(Int64(bytes))), ("seconds", .number(seconds)),
                                          ("baseline_seconds", .number(baselineSeconds)), ("words", .int(Int64(words))),
                                          ("ratio", .number(ratio))])))
    }
}
