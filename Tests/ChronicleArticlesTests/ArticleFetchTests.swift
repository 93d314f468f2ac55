@testable import ChronicleArticles
import ChronicleCore
@testable import ChronicleServer
import ChronicleStore
import Foundation
import Testing

/// The article fetcher over real HTTP: a device saves links, the server fetches the pages from a
/// web server on loopback (libmicrohttpd), reads them (libxml2) and appends `article.parsed`;
/// the device's next sync brings the text, searchable.
@Suite(.serialized) struct ArticleFetchTests {
    /// Pages on loopback, and how often each was asked for.
    final class Pages: HTTPHandler, @unchecked Sendable {
        let lock = NSLock()
        var hits: [String: Int] = [:]

        func count(_ path: String) -> Int { lock.lock(); defer { lock.unlock() }; return hits[path] ?? 0 }

        static let article = """
            <html><head><title>The Zeppelin Age</title><meta name="author" content="Hugo Eckener"></head>
            <body><nav>menu</nav><article><h1>The Zeppelin Age</h1><p>Airships crossed the ocean in days.</p>
            <p>Each zeppelin carried a few passengers in comfort.</p></article><footer>footer</footer></body></html>
            """

        func handle(_ request: HTTPRequest, respond: @escaping @Sendable (HTTPResponse) -> Void) {
            lock.lock()
            hits[request.path, default: 0] += 1
            let hit = hits[request.path]!
            lock.unlock()
            let html = [("Content-Type", "text/html; charset=utf-8")]
            switch request.path {
            case "/zeppelin": respond(HTTPResponse(status: 200, headers: html, body: Array(Self.article.utf8)))
            case "/moved": respond(HTTPResponse(status: 301, headers: [("Location", "/landing")]))
            case "/landing": respond(HTTPResponse(status: 200, headers: html, body: Array("<title>Landing</title><p>arrived safely here</p>".utf8)))
            case "/flaky":
                respond(hit == 1 ? HTTPResponse(status: 503) : HTTPResponse(status: 200, headers: html, body: Array("<p>second time lucky</p>".utf8)))
            case "/image": respond(HTTPResponse(status: 200, headers: [("Content-Type", "image/png")], body: [0x89, 0x50, 0x4E, 0x47]))
            case "/huge": respond(HTTPResponse(status: 200, headers: html, body: Array(("<p>" + String(repeating: "word ", count: 10_000) + "</p>").utf8)))
            default: respond(HTTPResponse(status: 404, headers: html, body: Array("<p>not here</p>".utf8)))
            }
        }
    }

    static func policy(private allowed: Bool) -> ArticleFetchPolicy {
        var fetch = ArticleFetchPolicy()
        fetch.allowsPrivateAddresses = allowed
        fetch.bodyBytesMax = 20_000
        fetch.retryDelaysSeconds = [0.05]
        fetch.timeoutSeconds = 10
        return fetch
    }

    /// Waits (up to 30 s) until the library holds `count` `article.parsed` ops.
    static func parsedOps(_ h: ArticleHarness, count: Int) async throws -> [Op] {
        let deadline = Date().addingTimeInterval(30)
        while true {
            let parsed = try h.library.allOps().filter { $0.type == "article.parsed" }
            if parsed.count >= count || Date() > deadline { return parsed }
            try await Task.sleep(nanoseconds: 20_000_000)
        }
    }

    @Test func savedPagesAreReadAndTheirTextReachesTheDevices() async throws {
        let pages = Pages()
        let web = try HTTPServer(configuration: HTTPServer.Configuration(), handler: pages)
        defer { web.stop() }
        let base = "http://127.0.0.1:\(web.port)"
        let h = try ArticleHarness(fetch: Self.policy(private: true))
        _ = try h.service.setPlan(library: h.user.libraryID, plan: "premium")   // the article text index is premium
        let a = try h.device("A")
        let b = try h.device("B")
        var ids: [String: UUID] = [:]
        for path in ["zeppelin", "moved", "flaky", "image", "huge", "missing"] {
            var payload: Payload = ["url": .text("\(base)/\(path)")]
            if path == "moved" { payload["title"] = .text("My own title") }
            ids[path] = try a.store.write("article.save", payload: payload).entityID
        }
        #expect(await a.sync().outcome == .synced)
        let parsed = try await Self.parsedOps(h, count: 6)
        #expect(parsed.count == 6)
        #expect(parsed.allSatisfy { $0.deviceID == Op.serverDeviceID })
        #expect(await b.sync().outcome == .synced)
        #expect(await a.sync().outcome == .synced)

        let zeppelin = try #require(try b.store.row(ids["zeppelin"]!))
        #expect(zeppelin["text"]?.textValue == "The Zeppelin Age\n\nAirships crossed the ocean in days.\n\nEach zeppelin carried a few passengers in comfort.")
        #expect(zeppelin["word_count"]?.integerValue == 17)
        #expect(zeppelin["title"]?.textValue == "The Zeppelin Age" && zeppelin["author"]?.textValue == "Hugo Eckener")
        let moved = try #require(try b.store.row(ids["moved"]!))
        #expect(moved["text"]?.textValue == "arrived safely here")
        #expect(moved["title"]?.textValue == "My own title", "a title the person gave is kept")
        #expect(try b.store.row(ids["flaky"]!)?["text"]?.textValue == "second time lucky")
        #expect(pages.count("/flaky") == 2)
        for path in ["image", "huge", "missing"] {
            let row = try #require(try b.store.row(ids[path]!))
            #expect(row["text"]?.textValue == "" && row["word_count"]?.integerValue == 0, "\(path): unreadable, given empty text")
        }
        let hits = try b.store.search("passengers")
        #expect(hits.first?.id == ids["zeppelin"]!.lowercased, "\(hits)")
        try h.expectConverged()

        // Read once: another sync, another look at the library, fetch nothing again.
        #expect(await a.sync().outcome == .synced)
        #expect(pages.count("/zeppelin") == 1)
        let metrics = h.service.metrics.render() + h.service.renderLibraryMetrics() + h.service.renderExtensionMetrics()
        #expect(metrics.contains("chronicle_articles_parsed_total 3") && metrics.contains("chronicle_articles_unreadable_total 3"), "\(metrics)")
    }

    /// Without `allowsPrivateAddresses`, a link to the server's own network is never fetched.
    @Test func aLinkToALoopbackAddressIsNotFetched() async throws {
        let pages = Pages()
        let web = try HTTPServer(configuration: HTTPServer.Configuration(), handler: pages)
        defer { web.stop() }
        let h = try ArticleHarness(fetch: Self.policy(private: false))
        let a = try h.device("A")
        let id = try a.store.write("article.save", payload: ["url": .text("http://127.0.0.1:\(web.port)/zeppelin")]).entityID
        let other = try a.store.write("article.save", payload: ["url": .text("http://localhost:\(web.port)/zeppelin")]).entityID
        #expect(await a.sync().outcome == .synced)
        #expect(try await Self.parsedOps(h, count: 2).count == 2)
        #expect(await a.sync().outcome == .synced)
        for article in [id, other] { #expect(try a.store.row(article)?["text"]?.textValue == "") }
        #expect(pages.count("/zeppelin") == 0)
        #expect(!PublicAddress.isPublic(v4: 0x0A00_0001) && !PublicAddress.isPublic(v4: 0xA9FE_A9FE) && PublicAddress.isPublic(v4: 0x0808_0808))
        #expect(!PublicAddress.isPublic(v6: [0xFE, 0x80] + Array(repeating: 0, count: 14)))
        #expect(!PublicAddress.isPublic(v6: Array(repeating: 0, count: 10) + [0xFF, 0xFF, 127, 0, 0, 1]))
        #expect(PublicAddress.isPublic(v6: [0x2A, 0x00, 0x14, 0x50] + Array(repeating: 0, count: 11) + [1]))
    }

    /// A page saved while the server did not fetch (stopped first, or fetching off) is read
    /// once a server that fetches opens the library.
    @Test func aPageSavedBeforeAServerThatFetchesIsReadWhenItOpensTheLibrary() async throws {
        let pages = Pages()
        let web = try HTTPServer(configuration: HTTPServer.Configuration(), handler: pages)
        defer { web.stop() }
        let h = try ArticleHarness()
        let a = try h.device("A")
        let id = try a.store.write("article.save", payload: ["url": .text("http://127.0.0.1:\(web.port)/zeppelin")]).entityID
        #expect(await a.sync().outcome == .synced)
        h.http.stop()
        let later = try SyncServer(dataDirectory: h.directory + "/server", extensions: [ArticleFetcher(policy: Self.policy(private: true))])
        defer { later.stop() }
        _ = try later.service.library(h.user.libraryID)
        let deadline = Date().addingTimeInterval(30)
        while try later.service.library(h.user.libraryID).allOps().filter({ $0.type == "article.parsed" }).isEmpty, Date() < deadline {
            try await Task.sleep(nanoseconds: 20_000_000)
        }
        let row = try later.service.library(h.user.libraryID).verdict(id)
        #expect(row.fields["word_count"]?.integerValue == 17)
        #expect(pages.count("/zeppelin") == 1)
    }
}
