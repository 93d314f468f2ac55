import ChronicleArticles
import ChronicleCore
import ChronicleServer
import ChronicleStore
import ChronicleSync
import Foundation

extension Command {
    static let demo = Command(
        name: "demo", summary: "The airplane test, live: a real server, two devices, one of them offline for a while.",
        usage: "chronicle demo [--keep]",
        details: """
            Starts a sync server on a free loopback port with a temporary data directory, signs in two devices (a phone
            and a laptop), and walks through the airplane test step by step, printing what each device sees: the phone
            goes offline and keeps working, the laptop edits some of the same rows, the phone reconnects, and both end
            with the same state digest as the server. --keep leaves the temporary directory (server data, both stores)
            in place and prints where it is.
            """) { args, ctx in
        let keep = args.flag("keep")
        try args.finish(usage: "chronicle demo [--keep]")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-demo-\(UUID().lowercased.prefix(8))").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { if !keep { try? FileManager.default.removeItem(atPath: directory) } }
        let say = ctx.output
        try Blocking.run { try await AirplaneDemo(directory: directory, say: { say.line($0) }).run() }
        if keep { say.line("\nEverything is kept in \(directory).") }
        return ExitCode.success
    }
}

/// The step-by-step airplane test `chronicle demo` prints.
struct AirplaneDemo: Sendable {
    let directory: String
    let say: @Sendable (String) -> Void

    struct Device {
        let name: String
        let store: DeviceStore
        let online: SyncEngine
        let offline: SyncEngine
    }

    func run() async throws {
        // The pages the phone saves, served on this machine, so the server's fetcher has something to read offline.
        let web = try HTTPServer(configuration: HTTPServer.Configuration(), handler: DemoPages())
        defer { web.stop() }
        let pages = "http://127.0.0.1:\(web.port)"
        var fetch = ArticleFetchPolicy()
        fetch.allowsPrivateAddresses = true   // the pages are on this machine
        let fetcher = ArticleFetcher(policy: fetch)
        let server = try SyncServer(dataDirectory: directory + "/server", extensions: [fetcher])
        defer { server.stop() }
        step("1. A sync server is listening on \(server.url.absoluteString) (embedded SQLite in \(directory)/server),")
        say("   reading the pages people save (--fetch-articles); a web server on \(pages) serves them.")
        let password = "demo-" + UUID().lowercased
        let user = try server.service.accounts.addUser("ada", password: password, schema: .readItLater)
        say("   User 'ada' owns library \(user.libraryID.lowercased).")

        let phone = try await device("phone", server: server, password: password)
        let laptop = try await device("laptop", server: server, password: password)
        say("   Two devices signed in: phone \(short(phone.store.deviceID)) and laptop \(short(laptop.store.deviceID)).")

        step("2. Online, the phone saves three articles and syncs; the server reads the three pages; the laptop syncs and sees them.")
        let swift = try phone.store.write("article.save", payload: ["url": .text("\(pages)/swift-6"), "title": .text("Swift 6 released")])
        let sqlite = try phone.store.write("article.save", payload: ["url": .text("\(pages)/wal")])
        let tunnels = try phone.store.write("article.save", payload: ["url": .text("\(pages)/tunnels"), "title": .text("Why trains lose signal in tunnels")])
        try phone.store.write("article.tag", entity: swift.entityID, payload: ["tag": .text("swift")])
        report(phone, await phone.online.syncOnce())
        try await pagesRead(fetcher)
        report(laptop, await laptop.online.syncOnce())
        try show(laptop)
        say("   (\"Write-Ahead Logging\" was saved with no title: the server took it from the page, with the text and its word count.)")

        step("3. The phone goes into airplane mode and keeps working: saves, tags, highlights, notes, a collection, progress, a rename, a delete,")
        say("   and an episode it records, its audio a 3 MB file.")
        report(phone, await phone.offline.syncOnce())
        let offlineArticle = try phone.store.write("article.save", payload: ["url": .text("\(pages)/offline-first"), "title": .text("Offline-first, explained")])
        try phone.store.write("article.tag", entity: offlineArticle.entityID, payload: ["tag": .text("sync")])
        try phone.store.write("article.tag", entity: sqlite.entityID, payload: ["tag": .text("databases")])
        try phone.store.write("highlight.create", payload: ["article_id": .text(sqlite.entityID.lowercased), "quote": .text("readers do not block writers"), "color": .text("green")])
        try phone.store.write("note.create", payload: ["article_id": .text(swift.entityID.lowercased), "body": .text("Try strict concurrency on the store module.")])
        let collection = try phone.store.write("collection.create", payload: ["name": .text("Read on the plane")])
        try phone.store.write("collection.add_article", entity: collection.entityID, payload: ["article_id": .text(sqlite.entityID.lowercased)])
        try phone.store.write("collection.add_article", entity: collection.entityID, payload: ["article_id": .text(offlineArticle.entityID.lowercased)])
        try phone.store.write("article.progress", entity: sqlite.entityID, payload: ["progress": .real(0.8)])
        try phone.store.write("article.update", entity: swift.entityID, payload: ["title": .text("Swift 6 (phone's title)")])
        try phone.store.write("article.delete", entity: tunnels.entityID)
        for index in 1...40 {
            let saved = try phone.store.write("article.save", payload: ["url": .text("\(pages)/long-read/\(index)"), "title": .text("Long read #\(index)")])
            try phone.store.write("article.tag", entity: saved.entityID, payload: ["tag": .text("later")])
        }
        // An episode recorded on the plane: its audio is a file kept in the store, queued apart from the ops.
        var audio = [UInt8](repeating: 0, count: 3_000_000)
        var seed: UInt64 = 0x5EED
        for index in audio.indices { seed = seed &* 6_364_136_223_846_793_005 &+ 1; audio[index] = UInt8(truncatingIfNeeded: seed >> 33) }
        let audioRef = try phone.store.addBlob(audio, mediaType: "audio/mpeg")
        let episode = try phone.store.write("episode.save", payload: ["title": .text("Recorded on the plane"), "audio_ref": .text(audioRef.description)])
        say("   Phone: " + (try statusLine(phone)))

        step("4. Meanwhile the laptop, online, edits some of the same rows and syncs.")
        try laptop.store.write("article.update", entity: swift.entityID, payload: ["title": .text("Swift 6 (laptop's title)")])
        try laptop.store.write("article.tag", entity: sqlite.entityID, payload: ["tag": .text("wal")])
        try laptop.store.write("article.progress", entity: sqlite.entityID, payload: ["progress": .real(0.45)])
        report(laptop, await laptop.online.syncOnce())
        say("   The phone still shows its own edit while it waits: \"\(try title(phone, swift.entityID))\"")

        step("5. The phone reconnects and syncs; the server reads the pages it saved on the plane; the laptop syncs, then the phone.")
        report(phone, await phone.online.syncOnce())
        try await pagesRead(fetcher)
        report(laptop, await laptop.online.syncOnce())
        report(phone, await phone.online.syncOnce())
        say("   Phone: " + (try statusLine(phone)))
        say("   Laptop: " + (try statusLine(laptop)))

        step("6. What each device sees now.")
        try show(phone)
        try show(laptop)
        say("   The rename: both show \"\(try title(phone, swift.entityID))\" — the phone's rename reached the server last, and the")
        say("   last write in server order wins (never a device clock). Progress on \"Write-Ahead Logging\" stays at")
        say("   \(try progress(laptop, sqlite.entityID)) on both: reading progress only moves forward. Tags from both devices are kept.")
        let named = try laptop.store.row(episode.entityID)?["audio_ref"]?.textValue.flatMap(BlobRef.init)
        guard let named else { throw ChronicleError(.invariantViolated, "The episode reached the laptop without its audio's address; this is a bug.") }
        let fetched = try await laptop.online.fetchBlob(named)
        let same = try laptop.store.blob(named) == audio
        say("   The episode recorded on the plane: the laptop fetched its audio (\(fetched.length) bytes), \(same ? "byte for byte the phone's" : "BUT IT DIFFERS")")
        say("   — uploaded in chunks after the ops, so the file never held up the changes.")

        step("7. Convergence.")
        let library = try server.service.library(user.libraryID)
        let serverDigest = try library.digest()
        let phoneDigest = try phone.store.digest()
        let laptopDigest = try laptop.store.digest()
        let rebuilt = try phone.store.replayDigest()
        say("   server  \(serverDigest)  (\(library.head) ops in the log)")
        say("   phone   \(phoneDigest)")
        say("   laptop  \(laptopDigest)")
        say("   phone, rebuilt from its log: \(rebuilt)")
        guard serverDigest == phoneDigest, phoneDigest == laptopDigest, rebuilt == phoneDigest else {
            throw ChronicleError(.digestMismatch, "The devices did not converge; this is a bug. Data is in \(directory).")
        }
        say("   All equal: no conflict dialogs, nothing lost, nothing applied twice.")
    }

    private func device(_ name: String, server: SyncServer, password: String) async throws -> Device {
        let path = "\(directory)/\(name).chronicle"
        let created = try DeviceStore.create(at: path, schema: .readItLater)
        let registration = try await HTTPTransport.register(baseURL: server.url, user: "ada", password: password, deviceID: created.deviceID)
        try DeviceStore.bindLibrary(at: path, to: UUID(text: registration.libraryID)!)
        let store = try DeviceStore.open(at: path)
        var quick = SyncEngine.Configuration()
        quick.retriesPerRoundMax = 1
        quick.backoffBaseMilliseconds = 50
        let online = SyncEngine(store: store, transport: HTTPTransport(baseURL: server.url, library: store.libraryID, token: registration.token))
        // Airplane mode: nothing listens on port 9 of the loopback.
        let nowhere = HTTPTransport(baseURL: URL(string: "http://127.0.0.1:9")!, library: store.libraryID, token: registration.token,
                                    requestTimeoutSeconds: 2)
        return Device(name: name, store: store, online: online, offline: SyncEngine(store: store, transport: nowhere, configuration: quick))
    }

    private func step(_ text: String) { say("\n" + text) }

    /// Waits until the server has read every page saved so far (at most 30 s).
    private func pagesRead(_ fetcher: ArticleFetcher) async throws {
        let deadline = Date().addingTimeInterval(30)
        while fetcher.pending > 0, Date() < deadline { try await Task.sleep(nanoseconds: 10_000_000) }
    }

    /// The random end of the id (the start of a UUIDv7 is its timestamp).
    private func short(_ id: UUID) -> String { String(id.lowercased.suffix(8)) }

    private func report(_ device: Device, _ report: SyncReport) {
        say("   \(device.name) sync: " + Command.describe(report))
    }

    private func statusLine(_ device: Device) throws -> String {
        Command.statusLine(unsent: try device.store.status().unsentOps, sync: try device.store.syncState(), signedIn: true,
                           now: Int64(Date().timeIntervalSince1970 * 1000), filesWaiting: try device.store.blobUploadBacklog())
    }

    private func title(_ device: Device, _ id: UUID) throws -> String {
        try device.store.row(id)?["title"]?.textValue ?? "?"
    }

    private func progress(_ device: Device, _ id: UUID) throws -> String {
        try device.store.row(id)?["progress"]?.display ?? "?"
    }

    private func show(_ device: Device) throws {
        let rows = try device.store.rows("article", where: "t.url NOT LIKE '%/long-read/%'")
        let total = try device.store.rows("article", limit: 100_000).count
        say("   \(device.name) — \(total) articles\(total > rows.count ? " (\(total - rows.count) long reads not shown)" : ""):")
        for row in rows {
            let tags = row.sets.first { $0.name == "tags" }?.values.compactMap(\.textValue) ?? []
            var notes: [String] = []
            if let words = row["word_count"]?.integerValue, words > 0 { notes.append("\(words) words") }
            if let progress = row["progress"]?.realValue, progress > 0 { notes.append("read \(Int(progress * 100))%") }
            if row.pending { notes.append("pending") }
            say("     · \(row["title"]?.textValue ?? "?")\(tags.isEmpty ? "" : " [\(tags.joined(separator: ", "))]")\(notes.isEmpty ? "" : " (\(notes.joined(separator: ", ")))")")
        }
    }
}

/// The web pages of the demo: a short article for each link the phone saves.
struct DemoPages: HTTPHandler {
    static let articles: [String: (title: String, body: String)] = [
        "/swift-6": ("Swift 6 released", "Swift 6 brings data-race safety by default. The compiler now checks that values shared between tasks are safe to share."),
        "/wal": ("Write-Ahead Logging", "With a write-ahead log, readers do not block writers and writers do not block readers. Changes go to the log first and reach the database at a checkpoint."),
        "/tunnels": ("Why trains lose signal in tunnels", "Radio waves do not pass through rock. Tunnels need repeaters, and most have none."),
        "/offline-first": ("Offline-first, explained", "An offline-first app treats the network as an optimisation. Every change is saved on the device first and synced when a connection is there."),
    ]

    func handle(_ request: HTTPRequest, respond: @escaping @Sendable (HTTPResponse) -> Void) {
        let page = Self.articles[request.path]
            ?? ("A long read", "This is one of the long reads saved for later. " + String(repeating: "It goes on for a while. ", count: 40))
        let html = "<html><head><title>\(page.title)</title><meta name=\"author\" content=\"Chronicle demo\"></head><body>"
            + "<nav>Home · About</nav><article><h1>\(page.title)</h1><p>\(page.body)</p></article><footer>demo pages</footer></body></html>"
        respond(HTTPResponse(status: 200, headers: [("Content-Type", "text/html; charset=utf-8")], body: Array(html.utf8)))
    }
}
