import Foundation

/// The read-it-later schema's names the article fetcher works with, and what any page's reading
/// keeps to, whatever its bytes: the fuzzer (`Tools/fuzz/FuzzArticle.swift`) and the corpus replay
/// (`ArticleCorpusTests`) check every input against `check`.
///
/// The generic server names none of these: it hands the fetcher every op a push accepted
/// (`ServerExtension.accepted`), and the fetcher picks out its own.
public enum ArticleContract {
    /// The op a device writes to save a page; the fetcher reads the page at its `urlField`.
    public static let saveOp = "article.save"
    /// The op the fetcher writes (server-authored) with a page's `textField` and `wordCountField`,
    /// and its `titleField` and `authorField` where the row has none.
    public static let parsedOp = "article.parsed"
    /// The entity a saved page is a row of.
    public static let entity = "article"
    public static let urlField = "url"
    /// NULL until the page is read; "" for a page that could not be.
    public static let textField = "text"
    public static let wordCountField = "word_count"
    public static let titleField = "title"
    public static let authorField = "author"

    /// Nil where `extract` kept to the contract on `bytes`; else what it broke.
    public static func check(_ bytes: [UInt8], charset: String?) -> String? {
        guard let parsed = ArticleExtractor.extract(html: bytes, url: "https://example.com/", charset: charset) else {
            return bytes.isEmpty ? nil : "no answer for \(bytes.count) bytes"
        }
        let text = Array(parsed.text.utf8)
        if text.count > ArticleExtractor.textBytesMax { return "text of \(text.count) bytes, over the cap" }
        // A cut text fills the cap but for a separator and one character (at most 2 + 4 bytes).
        if parsed.truncated && text.count + 6 < ArticleExtractor.textBytesMax { return "cut at \(text.count) bytes, short of the cap" }
        if let first = text.first, ArticleExtractor.isSpace(first) { return "text begins with a space" }
        if let last = text.last, ArticleExtractor.isSpace(last) { return "text ends with a space" }
        if parsed.wordCount < 0 || parsed.wordCount > text.count { return "word count \(parsed.wordCount) for \(text.count) bytes" }
        if parsed.wordCount != ArticleExtractor.wordCount(text) { return "word count differs from the text's" }
        if let title = parsed.title, title.isEmpty || title.count > ArticleExtractor.titleCharactersMax { return "title of \(title.count) characters" }
        if let author = parsed.author, author.isEmpty || author.count > ArticleExtractor.authorCharactersMax { return "author of \(author.count) characters" }
        return nil
    }
}
