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

    /// Nil only for no bytes: any other bytes give an answer (maybe empty text).
    public static func extract(html bytes: [UInt8], url: String, charset: String?) -> ParsedArticle? {
        guard !bytes.isEmpty, bytes.count < Int(Int32.max), initialized else { return nil }
        let options = Int32(HTML_PARSE_RECOVER.rawValue | HTML_PARSE_NOERROR.rawValue | HTML_PARSE_NOWARNING.rawValue
                            | HTML_PARSE_NONET.rawValue | HTML_PARSE_COMPACT.rawValue)
        chronicle_xml_silence()
        func parse(_ encoding: String?) -> htmlDocPtr? {
            bytes.withUnsafeBufferPointer { buffer in
                buffer.withMemoryRebound(to: CChar.self) { htmlReadMemory($0.baseAddress, Int32($0.count), url, encoding, options) }
            }
        }
        // The charset the server named; else the page's own (<meta>, a byte order mark, libxml2's
        // guess); where those fail to convert (a charset libxml2 does not know, bytes that are not
        // what they claim), UTF-8, then Latin-1, which takes any bytes.
        var encodings: [String?] = charset.map { [$0, nil] } ?? [nil]
        for fallback in ["utf-8", "iso-8859-1"] where charset?.lowercased() != fallback { encodings.append(fallback) }
        // A plain loop: a lazy `compactMap(...).first` parses the winner twice, and one tree leaks.
        var found: htmlDocPtr?
        for encoding in encodings where found == nil { found = parse(encoding) }
        // No document in any of them (bytes that begin with NULs, say): a page with no text.
        guard let doc = found else { return ParsedArticle(title: nil, author: nil, text: "", wordCount: 0, truncated: false) }
        defer { xmlFreeDoc(doc) }
        guard let root = xmlDocGetRootElement(doc) else {
            return ParsedArticle(title: nil, author: nil, text: "", wordCount: 0, truncated: false)
        }

        var title: String?, ogTitle: String?, author: String?
        var article: xmlNodePtr?, main: xmlNodePtr?, body: xmlNodePtr?
        // One walk for the metadata and the candidate roots, by the tree's own links (no
        // recursion, no stack: a page may nest deeply).
        var node = root
        walk: while true {
            var descend = true
            if node.pointee.type == XML_ELEMENT_NODE {
                switch name(node) {
                case "title":
                    if title == nil { title = text(of: node) }
                    descend = false
                case "meta":
                    let key = (attribute(node, "property") ?? attribute(node, "name") ?? "").lowercased()
                    if key == "og:title", ogTitle == nil { ogTitle = attribute(node, "content") }
                    if key == "author", author == nil { author = attribute(node, "content") }
                case "article" where article == nil: article = node
                case "main" where main == nil: main = node
                case "body" where body == nil: body = node
                case "script", "style", "svg": descend = false
                default: break
                }
            }
            if descend, let child = node.pointee.children { node = child; continue }
            while node.pointee.next == nil {
                guard node != root, let parent = node.pointee.parent else { break walk }
                node = parent
                if node == root { break walk }
            }
            guard let next = node.pointee.next else { break }
            node = next
        }

        // The first candidate with any text: an empty <article> (a teaser's frame) does not hide the page.
        var writer = TextWriter(bytesMax: textBytesMax)
        for candidate in [article, main, body, root].compactMap({ $0 }) {
            writer = TextWriter(bytesMax: textBytesMax)
            writer.write(candidate)
            if !writer.isEmpty { break }
        }
        let text = String(decoding: writer.out, as: UTF8.self)
        return ParsedArticle(title: clean(ogTitle ?? title, max: titleCharactersMax), author: clean(author, max: authorCharactersMax),
                             text: text, wordCount: wordCount(writer.out), truncated: writer.truncated)
    }

    /// An element's name: libxml2's HTML parser gives it in lower case.
    static func name(_ node: xmlNodePtr) -> String {
        node.pointee.name.map { String(cString: $0) } ?? ""
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

    static func isSpace(_ byte: UInt8) -> Bool { byte == 32 || byte == 9 || byte == 10 || byte == 13 || byte == 12 }

    /// Words: runs of bytes between spaces that hold a letter or a digit (any non-ASCII byte counts
    /// as one: a letter of another script).
    static func wordCount(_ text: [UInt8]) -> Int {
        var count = 0, inWord = false, counted = false
        for byte in text {
            if isSpace(byte) { inWord = false; continue }
            if !inWord { inWord = true; counted = false }
            if !counted, byte >= 0x80 || (byte >= 48 && byte <= 57) || ((byte | 0x20) >= 97 && (byte | 0x20) <= 122) {
                count += 1
                counted = true
            }
        }
        return count
    }

    /// Paragraphs of text out of a subtree, as UTF-8: whitespace collapsed (kept inside `<pre>`),
    /// each line trimmed, a blank line at each block's end, up to `bytesMax` bytes.
    struct TextWriter {
        let bytesMax: Int
        private(set) var truncated = false
        private(set) var out: [UInt8] = []
        private var current: [UInt8] = []
        private var preDepth = 0
        /// Per element descended into: whether it is a block, whether a `<pre>`.
        private var entered: [(block: Bool, pre: Bool)] = []

        init(bytesMax: Int) { self.bytesMax = bytesMax }

        var isEmpty: Bool { out.isEmpty }

        /// Walks `top`'s subtree by the tree's own links.
        mutating func write(_ top: xmlNodePtr) {
            guard enter(top), var node = top.pointee.children else { endParagraph(); return }
            while !truncated {
                if enter(node), let child = node.pointee.children { node = child; continue }
                while node.pointee.next == nil {
                    guard let parent = node.pointee.parent else { endParagraph(); return }
                    node = parent
                    leave()
                    if node == top { endParagraph(); return }
                }
                node = node.pointee.next!
            }
        }

        /// Takes one node; true where its children are to be walked (it was pushed on `entered`).
        private mutating func enter(_ node: xmlNodePtr) -> Bool {
            switch node.pointee.type {
            case XML_TEXT_NODE, XML_CDATA_SECTION_NODE:
                if let content = node.pointee.content { append(content, strlen(UnsafeRawPointer(content).assumingMemoryBound(to: CChar.self))) }
                return false
            case XML_ELEMENT_NODE:
                let tag = ArticleExtractor.name(node)
                if ArticleExtractor.skipped.contains(tag) { return false }
                if node.pointee.properties != nil {
                    if xmlHasProp(node, "hidden") != nil { return false }
                    if xmlHasProp(node, "aria-hidden") != nil, ArticleExtractor.attribute(node, "aria-hidden")?.lowercased() == "true" { return false }
                }
                if tag == "br" { current.append(10); return false }
                let block = ArticleExtractor.blocks.contains(tag)
                if block { endParagraph() }
                guard node.pointee.children != nil else { return false }
                let pre = tag == "pre"
                if pre { preDepth += 1 }
                entered.append((block, pre))
                return true
            default:
                return false
            }
        }

        private mutating func leave() {
            guard let (block, pre) = entered.popLast() else { return }
            if pre { preDepth -= 1 }
            if block { endParagraph() }
        }

        private mutating func append(_ text: UnsafePointer<UInt8>, _ count: Int) {
            if preDepth > 0 {
                // Kept as it is but for line ends: "\r\n" and a lone "\r" are "\n".
                var index = 0
                while index < count {
                    let byte = text[index]
                    if byte == 13 {
                        current.append(10)
                        if index + 1 < count, text[index + 1] == 10 { index += 1 }
                    } else {
                        current.append(byte)
                    }
                    index += 1
                }
                return
            }
            var lastSpace = current.last.map { $0 == 32 || $0 == 10 } ?? true
            var index = 0
            while index < count {
                let byte = text[index]
                // A no-break space (U+00A0) is a space too.
                let space = ArticleExtractor.isSpace(byte) || (byte == 0xC2 && index + 1 < count && text[index + 1] == 0xA0)
                if space {
                    if byte == 0xC2 { index += 1 }
                    if !lastSpace { current.append(32); lastSpace = true }
                } else {
                    current.append(byte)
                    lastSpace = false
                }
                index += 1
            }
        }

        private mutating func endParagraph() {
            defer { current.removeAll(keepingCapacity: true) }
            guard !truncated, !current.isEmpty else { return }
            // Each line trimmed; blank lines at either end dropped.
            var paragraph: [UInt8] = []
            paragraph.reserveCapacity(current.count)
            var lineStart = 0
            while lineStart <= current.count {
                var lineEnd = lineStart
                while lineEnd < current.count, current[lineEnd] != 10 { lineEnd += 1 }
                var a = lineStart, b = lineEnd
                while a < b, ArticleExtractor.isSpace(current[a]) { a += 1 }
                while b > a, ArticleExtractor.isSpace(current[b - 1]) { b -= 1 }
                if a < b {
                    if !paragraph.isEmpty { paragraph.append(10) }
                    paragraph.append(contentsOf: current[a..<b])
                } else if !paragraph.isEmpty {
                    paragraph.append(10)
                }
                lineStart = lineEnd + 1
            }
            while paragraph.last == 10 { paragraph.removeLast() }
            guard !paragraph.isEmpty else { return }
            let separator = out.isEmpty ? 0 : 2
            if out.count + separator + paragraph.count <= bytesMax {
                if separator > 0 { out.append(10); out.append(10) }
                out.append(contentsOf: paragraph)
                return
            }
            // Cut the last paragraph on a character boundary within what is left.
            truncated = true
            var room = bytesMax - out.count - separator
            guard room > 0 else { return }
            while room > 0, room < paragraph.count, paragraph[room] & 0xC0 == 0x80 { room -= 1 }
            guard room > 0 else { return }
            if separator > 0 { out.append(10); out.append(10) }
            out.append(contentsOf: paragraph[..<room])
        }
    }
}
