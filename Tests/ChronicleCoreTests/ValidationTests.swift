import ChronicleCore
import Foundation
import Testing

/// `Schema.validate` reads lengths in characters and errors name the first offender in
/// sorted order; it decides both from bytes where it can (it runs for every op a server
/// accepts), and must decide exactly as the character-by-character reading would.
@Suite struct ValidationTests {
    let schema = Schema.readItLater

    func error(_ type: String, _ payload: Payload, version: Int? = nil) -> ChronicleError? {
        let version = version ?? schema.currentOpType(type)!.version
        do {
            _ = try schema.validate(type: type, version: version, payload: payload, serverAuthored: false)
            return nil
        } catch {
            return error
        }
    }

    func save(title: String) -> Payload { ["url": .text("https://example.com/a"), "title": .text(title)] }

    @Test func lengthsAreCharactersWhateverTheirBytes() {
        // title: at most 2,000 characters.
        #expect(error("article.save", save(title: String(repeating: "a", count: 2_000))) == nil)
        #expect(error("article.save", save(title: String(repeating: "a", count: 2_001)))?.message.contains("got 2001") == true)
        // 2,000 characters of 4 bytes (8,000 bytes), and of a base letter with a combining mark: still 2,000.
        #expect(error("article.save", save(title: String(repeating: "🎉", count: 2_000))) == nil)
        #expect(error("article.save", save(title: String(repeating: "e\u{301}", count: 2_000))) == nil)
        #expect(error("article.save", save(title: String(repeating: "🎉", count: 2_001)))?.code == .invalidValue)
        // tags: at least one character; an emoji is one.
        #expect(error("article.tag", ["tag": .text("")])?.message.contains("cannot be empty") == true)
        #expect(error("article.tag", ["tag": .text("🏷")]) == nil)
        #expect(error("article.tag", ["tag": .text(String(repeating: "ü", count: 100))]) == nil)
        #expect(error("article.tag", ["tag": .text(String(repeating: "ü", count: 101))])?.code == .invalidValue)
    }

    @Test func urlsWithWhitespaceAnywhereAreRefused() {
        for url in ["https://exa mple.com", "https://example.com/\t", "https://example.com/\r\n", "https://example.com/\u{0B}",
                    "https://example.com/ü ", "https://exämple.com/\u{3000}x", "https://example.com/\u{A0}", "https://example.com/\u{2028}"] {
            #expect(!Schema.isWebURL(url), "\(url.debugDescription)")
        }
        for url in ["https://example.com/a", "http://exämple.com/ü?q=1#f", "https://example.com/%20"] {
            #expect(Schema.isWebURL(url), "\(url.debugDescription)")
        }
    }

    @Test func errorsNameTheFirstOffenderInSortedOrder() {
        var payload = save(title: "t")
        payload["zeta"] = .text("z")
        payload["alpha"] = .text("a")
        #expect(error("article.save", payload)?.message.contains("no field 'alpha'") == true)
        #expect(error("article.save", ["title": .text("t")])?.message.contains("needs 'url'") == true)
        #expect(error("article.tag", ["tag": .text("x"), "b": .integer(1), "a": .integer(1)])?.message.contains("no field 'a'") == true)
        #expect(error("article.tag", ["other": .text("x")])?.message.contains("no field 'other'") == true)
        #expect(error("article.tag", [:])?.code == .missingField)
    }
}
