import Foundation

/// What any page's reading keeps to, whatever its bytes: the fuzzer (`Tools/fuzz/FuzzArticle.swift`)
/// and the corpus replay (`ArticleCorpusTests`) check every input against it.
public enum ArticleContract {
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
