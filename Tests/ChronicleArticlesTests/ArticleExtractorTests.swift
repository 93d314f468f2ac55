@testable import ChronicleArticles
import Foundation
import Testing

/// The article fetcher's reading of a page (libxml2's HTML parser): title, author, the readable
/// text without the page's furniture, the word count, and any bytes taken without a crash.
@Suite struct ArticleExtractorTests {
    static func extract(_ html: String, charset: String? = "utf-8") -> ParsedArticle? {
        ArticleExtractor.extract(html: Array(html.utf8), url: "https://example.com/a", charset: charset)
    }

    @Test func theArticleIsReadWithoutThePagesFurniture() throws {
        let parsed = try #require(Self.extract("""
            <!doctype html><html><head><title>Site | Fallback</title>
            <meta property="og:title" content="  Write-Ahead   Logging ">
            <meta name="author" content="Ada Lovelace"><style>p { color: red }</style>
            <script>var tracking = "not text";</script></head>
            <body><header>Site header</header><nav><a href="/">Home</a></nav>
            <article><h1>Write-Ahead Logging</h1>
            <p>A log is   written <em>before</em> the pages.</p>
            <p>Readers see a snapshot;<br>writers append.</p>
            <aside>Related: nothing</aside><div hidden>secret</div>
            <pre>  keep   this
              spacing</pre>
            <ul><li>one</li><li>two</li></ul></article>
            <footer>© 2026</footer></body></html>
            """))
        #expect(parsed.title == "Write-Ahead Logging")
        #expect(parsed.author == "Ada Lovelace")
        #expect(parsed.text == """
            Write-Ahead Logging

            A log is written before the pages.

            Readers see a snapshot;
            writers append.

            keep   this
            spacing

            one

            two
            """)
        #expect(parsed.wordCount == 20)
        #expect(!parsed.truncated)
        for furniture in ["Site header", "Home", "tracking", "Related", "secret", "2026", "color"] {
            #expect(!parsed.text.contains(furniture), "\(furniture)")
        }
    }

    @Test func withoutAnArticleElementMainThenBodyAreRead() throws {
        let main = try #require(Self.extract("<html><body><p>outside</p><main><p>inside main</p></main></body></html>"))
        #expect(main.text == "inside main" && main.title == nil && main.author == nil)
        let body = try #require(Self.extract("<title>T</title><p>just a paragraph, no html or body tags</p>"))
        #expect(body.text == "just a paragraph, no html or body tags" && body.title == "T" && body.wordCount == 8)
    }

    @Test func anEmptyArticleElementDoesNotHideThePage() throws {
        let parsed = try #require(Self.extract("<body><article><img src=a.png></article><main><p>the real text</p></main></body>"))
        #expect(parsed.text == "the real text")
    }

    @Test func aCharsetLibxml2DoesNotKnowFallsBackToThePagesOwn() throws {
        let parsed = try #require(Self.extract("<html><body><p>still read</p></body></html>", charset: "x-no-such-charset"))
        #expect(parsed.text == "still read")
    }

    @Test func aPageInLatin1IsReadByItsCharset() throws {
        let bytes: [UInt8] = Array("<html><body><p>caf".utf8) + [0xE9] + Array(" na".utf8) + [0xEF] + Array("ve</p></body></html>".utf8)
        let parsed = try #require(ArticleExtractor.extract(html: bytes, url: "https://example.com/", charset: "iso-8859-1"))
        #expect(parsed.text == "café naïve")
        let declared: [UInt8] = Array("<html><head><meta charset=\"iso-8859-1\"></head><body><p>caf".utf8) + [0xE9] + Array("</p></body></html>".utf8)
        #expect(ArticleExtractor.extract(html: declared, url: "https://example.com/", charset: nil)?.text == "café")
    }

    @Test func aLongPageIsCutAtTheCapOnACharacterBoundary() throws {
        let paragraph = "<p>" + String(repeating: "é", count: 999) + " word</p>"
        let parsed = try #require(Self.extract("<article>" + String(repeating: paragraph, count: 150) + "</article>"))
        #expect(parsed.truncated)
        #expect(parsed.text.utf8.count <= ArticleExtractor.textBytesMax && parsed.text.utf8.count > ArticleExtractor.textBytesMax - 2_100)
        #expect(parsed.text.unicodeScalars.allSatisfy { $0 == "é" || $0 == " " || $0 == "\n" || "word".unicodeScalars.contains($0) })
    }

    /// Garbage, binary bytes, deep nesting and broken markup: an answer (maybe empty), never a crash.
    @Test func anyBytesAreTakenWithoutACrash() throws {
        #expect(ArticleExtractor.extract(html: [], url: "https://example.com/", charset: nil) == nil)
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<50 {
            let bytes = (0..<Int.random(in: 1...4_000, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            _ = ArticleExtractor.extract(html: bytes, url: "https://example.com/", charset: nil)
        }
        let deep = String(repeating: "<div>", count: 50_000) + "deep" + String(repeating: "</div>", count: 50_000)
        #expect(Self.extract(deep) != nil)
        let broken = try #require(Self.extract("<p>unclosed <b>bold <i>both</p><p>next</b></i> <<>> &amp; &bogus; done"))
        #expect(broken.text.contains("unclosed bold both") && broken.text.contains("& &bogus; done"))
    }
}
