import ChronicleCore
@testable import ChronicleStore
import Foundation
import Testing
import ChronicleTesting

/// Search indexes built on two threads (`ParallelSearchBuild`): the worker's index, copied
/// into the store, must be the very index FTS5 keeps up to date row by row.
@Suite struct ParallelSearchBuildTests {
    static let words = ["tunnel", "plane", "basement", "harbor", "lantern", "signal", "meadow", "copper", "orbit", "ledger",
                        "quartz", "velvet", "ember", "glacier", "saffron", "thistle", "cobalt", "juniper", "marble", "nimbus"]

    /// On one core the writer builds every index itself.
    static let twoCores = DeviceStore.searchBuildHasSecondCore

    /// Enough text (over `parallelSearchBuildMinBytes`) in articles, tags, highlights and notes
    /// that the worker takes part; some rows deleted, some renamed.
    func library(_ server: ServerLog, articles: Int) -> [[Op]] {
        let random = SeededIDGenerator(seed: 7)
        func below(_ n: Int) -> Int { Int(random.next() % UInt64(n)) }
        func sentence(_ count: Int) -> String {
            (0..<count).map { _ in Self.words[below(Self.words.count)] + (below(4) == 0 ? "s" : "") }.joined(separator: " ")
        }
        let phone = UUID(), tablet = UUID()
        var ops: [Op] = []
        var ids: [UUID] = []
        for i in 0..<articles {
            let id = UUID()
            ids.append(id)
            ops.append(server.op("article.save", entity: id, from: phone,
                                 payload: ["url": .text("https://example.com/\(i)"), "title": .text(sentence(12))]))
            ops.append(server.op("article.tag", entity: id, from: tablet, payload: ["tag": .text(Self.words[i % 7])]))
            ops.append(server.op("highlight.create", entity: UUID(), from: phone,
                                 payload: ["article_id": .text(id.lowercased), "quote": .text(sentence(25)), "note": .text(sentence(6))]))
            if i % 2 == 0 {
                ops.append(server.op("note.create", entity: UUID(), from: tablet,
                                     payload: ["article_id": .text(id.lowercased), "body": .text(sentence(40))]))
            }
            if i % 9 == 0 { ops.append(server.op("article.update", entity: ids[i / 2], from: tablet, payload: ["title": .text("Renamed " + sentence(5))])) }
            if i % 13 == 0 { ops.append(server.op("article.delete", entity: ids[i / 3], from: phone)) }
        }
        return stride(from: 0, to: ops.count, by: 500).map { Array(ops[$0..<min($0 + 500, ops.count)]) }
    }

    /// Every term of every row of `index`, as FTS5's vocabulary table lists it.
    func instances(_ index: String, in store: DeviceStore) throws -> [String] {
        try store.writer.withLock { db in
            try db.execute("DROP TABLE IF EXISTS temp.vocab")
            try db.execute("CREATE VIRTUAL TABLE temp.vocab USING fts5vocab(main, '\(index)', 'instance')")
            defer { try? db.execute("DROP TABLE temp.vocab") }
            return try db.query("SELECT term, doc, col, offset FROM temp.vocab") { "\($0.text(0)) \($0.int(1)) \($0.text(2)) \($0.int(3))" }
        }
    }

    func docsizes(_ index: String, in store: DeviceStore) throws -> [String] {
        try store.read { db in try db.query("SELECT id, hex(sz) FROM \"\(index)_docsize\" ORDER BY id") { "\($0.int(0)) \($0.text(1))" } }
    }

    func expectSameSearch(_ a: DeviceStore, _ b: DeviceStore) throws {
        for query in ["tunnel", "basement harbor", "\"copper orbit\"", "gla*", "ju*", "renamed", "quartzs", "tunnel OR nimbus"] {
            #expect(try a.search(query, limit: 50).map(\.id) == b.search(query, limit: 50).map(\.id), "\(query)")
        }
    }

    func scratchDirectory() throws -> URL {
        let url = Fixture.scratchRoot.appendingPathComponent("chronicle-scratch-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    @Test func indexesBuiltOnTwoThreadsEqualOnesKeptRowByRow() throws {
        let a = try Fixture(seed: 1), b = try Fixture(seed: 2, library: a.store.libraryID)
        let batches = library(ServerLog(library: a.store.libraryID), articles: 900)
        for batch in batches { try a.store.applyConfirmed(batch) }
        try b.store.applyConfirmedInBulk(batches)
        let text = try b.store.read { db in
            try db.scalarInt("SELECT sum(length(quote) + length(note)) FROM highlight_fts_content") ?? 0
        }
        #expect(text > Int64(DeviceStore.parallelSearchBuildMinBytes) / 2, "the worker must have work")

        #expect(try a.store.digest() == b.store.digest())
        #expect(try b.store.verify().passed)
        for (_, index) in b.store.projection.searchIndexes where !index.requiresPremium {
            #expect(try instances(index.index, in: a.store) == instances(index.index, in: b.store), "\(index.index)")
            #expect(try docsizes(index.index, in: a.store) == docsizes(index.index, in: b.store), "\(index.index)")
        }
        try expectSameSearch(a.store, b.store)

        // The copied indexes take row-by-row updates like any other, and rank as before.
        for store in [a.store, b.store] {
            let id = try store.write("article.save", payload: ["url": .text("https://example.com/z"), "title": .text("zanzibar tunnel")]).entityID
            try store.write("article.tag", entity: id, payload: ["tag": .text("zanzibar")])
        }
        #expect(try b.store.search("zanzibar").count == 1)
        #expect(try b.store.verify().passed)
        try expectSameSearch(a.store, b.store)
        let rankConfig = try b.store.read { db in try db.scalarText("SELECT v FROM article_fts_config WHERE k = 'rank'") }
        #expect(rankConfig?.hasPrefix("bm25(") == true)

        // A rebuild builds them the same way, and gives the same state.
        let before = try b.store.digest()
        try b.store.rebuild()
        #expect(try b.store.digest() == before)
        #expect(try b.store.verify().passed)
        for (_, index) in b.store.projection.searchIndexes where !index.requiresPremium {
            #expect(try instances(index.index, in: a.store) == instances(index.index, in: b.store), "\(index.index)")
        }
        try expectSameSearch(a.store, b.store)
    }

    @Test func theWritersOwnBuildStandsInForAWorkerThatFailsAndNoScratchFileStays() throws {
        let a = try Fixture(seed: 1), b = try Fixture(seed: 2, library: a.store.libraryID)
        let batches = library(ServerLog(library: a.store.libraryID), articles: 600)
        for batch in batches {
            try a.store.applyConfirmed(batch)
            try b.store.applyConfirmed(batch)
        }
        // A scratch directory that cannot be written: the worker builds nothing, the writer builds all.
        let missing = Fixture.scratchRoot.appendingPathComponent("chronicle-missing-\(UUID().uuidString)/nested")
        let none = try b.store.writeTransaction { db in try b.store.rebuildSearchIndexes(in: db, scratchDirectory: missing) }
        #expect(none.workerBuilt.isEmpty && none.streamed.isEmpty)
        #expect(try b.store.verify().passed)
        try expectSameSearch(a.store, b.store)

        // A worker that succeeds leaves no scratch database behind.
        let scratch = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: scratch) }
        let some = try b.store.writeTransaction { db in try b.store.rebuildSearchIndexes(in: db, scratchDirectory: scratch) }
        #expect(some.workerBuilt.isEmpty != Self.twoCores && some.streamed.isEmpty, "the worker must have built an index")
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.path).isEmpty)
        #expect(try b.store.verify().passed)
        try expectSameSearch(a.store, b.store)

        // Content the transaction has not changed (a bulk apply's close): the worker reads the
        // views through its own connection, the writer runs FTS5's rebuild.
        let committed = try b.store.writeTransaction { db in
            try b.store.rebuildSearchIndexes(in: db, scratchDirectory: scratch, contentCommitted: true, parallelMinStoreBytes: 0)
        }
        #expect(committed.workerBuilt.isEmpty != Self.twoCores, "\(committed)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.path).isEmpty)
        #expect(try b.store.verify().passed)
        try expectSameSearch(a.store, b.store)
        for (_, index) in b.store.projection.searchIndexes where !index.requiresPremium {
            #expect(try instances(index.index, in: a.store) == instances(index.index, in: b.store), "\(index.index)")
        }

        // Past the read-ahead budget, FTS5 builds the rest from the views on the writer.
        let few = try b.store.writeTransaction { db in
            try b.store.rebuildSearchIndexes(in: db, scratchDirectory: scratch, parallelMinBytes: 1, contentBytesMax: 100_000)
        }
        #expect(few.workerBuilt.isEmpty != Self.twoCores && !few.streamed.isEmpty, "\(few)")
        #expect(try b.store.verify().passed)
        try expectSameSearch(a.store, b.store)
    }

    @Test func onPremiumTheFullTextIsLeftToFTS5WhileTheWorkerBuildsTheRest() throws {
        let a = try Fixture(seed: 1), b = try Fixture(seed: 2, library: a.store.libraryID)
        let server = ServerLog(library: a.store.libraryID)
        var batches = library(server, articles: 300)
        let articles = batches.joined().filter { $0.type == "article.save" }.map(\.entityID)
        var extra = [server.op("library.plan", entity: a.store.libraryID, from: Op.serverDeviceID, payload: ["plan": .text("premium")])]
        for (i, id) in articles.enumerated() where i % 3 == 0 {
            extra.append(server.op("article.parsed", entity: id, from: Op.serverDeviceID,
                                   payload: ["text": .text("photosynthesis body \(i) " + Self.words.shuffled().joined(separator: " ")), "word_count": .integer(22)]))
        }
        batches.append(extra)
        for batch in batches {
            try a.store.applyConfirmed(batch)
            try b.store.applyConfirmed(batch)
        }
        let scratch = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: scratch) }
        let report = try b.store.writeTransaction { db in
            try b.store.rebuildSearchIndexes(in: db, scratchDirectory: scratch, parallelMinBytes: 1)
        }
        #expect(report.streamed == ["article_text_fts"])
        #expect(report.workerBuilt.isEmpty != Self.twoCores)
        #expect(try b.store.verify().passed)
        let fullText = try a.store.search("photosynthesis", limit: 500).map(\.id)
        #expect(fullText.count > 50, "premium full text is searchable")
        #expect(try b.store.search("photosynthesis", limit: 500).map(\.id) == fullText)
        try expectSameSearch(a.store, b.store)
        for (_, index) in b.store.projection.searchIndexes {
            #expect(try instances(index.index, in: a.store) == instances(index.index, in: b.store), "\(index.index)")
        }
    }

    @Test func aWriterThatFailsStopsTheWorkerAndLeavesTheIndexesAsTheyWere() throws {
        let a = try Fixture(seed: 1)
        let batches = library(ServerLog(library: a.store.libraryID), articles: 600)
        for batch in batches { try a.store.applyConfirmed(batch) }
        let hits = try a.store.search("tunnel", limit: 50).map(\.id)
        let scratch = try scratchDirectory()
        defer { try? FileManager.default.removeItem(at: scratch) }
        #expect(throws: SQLiteError.self) {
            try a.store.writeTransaction { db in
                try a.store.rebuildSearchIndexes(in: db, writerFirst: ["CREATE INDEX nowhere ON no_such_table(x)"], scratchDirectory: scratch)
            }
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.path).isEmpty)
        #expect(try a.store.verify().passed)
        #expect(try a.store.search("tunnel", limit: 50).map(\.id) == hits)
    }
}
