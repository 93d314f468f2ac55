@testable import ChronicleCore
import ChronicleServer
@testable import ChronicleStore
@testable import ChronicleSync
import Foundation
import Testing
@testable import ChronicleServerStore

/// Devices on different app versions sharing one library: an old app (read-it-later v2)
/// beside current ones and a current server (v3).
@Suite struct VersionSkewTests {
    static let oldSchema: Schema = {
        let texts = ["readitlater/v1.json", "readitlater/v2.json"].map { EmbeddedSchemas.files[$0]! }
        return try! Schema.load(history: texts)
    }()

    /// An old app's device: its store made with the v2 schema, as that app version made it.
    static func oldDevice(_ h: SyncHarness, _ name: String) throws -> TestDevice {
        try h.device(name, schema: oldSchema)
    }

    @Test func anOldAppSetsAsideWhatItCannotReadAndAppliesItOnceUpgraded() async throws {
        let h = try SyncHarness(.inMemory)
        let old = try Self.oldDevice(h, "old")
        let new = try h.device("new")
        let article = try new.save("Shared")
        let collection = try new.store.write("collection.create", payload: ["name": .text("Reading")]).entityID
        await new.sync()
        await old.sync()
        // The current app files the article the v3 way; the old app the v2 way, on another collection.
        try new.store.write("collection.add_article", entity: collection, payload: ["article_id": .text(article.lowercased)])
        let oldCollection = try old.store.write("collection.create", payload: ["name": .text("Old")]).entityID
        try old.store.write("collection.add", entity: oldCollection, payload: ["article_id": .text(article.lowercased)])
        await new.sync()
        await old.sync()
        await new.sync()
        print("unreadable:", try old.store.unreadableOps())
        #expect(try old.store.unreadableOps().map(\.type) == ["collection.add_article@1"])
        #expect(try old.store.verify().passed)
        // The new app reads the old app's op, upcast.
        let members = try new.store.row(oldCollection)?.sets.first { $0.name == "members" }?.values.compactMap(\.textValue)
        #expect(members == [article.lowercased])

        // The old app is updated: its store opens with the current schema and applies what it set aside.
        let path = old.store.path
        let upgraded = try h.device("old", opening: path, token: old.token)
        #expect(try upgraded.store.unreadableOps().isEmpty)
        await upgraded.sync()
        try h.expectConverged()
    }

    @Test func anOldAppAwayPastTheHorizonKeepsItsOutboxAndSaysItMustBeUpdated() async throws {
        let h = try SyncHarness(.inMemory)
        let old = try Self.oldDevice(h, "old")
        let new = try h.device("new")
        for i in 0..<5 { try new.save("Before \(i)") }
        await new.sync()
        await old.sync()
        for i in 0..<20 { try old.save("Offline \(i)") }
        let queued = try old.store.pendingOps().map(\.opID)
        for i in 0..<5 { try new.save("Meanwhile \(i)") }
        await new.sync()
        _ = try RetentionHorizonTests.compactWithHorizon(h)

        let back = await old.engine.syncOnce()
        guard case .blocked(let reason) = back.outcome else {
            Issue.record("expected blocked, got \(back.outcome)")
            return
        }
        #expect(reason.hasPrefix("Update required:") && reason.contains("readitlater v3") && reason.hasSuffix("[update_required]"), "\(reason)")
        #expect(back.bootstrappedAt == nil)
        #expect(try old.store.pendingOps().map(\.opID) == queued, "nothing written offline is lost")
        #expect(try old.store.verify().passed)

        let upgraded = try h.device("old", opening: old.store.path, token: old.token)
        await upgraded.sync()
        #expect(try upgraded.store.pendingOps().isEmpty)
        await new.sync()
        try h.expectConverged()
    }

    @Test func anOldAppWhoseHistoryBeginsAtItsOwnSnapshotOpensUpgraded() async throws {
        let h = try SyncHarness(.inMemory)
        let old = try Self.oldDevice(h, "old")
        for i in 0..<30 { try old.save("Saved \(i)") }
        let collection = try old.store.write("collection.create", payload: ["name": .text("Old")]).entityID
        let first = try old.store.write("article.save", payload: ["url": .text("https://example.com/x"), "title": .text("x")]).entityID
        try old.store.write("collection.add", entity: collection, payload: ["article_id": .text(first.lowercased)])
        // A highlight's note, a merge-or-ask field in v3: who set it is known only from the log.
        let highlight = try old.store.write("highlight.create", payload: ["article_id": .text(first.lowercased), "quote": .text("q"),
                                                                          "note": .text("mine")]).entityID
        await old.sync()
        // A device's horizon is measured from the newest server time it holds, never by its own
        // clock: one more op, confirmed later, makes every op before it old (one-op segments, so
        // history is dropped right up to it).
        usleep(5_000)
        try old.save("Later")
        await old.sync()
        var policy = CompactionPolicy()
        policy.keepOps = 0
        policy.segmentOpsMax = 1
        policy.horizonMilliseconds = 1
        let report = try old.store.compact(policy)
        #expect(report.historyDroppedThrough != nil)
        let upgraded = try h.device("old", opening: old.store.path, token: old.token)
        #expect(try upgraded.store.verify().passed)
        // Carried over from the v2 snapshot, the note's bookkeeping is missing; the sync starts
        // the store over from the server's state, which has it.
        #expect(try upgraded.store.stateCarriedOver())
        func noteSeq() throws -> Int64? {
            try upgraded.store.read { db in try db.scalarInt("SELECT note__seq FROM highlight WHERE id = ?1", [.text(highlight.lowercased)]) }
        }
        #expect(try noteSeq() == nil)
        let synced = await upgraded.sync()
        #expect(synced.rewound?.rewoundTo == 0)
        #expect(try !upgraded.store.stateCarriedOver())
        #expect(try noteSeq() != nil)
        try h.expectConverged()
    }

    /// An old app wrote a snapshot (v2) and kept its history. Updated, the store replays its log
    /// in v3's shape; a later compaction drops history through that snapshot. History may be
    /// dropped only where a snapshot of the current version holds the state: one of v2 carried
    /// over lacks what only the log knew (the v3 note's bookkeeping), and the store's replay no
    /// longer gave its state (simulator seed 71 of 2,000 steps with app updates).
    @Test func historyIsDroppedOnlyAtASnapshotOfTheCurrentVersion() async throws {
        let h = try SyncHarness(.inMemory)
        let old = try Self.oldDevice(h, "old")
        let article = try old.save("Highlighted")
        for i in 0..<8 { try old.save("Saved \(i)") }
        let highlight = try old.store.write("highlight.create", payload: ["article_id": .text(article.lowercased), "quote": .text("q"),
                                                                          "note": .text("mine")]).entityID
        await old.sync()
        var keep = CompactionPolicy()
        keep.keepOps = 0
        keep.segmentOpsMax = 4
        keep.keepsSnapshotThatGrowsFile = true   // the case is about which snapshot history drops at
        let first = try old.store.compact(keep)
        let snapshotSeq = try #require(first.snapshotSeq)
        #expect(first.historyDroppedThrough == nil)

        let updated = try h.device("old", opening: old.store.path, token: old.token)
        #expect(try !updated.store.stateCarriedOver(), "history was there to replay")
        // One more op, confirmed later: the horizon is measured from the newest server time the
        // store holds, never by its own clock.
        usleep(5_000)
        try updated.save("Later")
        await updated.sync()
        var drop = keep
        drop.horizonMilliseconds = 1
        let second = try updated.store.compact(drop)
        #expect(second.historyDroppedThrough == snapshotSeq)
        let verified = try updated.store.verify()
        #expect(verified.passed, "\(verified)")
        func noteSeq() throws -> Int64? {
            try updated.store.read { db in try db.scalarInt("SELECT note__seq FROM highlight WHERE id = ?1", [.text(highlight.lowercased)]) }
        }
        let before = try noteSeq()
        #expect(before != nil)
        // Rebuilt from the snapshot at the new base, the note's bookkeeping is still there.
        _ = try updated.store.rebuild()
        #expect(try noteSeq() == before)
        await updated.sync()
        try h.expectConverged()
    }

    /// An old app's bulk apply was interrupted (its indexes set aside, `search_stale`) before the
    /// update: the updated app opens the store (it failed with an SQL error, building the new
    /// version's indexes on the old tables; simulation seeds 11 and 187 with app updates).
    @Test func anInterruptedBulkApplyOfAnOldAppOpensUpdated() async throws {
        let h = try SyncHarness(.inMemory)
        let old = try Self.oldDevice(h, "old")
        let article = try old.save("Kept")
        await old.sync()
        try old.store.writer.withLock { db in
            try db.execute("DROP INDEX IF EXISTS collection_members_by_value")
            try db.execute("INSERT OR REPLACE INTO chronicle_meta(key, value) VALUES ('search_stale', 1)")
        }
        let updated = try h.device("old", opening: old.store.path, token: old.token)
        #expect(try updated.title(article) == "Kept")
        #expect(try updated.store.verify().passed)
        #expect(try updated.store.search("kept").count == 1)
    }

    /// The server is updated: a library file its earlier build made (schema v2) is opened by this one.
    @Test func aLibraryAnEarlierServerBuildMadeOpensWithTheCurrentSchema() async throws {
        let h = try SyncHarness(.inMemory)
        let path = (h.directory + "/server" as NSString).appendingPathComponent("libraries/\(h.user.libraryID.lowercased).sqlite")
        let writer = try DeviceStore.create(at: h.directory + "/writer.chronicle", schema: Self.oldSchema, libraryID: h.user.libraryID)
        let article = try writer.write("article.save", payload: ["url": .text("https://example.com/a"), "title": .text("Old server"),
                                                                 "author": .text("Ada")]).entityID
        let collection = try writer.write("collection.create", payload: ["name": .text("Old")]).entityID
        try writer.write("collection.add", entity: collection, payload: ["article_id": .text(article.lowercased)])
        do {
            let earlier = try ServerLibrary.openOrCreate(at: path, libraryID: h.user.libraryID, schema: Self.oldSchema)
            let response = try earlier.push(try writer.pendingOps(), from: writer.deviceID)
            print("earlier server:", response)
        }
        let new = try h.device("new")
        await new.sync()
        #expect(try new.store.row(article)?["author"]?.textValue == "Ada")
        let episode = try new.store.write("episode.save", payload: ["title": .text("E"), "feed": .text("https://example.com/feed"), "audio_ref": .text("a")]).entityID
        try new.store.write("collection.add_episode", entity: collection, payload: ["episode_id": .text(episode.lowercased)])
        await new.sync()
        try h.expectConverged()
    }

    /// A new device of an old app on a big library whose snapshot a current server made: it pulls
    /// the log instead of starting from the snapshot, and reads what it can.
    @Test func aNewDeviceOfAnOldAppPullsTheLogWhereTheSnapshotIsOfALaterVersion() async throws {
        let h = try SyncHarness(.inMemory)
        let new = try h.device("new")
        for i in 0..<40 { try new.save("Saved \(i)") }
        await new.sync()
        var policy = CompactionPolicy()
        policy.keepOps = 0
        policy.segmentOpsMax = 10
        policy.snapshotEveryOps = 1
        _ = try h.service.compact(library: h.user.libraryID, policy: policy)
        #expect(try h.library.latestSnapshotSeq() == 40)
        var configuration = SyncEngine.Configuration()
        configuration.snapshotStartOpsMin = 10
        let old = try h.device("old", schema: Self.oldSchema, configuration: configuration)
        let first = await old.sync()
        #expect(first.bootstrappedAt == nil && first.pulled == 40)
        #expect(try old.store.rows("article", limit: 100).count == 40)
        #expect(try old.store.verify().passed)
        // A device of the current app starts from that snapshot.
        let other = try h.device("other", configuration: configuration)
        #expect(await other.sync().bootstrappedAt == 40)
        #expect(try other.store.digest() == h.library.digest())
    }

    /// The server is updated after its horizon dropped history: the library's state is carried
    /// over from the snapshot history begins at, and devices start from a snapshot of the new shape.
    @Test(arguments: TransportKind.allCases)
    func aServerUpdatedPastItsHorizonCarriesTheStateOverAndDevicesStartFromTheNewShape(kind: TransportKind) async throws {
        let h = try SyncHarness(kind)
        let path = (h.directory + "/server" as NSString).appendingPathComponent("libraries/\(h.user.libraryID.lowercased).sqlite")
        let writer = try DeviceStore.create(at: h.directory + "/writer.chronicle", schema: Self.oldSchema, libraryID: h.user.libraryID)
        var articles: [UUID] = []
        for i in 0..<30 {
            articles.append(try writer.write("article.save", payload: ["url": .text("https://example.com/\(i)"), "title": .text("Old \(i)")]).entityID)
        }
        let collection = try writer.write("collection.create", payload: ["name": .text("Old")]).entityID
        try writer.write("collection.add", entity: collection, payload: ["article_id": .text(articles[0].lowercased)])
        try writer.write("article.tag", entity: articles[1], payload: ["tag": .text("kept")])
        // A highlight's note, merge-or-ask in v3: who set it is known only from the log.
        let highlight = try writer.write("highlight.create", payload: ["article_id": .text(articles[2].lowercased), "quote": .text("q"),
                                                                     "note": .text("n")]).entityID
        // A device of the old app that synced the whole history before the horizon dropped it.
        let full = try h.device("full", schema: Self.oldSchema)
        do {
            let earlier = try ServerLibrary.openOrCreate(at: path, libraryID: h.user.libraryID, schema: Self.oldSchema)
            _ = try earlier.push(try writer.pendingOps(), from: writer.deviceID)
            try full.store.applyConfirmed(try earlier.pull(after: 0, limit: 1_000).ops)
            usleep(5_000)
            var policy = CompactionPolicy()
            policy.keepOps = 0
            policy.segmentOpsMax = 10
            policy.horizonMilliseconds = 1
            let report = try earlier.compact(policy)
            #expect(report.historyDroppedThrough == 34)
        }
        // The updated server opens it: the state is the old snapshot's, in the new shape.
        let new = try h.device("new")
        let first = await new.sync()
        #expect(first.bootstrappedAt == 34)
        #expect(try new.store.row(collection)?.sets.first { $0.name == "members" }?.values.compactMap(\.textValue) == [articles[0].lowercased])
        #expect(try new.tags(articles[1]) == ["kept"])
        #expect(try h.library.verdict(articles[2]).fields["title"]?.textValue == "Old 2")
        let episode = try new.store.write("episode.save", payload: ["title": .text("E"), "feed": .text("https://example.com/feed"),
                                                                     "audio_ref": .text("a")]).entityID
        try new.store.write("collection.add_episode", entity: collection, payload: ["episode_id": .text(episode.lowercased)])
        await new.sync()
        #expect(try h.library.read { db in try db.scalarInt("SELECT note__seq FROM highlight WHERE id = ?1", [.text(highlight.lowercased)]) } == nil)
        // The old app's device is updated: it replays its whole log, which knows who set the note,
        // where the server's state does not; it takes the server's state.
        let updated = try h.device("full", opening: full.store.path, token: full.token)
        let back = await updated.sync()
        #expect(back.bootstrappedAt == 34, "\(back)")
        try h.expectConverged()
        #expect(try new.store.verify().passed)
        #expect(try updated.store.verify().passed)
    }

    /// A snapshot made with v1 (where the article's author was its `byline`) read by this build.
    @Test func aSnapshotOfTheFirstVersionCarriesARenamedFieldOver() throws {
        let v1 = try Schema.load(json: EmbeddedSchemas.files["readitlater/v1.json"]!)
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-skew-\(UUID().lowercased)").path
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let library = UUID()
        let old = try DeviceStore.create(at: root + "/old.chronicle", schema: v1, libraryID: library)
        let article = try old.write("article.save", payload: ["url": .text("https://example.com/a"), "title": .text("A"),
                                                           "byline": .text("Ada")]).entityID
        try old.write("article.tag", entity: article, payload: ["tag": .text("t")])
        // Confirmed by a server, on another device of that version.
        let confirmed = try old.pendingOps().enumerated().map { index, op in
            var op = op
            op.serverSeq = Int64(index + 1)
            op.serverTime = op.deviceTime
            return op
        }
        let other = try DeviceStore.create(at: root + "/other.chronicle", schema: v1, libraryID: library)
        try other.applyConfirmed(confirmed)
        let body = try other.read { db in try ProjectionTables.snapshotBody(other.projection, from: db, seq: 2, libraryID: library).body }
        let snapshot = try SnapshotCodec.decodeBody(body)
        #expect(snapshot.schemaVersion == 1)
        let current = try DeviceStore.create(at: root + "/new.chronicle", schema: .readItLater, libraryID: library)
        try current.bootstrap(from: snapshot)
        #expect(try current.row(article)?["author"]?.textValue == "Ada")
        #expect(try current.row(article)?.sets.first { $0.name == "tags" }?.values.compactMap(\.textValue) == ["t"])
        let verified = try current.verify()
        #expect(verified.passed, "\(verified)")
        // A later version than this build's is refused with its own code, the store left as it was.
        var future = snapshot
        future.schemaVersion = Schema.readItLater.version + 1
        future.schemaFingerprint = "future"
        #expect(throws: ChronicleError.self) { try current.bootstrap(from: future) }
        do { try current.bootstrap(from: future) } catch let error as ChronicleError { #expect(error.code == .updateRequired) }
        #expect(try current.row(article)?["author"]?.textValue == "Ada")
    }

    /// An app with a schema of its own syncs through a server that is given it, over HTTP.
    @Test func anAppsOwnSchemaSyncsThroughAServerGivenIt() async throws {
        let schema = try Schema.load(json: try OwnSchema.v1)
        let h = try SyncHarness(.http, schema: schema)
        let a = try h.device("A")
        let b = try h.device("B")
        let recipe = try a.store.write("recipe.create", payload: ["title": .text("Soup"), "cook": .text("Ada")]).entityID
        await a.sync()
        await b.sync()
        #expect(try b.store.row(recipe)?["cook"]?.textValue == "Ada")
        try h.expectConverged()
    }
}

/// A schema no build includes, as an app would ship its own (`Tests/Fixtures/schemas/recipes-v1.json`).
enum OwnSchema {
    static var v1: String {
        get throws {
            let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .appendingPathComponent("Fixtures/schemas/recipes-v1.json")
            return try String(contentsOf: url, encoding: .utf8)
        }
    }
}
