import ChronicleCore
import ChronicleServer
@testable import ChronicleStore
@testable import ChronicleSync
import Foundation
import Testing

/// Server-side rules: free-tier caps enforced by triggers in the server's database,
/// the plan as server-only state, and client ops that try to set server-only fields.
@Suite struct ServerRulesTests {
    static func capped() -> ServiceLimits {
        var limits = ServiceLimits()
        limits.freeTierCaps = [FreeTierCap(entity: "article", maximum: 3), FreeTierCap(entity: "highlight", per: "article_id", maximum: 2)]
        return limits
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
}
