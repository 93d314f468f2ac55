import ChronicleCore
import ChronicleServer
@testable import ChronicleStore
@testable import ChronicleSync
import Foundation
import Testing
@testable import ChronicleServerStore

/// Server-side rules: free-tier caps enforced by triggers in the server's database,
/// the plan as server-only state, and client ops that try to set server-only fields.
@Suite struct ServerRulesTests {
    static func capped() -> ServiceLimits {
        var limits = ServiceLimits()
        limits.freeTierCaps = [FreeTierCap(entity: "article", maximum: 3), FreeTierCap(entity: "highlight", per: "article_id", maximum: 2)]
        return limits
    }

    /// The recipes schema of `OwnSchema`, with caps of its own.
    static func recipesWithCaps(_ caps: String) throws -> Schema {
        try Schema.load(json: try OwnSchema.v1.replacingOccurrences(of: #""version": 1,"#, with: #""version": 1, "caps": \#(caps),"#))
    }

    @Test("Caps a schema file declares hold on a server given no flag; the operator's cap for the same entity replaces one")
    func capsDeclaredInTheSchemaHold() async throws {
        let schema = try Self.recipesWithCaps(#"[ { "entity": "recipe", "maximum": 2 } ]"#)
        #expect(FreeTierCap.caps(of: schema, overriddenBy: []) == [FreeTierCap(entity: "recipe", maximum: 2)])
        let h = try SyncHarness(.http, schema: schema)
        let a = try h.device("A")
        for title in ["One", "Two", "Three: past the cap"] {
            try a.store.write("recipe.create", payload: ["title": .text(title)])
        }
        let report = await a.sync()
        #expect(report.rejected == 1)
        #expect(try a.store.notices().map(\.code) == ["free_tier_cap"])
        #expect(try a.store.notices().first?.message.contains("at most 2 recipes") == true)

        // An operator's cap for the same entity replaces the schema's; one for another entity adds to it.
        var limits = ServiceLimits()
        limits.freeTierCaps = [FreeTierCap(entity: "recipe", maximum: 3)]
        #expect(FreeTierCap.caps(of: schema, overriddenBy: limits.freeTierCaps) == [FreeTierCap(entity: "recipe", maximum: 3)])
        let other = FreeTierCap(entity: "photo", maximum: 9)
        #expect(FreeTierCap.caps(of: schema, overriddenBy: [other]) == [FreeTierCap(entity: "recipe", maximum: 2), other])
        let raised = try SyncHarness(.inMemory, limits: limits, schema: schema)
        let b = try raised.device("B")
        for title in ["One", "Two", "Three", "Four: past the cap"] {
            try b.store.write("recipe.create", payload: ["title": .text(title)])
        }
        #expect(await b.sync().rejected == 1)
        #expect(try b.store.notices().first?.message.contains("at most 3 recipes") == true)
    }

    @Test(arguments: TransportKind.allCases)
    func aFreeTierCapRefusesTheOpAndTheDeviceSaysWhatToDo(kind: TransportKind) async throws {
        let h = try SyncHarness(kind, limits: Self.capped())
        let a = try h.device("A")
        let b = try h.device("B")
        let first = try a.save("One")
        try a.save("Two")
        try a.save("Three")
        let fourth = try a.save("Four: past the cap")
        for quote in ["first", "second", "third: past the cap"] {
            try a.store.write("highlight.create", payload: ["article_id": .text(first.lowercased), "quote": .text(quote)])
        }
        let behind = try a.store.write("article.tag", entity: first, payload: ["tag": .text("kept")])
        let report = await a.sync()
        #expect(report.rejected == 2)
        let notices = try a.store.notices()
        #expect(notices.map(\.code) == ["free_tier_cap", "free_tier_cap"])
        #expect(notices.contains { $0.message.contains("at most 3 articles") && $0.message.contains("upgrade to premium") })
        #expect(notices.contains { $0.message.contains("at most 2 highlights per article") })
        #expect(try a.store.row(fourth) == nil, "the refused article is gone: the server's verdict is folded in")
        #expect(try a.tags(first) == ["kept"], "the op behind the refused ones went through")
        #expect(try h.library.allOps().contains { $0.opID == behind.opID })
        await b.sync()
        try h.expectConverged()

        // Premium lifts the caps: the same article can be saved now.
        try h.service.setPlan(library: h.user.libraryID, plan: "premium")
        await a.sync()
        let again = try a.save("Four, on premium")
        let premium = await a.sync()
        #expect(premium.rejected == 0 && premium.pushed == 1)
        #expect(try a.title(again) == "Four, on premium")
        await b.sync()
        try h.expectConverged()
    }

    /// `chronicle server compact`, `set-plan` and `verify` open the libraries of a server that
    /// may be running, with limits of their own: opening one dropped the caps the server had
    /// installed in its file, and the running server took every article past the cap.
    @Test func aToolBesideTheRunningServerLeavesItsCapsInPlace() async throws {
        let h = try SyncHarness(.inMemory, limits: Self.capped())
        let a = try h.device("A")
        try a.save("One")
        await a.sync()
        let tool = try SyncService(dataDirectory: h.directory + "/server", limits: .besideARunningServer, maintenance: .off)
        _ = try tool.compact(library: h.user.libraryID, policy: CompactionPolicy())
        #expect(try tool.library(h.user.libraryID).verify().passed)
        _ = try tool.setPlan(library: h.user.libraryID, plan: "free")
        for title in ["Two", "Three", "Four: past the cap"] { try a.save(title) }
        let report = await a.sync()
        #expect(report.rejected == 1 && report.pushed == 2, "the running server still enforces its cap: \(report)")
        #expect(try a.store.notices().map(\.code) == ["free_tier_cap"])
    }

    @Test func premiumTurnsOnFullTextSearchOnEveryDeviceAfterItsNextPull() async throws {
        let h = try SyncHarness(.inMemory)
        let a = try h.device("A")
        let article = try a.save("A long read")
        await a.sync()
        let library = try h.library
        try library.appendServerOp("article.parsed", entity: article, payload: ["text": .text("The body mentions a zeppelin exactly once.")])
        await a.sync()
        #expect(try a.store.search("zeppelin").isEmpty, "full text is premium-only")
        try h.service.setPlan(library: h.user.libraryID, plan: "premium")
        await a.sync()
        #expect(try a.store.search("zeppelin").map(\.id) == [article.lowercased])
        let b = try h.device("B")
        await b.sync()
        #expect(try b.store.search("zeppelin").map(\.id) == [article.lowercased])
        try h.service.setPlan(library: h.user.libraryID, plan: "free")
        await b.sync()
        #expect(try b.store.search("zeppelin").isEmpty)
        await a.sync()
        try h.expectConverged()
    }

    @Test func aClientOpSettingAServerOnlyFieldIsRejectedTerminally() async throws {
        let h = try SyncHarness(.inMemory)
        let a = try h.device("A")
        let article = try a.save("Mine")
        // A device cannot write it locally…
        #expect(throws: ChronicleError.self) { try a.store.write("library.plan", entity: a.store.libraryID, payload: ["plan": .text("premium")]) }
        // …and if an old or tampered client queues it anyway, the server refuses it and the queue moves on.
        try a.store.writer.withLock { db in
            try db.execute("""
                INSERT INTO chronicle_outbox(device_seq, op_id, type, version, entity_id, payload, device_time, base_seq)
                VALUES (2, ?1, 'library.plan', 1, ?2, '{"plan":"premium"}', 0, 0)
                """, [.text(UUID().lowercased), .text(a.store.libraryID.lowercased)])
        }
        let after = try a.store.write("article.tag", entity: article, payload: ["tag": .text("after")])
        let report = await a.sync()
        #expect(report.rejected == 1)
        #expect(try a.store.notices().map(\.code) == ["server_only_field"])
        #expect(try h.library.allOps().map(\.opID).contains(after.opID))
        try h.expectConverged()
    }

    /// The server looks up a push's op ids once for the whole batch, and keeps what it answers
    /// in the batch itself: a batch sent again gets each op's first answer (accepted →
    /// duplicate, refused → the same refusal, another device's op id → a conflict, again),
    /// and an op id repeated later in the same push is answered as a duplicate of the first.
    @Test("Op ids are looked up once a push: a batch sent again gets the first answers, and an id repeated within a push is a duplicate")
    func opIDsAreLookedUpOnceAPush() async throws {
        let h = try SyncHarness(.inMemory)
        let library = try h.library
        let (a, b) = (UUID(), UUID())
        func op(_ opID: UUID, by device: UUID, seq: Int64, url: String? = nil) -> Op {
            Op(opID: opID, libraryID: library.libraryID, deviceID: device, deviceSeq: seq, type: "article.save", version: 1,
               entityID: UUID(), payload: url.map { ["url": .text($0)] } ?? [:], deviceTime: 1_780_000_000_000, baseSeq: 0)
        }
        let othersOp = UUID()
        _ = try library.push([op(othersOp, by: b, seq: 1, url: "https://example.com/b")], from: b)
        let (accepted, refused, afterThem) = (UUID(), UUID(), UUID())
        let batch = [
            op(accepted, by: a, seq: 1, url: "https://example.com/1"),
            op(refused, by: a, seq: 2),                                  // no url: refused
            op(othersOp, by: a, seq: 3, url: "https://example.com/3"),   // device b's op id
            op(afterThem, by: a, seq: 4, url: "https://example.com/4"),
        ]
        let outcomes = try library.push(batch, from: a).results.map(\.outcome)
        #expect(outcomes[0] == .accepted(serverSeq: 2))
        guard case .rejected(let code, _) = outcomes[1] else { Issue.record("\(outcomes[1])"); return }
        #expect(code == "missing_field")
        #expect(outcomes[2] == .rejected(code: "op_id_conflict", message: "Op id \(othersOp.lowercased) already belongs to another device's op."))
        #expect(outcomes[3] == .accepted(serverSeq: 3))
        let again = try library.push(batch, from: a).results.map(\.outcome)
        #expect(again == [.duplicate(serverSeq: 2), outcomes[1], outcomes[2], .duplicate(serverSeq: 3)])
        // An op id twice in one push: the second is a duplicate of the first, logged once.
        let twice = UUID()
        let repeated = try library.push([op(twice, by: a, seq: 5, url: "https://example.com/5"),
                                         op(twice, by: a, seq: 6, url: "https://example.com/5")], from: a)
        #expect(repeated.results.map(\.outcome) == [.accepted(serverSeq: 4), .duplicate(serverSeq: 4)])
        #expect(try library.allOps().map(\.opID) == [othersOp, accepted, afterThem, twice])
    }

    /// A device's ops the server already answered, sent again under the numbers after the
    /// server's last for that device: the device's store is a copy from before its queue was
    /// numbered again (restored from a backup), which numbered its later ops after them. Each
    /// repeat gets its first answer and takes its number, so the new op behind them is taken;
    /// before, they were answered without taking it, and the new op was refused as a gap, push
    /// after push (simulator seed 13692 of 400 steps). A repeat under a number the server has
    /// passed (a batch sent again) takes nothing.
    @Test("Repeats under the next numbers take them, and the new op behind them is taken")
    func repeatsUnderTheNextNumbersTakeThem() async throws {
        let h = try SyncHarness(.inMemory)
        let library = try h.library
        let a = UUID()
        func op(_ opID: UUID, seq: Int64, url: String? = nil) -> Op {
            Op(opID: opID, libraryID: library.libraryID, deviceID: a, deviceSeq: seq, type: "article.save", version: 1,
               entityID: UUID(), payload: url.map { ["url": .text($0)] } ?? [:], deviceTime: 1_780_000_000_000, baseSeq: 0)
        }
        let (accepted, refused, new) = (UUID(), UUID(), UUID())
        let first = try library.push([op(accepted, seq: 1, url: "https://example.com/1"), op(refused, seq: 2)], from: a)
        #expect(first.results[0].outcome == .accepted(serverSeq: 1))
        guard case .rejected = first.results[1].outcome else { Issue.record("\(first.results[1].outcome)"); return }
        // The older copy holds them queued as #3 and #4, and a new op as #5.
        let copy = try library.push([op(refused, seq: 3), op(accepted, seq: 4, url: "https://example.com/1"),
                                     op(new, seq: 5, url: "https://example.com/5")], from: a)
        #expect(copy.results[0].outcome == first.results[1].outcome)
        #expect(copy.results[1].outcome == .duplicate(serverSeq: 1))
        #expect(copy.results[2].outcome == .accepted(serverSeq: 2))
        #expect(try library.allOps().map(\.opID) == [accepted, new])
        // Sent again, the same batch takes nothing more; a new op must follow #5.
        let again = try library.push([op(refused, seq: 3), op(accepted, seq: 4, url: "https://example.com/1"),
                                      op(new, seq: 5, url: "https://example.com/5")], from: a)
        #expect(again.results.map(\.outcome) == [first.results[1].outcome, .duplicate(serverSeq: 1), .duplicate(serverSeq: 2)])
        #expect(throws: ProtocolError.self) { try library.push([op(UUID(), seq: 7, url: "https://example.com/7")], from: a) }
        #expect(try library.push([op(UUID(), seq: 6, url: "https://example.com/6")], from: a).results.first?.outcome == .accepted(serverSeq: 3))
    }
}
