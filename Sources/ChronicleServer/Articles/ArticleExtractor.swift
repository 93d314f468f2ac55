import CXML2
import Foundation

/// What the article fetcher (`ArticleFetcher`) reads out of a saved page: the fields of an
/// `article.parsed` op.
public struct ParsedArticle: Sendable, Equatable {
    /// `og:title`, else `<title>`; nil where the page has neither.
    public var title: String?
    /// `<meta name="author">`; nil where the page names none.
    public var author: String?
    /// The readable text: paragraphs separated by a blank line.
    public var text: String
    /// Words in `text` (runs of letters or digits between spaces).
    public var wordCount: Int
    /// The text was cut at `ArticleExtractor.textBytesMax`.
    public var truncated: Bool
}

/// Reads a page's title, author and readable text with libxml2's HTML parser, which takes any
/// bytes (broken markup, a wrong charset, binary garbage) without failing: what it cannot parse
/// it skips. The text is that of the page's `<article>`, else its `<main>`, else its `<body>`,
/// without scripts, styles, navigation, headers, footers, asides, forms and hidden elements.
///
/// ```swift
/// let parsed = ArticleExtractor.extract(html: bytes, url: "https://example.com/a", charset: "utf-8")
/// ```
public enum ArticleExtractor {
    /// The most bytes of text kept (UTF-8): an op must stay under the segment decoders' cap
    /// (`SegmentCodec.Limits.maxOpBytes`, 256 KiB), and 200,000 bytes hold some 30,000 words.
    public static let textBytesMax = 200_000
    static let titleCharactersMax = 2_000
    static let authorCharactersMax = 500

    /// Elements whose text is never the article's.
    static let skipped: Set<String> = ["script", "style", "noscript", "template", "nav", "header", "footer", "aside", "form",
                                       "svg", "iframe", "button", "select", "textarea", "object", "embed", "canvas", "head"]
    /// Elements that end a paragraph.
    static let blocks: Set<String> = ["p", "div", "section", "article", "main", "h1", "h2", "h3", "h4", "h5", "h6", "li", "ul", "ol",
                                      "blockquote", "pre", "table", "tr", "dl", "dt", "dd", "figure", "figcaption", "hr", "address", "details", "summary"]

    private static let initialized: Bool = {
        xmlInitParser()
        return true
    }()

    /// Nil only where libxml2 makes no document at all (no bytes).
    public static func extract(html bytes: [UInt8], url: String, charset: String?) -> ParsedArticle? {
        guard !bytes.isEmpty, bytes.count < Int(Int32.max), initialized else { return nil }
        let options = Int32(HTML_PARSE_RECOVER.rawValue | HTML_PARSE_NOERROR.rawValue | HTML_PARSE_NOWARNING.rawValue
                            | HTML_PARSE_NONET.rawValue | HTML_PARSE_COMPACT.rawValue)
        let parsed: htmlDocPtr? = bytes.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { chars in
                htmlReadMemory(chars.baseAddress, Int32(chars.count), url, charset, options)
            }
        }
        // A charset libxml2 does not know (a server's typo) is left for the page's own <meta> to name.
        guard let doc = parsed ?? (charset == nil ? nil : bytes.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { htmlReadMemory($0.baseAddress, Int32($0.count), url, nil, options) }
        }) else { return nil }
        defer { xmlFreeDoc(doc) }
        guard let root = xmlDocGetRootElement(doc) else {
            return ParsedArticle(title: nil, author: nil, text: "", wordCount: 0, truncated: false)
        }

        var title: String?, ogTitle: String?, author: String?
        var article: xmlNodePtr?, main: xmlNodePtr?, body: xmlNodePtr?
        // One walk for the metadata and the candidate roots (no recursion: a page may nest deeply).
        var stack: [xmlNodePtr] = [root]
        while let node = stack.popLast() {
            if node.pointee.type == XML_ELEMENT_NODE {
                switch name(node) {
                case "title" where title == nil: title = text(of: node)
                case "meta":
                    let key = (attribute(node, "property") ?? attribute(node, "name") ?? "").lowercased()
                    if key == "og:title", ogTitle == nil { ogTitle = attribute(node, "content") }
                    if key == "author", author == nil { author = attribute(node, "content") }
                case "article" where article == nil: article = node
                case "main" where main == nil: main = node
                case "body" where body == nil: body = node
                default: break
                }
            }
            var child = node.pointee.children
            var children: [xmlNodePtr] = []
            while let c = child { children.append(c); child = c.pointee.next }
            stack.append(contentsOf: children.reversed())
        }

        // The first candidate with any text: an empty <article> (a teaser's frame) does not hide the page.
        var writer = TextWriter(bytesMax: textBytesMax)
        for candidate in [article, main, body, root].compactMap({ $0 }) {
            writer = TextWriter(bytesMax: textBytesMax)
            writer.write(candidate)
            if !writer.isEmpty { break }
        }
        let text = writer.finished()
        return ParsedArticle(title: clean(ogTitle ?? title, max: titleCharactersMax), author: clean(author, max: authorCharactersMax),
                             text: text, wordCount: wordCount(text), truncated: writer.truncated)
    }

    static func name(_ node: xmlNodePtr) -> String {
        node.pointee.name.map { String(cString: $0).lowercased() } ?? ""
    }

    static func attribute(_ node: xmlNodePtr, _ name: String) -> String? {
        guard let value = xmlGetProp(node, name) else { return nil }
        defer { chronicle_xml_free(value) }
        return String(cString: value)
    }

    static func text(of node: xmlNodePtr) -> String? {
        guard let content = xmlNodeGetContent(node) else { return nil }
        defer { chronicle_xml_free(content) }
        return String(cString: content)
    }

    /// Whitespace collapsed, trimmed, cut to `max` characters; nil where nothing is left.
    static func clean(_ text: String?, max: Int) -> String? {
        guard let text else { return nil }
        let words = text.split(whereSeparator: { $0.isWhitespace })
        guard !words.isEmpty else { return nil }
        return String(words.joined(separator: " ").prefix(max))
    }

    static func wordCount(_ text: String) -> Int {
        text.split(whereSeparator: { $0.isWhitespace }).reduce(0) { count, token in
            token.contains(where: { $0.isLetter || $0.isNumber }) ? count + 1 : count
        }
    }

    /// Paragraphs of text out of a subtree: whitespace collapsed (kept inside `<pre>`), a blank
    /// line at each block's end, up to `bytesMax` bytes of UTF-8.
    struct TextWriter {
        let bytesMax: Int
        private(set) var truncated = false
        private var paragraphs: [String] = []
        private var current = ""
        private var bytes = 0

        init(bytesMax: Int) { self.bytesMax = bytesMax }

        mutating func write(_ top: xmlNodePtr) {
            // (node, leaving): a block's end is written when its subtree is done.
            var stack: [(xmlNodePtr, Bool, Bool)] = [(top, false, false)]
            while let (node, leaving, pre) = stack.popLast(), !truncated {
                if leaving { endParagraph(); continue }
                switch node.pointee.type {
                case XML_TEXT_NODE, XML_CDATA_SECTION_NODE:
                    if let content = node.pointee.content { append(String(cString: content), pre: pre) }
                case XML_ELEMENT_NODE:
                    let tag = ArticleExtractor.name(node)
                    if ArticleExtractor.skipped.contains(tag) || ArticleExtractor.attribute(node, "hidden") != nil
                        || ArticleExtractor.attribute(node, "aria-hidden")?.lowercased() == "true" { continue }
                    if tag == "br" { current += "\n"; continue }
                    let block = ArticleExtractor.blocks.contains(tag)
                    if block { endParagraph(); stack.append((node, true, pre)) }
                    var child = node.pointee.children
                    var children: [(xmlNodePtr, Bool, Bool)] = []
                    while let c = child { children.append((c, false, pre || tag == "pre")); child = c.pointee.next }
                    stack.append(contentsOf: children.reversed())
                default:
                    continue
                }
            }
            endParagraph()
        }

        private mutating func append(_ text: String, pre: Bool) {
            if pre { current += text; return }
            var collapsed = ""
            var lastSpace = current.last.map { $0 == " " || $0 == "\n" } ?? true
            for character in text {
                if character.isWhitespace {
                    if !lastSpace { collapsed.append(" "); lastSpace = true }
                } else {
                    collapsed.append(character)
                    lastSpace = false
                }
            }
            current += collapsed
        }

        private mutating func endParagraph() {
            let lines = current.split(separator: "\n", omittingEmptySubsequences: false)
                .map { $0.trimmingCharacters(in: .whitespaces) }
            current = ""
            let paragraph = lines.joined(separator: "\n").trimmingCharacters(in: .whitespacesAndNewlines)
            guard !paragraph.isEmpty, !truncated else { return }
            let cost = paragraph.utf8.count + (paragraphs.isEmpty ? 0 : 2)
            if bytes + cost <= bytesMax {
                paragraphs.append(paragraph)
                bytes += cost
                return
            }
            // Cut the last paragraph at a character boundary within what is left.
            var room = bytesMax - bytes - (paragraphs.isEmpty ? 0 : 2)
            var cut = ""
            for character in paragraph {
                let size = String(character).utf8.count
                guard size <= room else { break }
                cut.append(character)
                room -= size
            }
            if !cut.isEmpty { paragraphs.append(cut) }
            truncated = true
        }

        func finished() -> String { paragraphs.joined(separator: "\n\n") }

        var isEmpty: Bool { paragraphs.isEmpty }
    }
}
