import ChronicleCore
@testable import ChronicleStore
import Foundation
import Testing

/// Pending local ops stay on top of confirmed ops until the server settles them.
@Suite struct RebaseTests {
    let phone = UUID(uuidString: "00000000-0000-4000-8000-0000000000b1")!

    @Test func rowWithQueuedEditKeepsShowingItUntilTheServerSettlesIt() throws {
        let f = try Fixture()
        let server = ServerLog(library: f.store.libraryID)
        let article = try f.store.write("article.save", payload: ["url": .text("https://example.com/x"), "title": .text("Draft")])
        try f.store.applyConfirmed([server.confirm(article)])

        // Offline: this device renames it. Meanwhile the phone renames it too, and the server orders the phone first.
        let mine = try f.store.write("article.update", entity: article.entityID, payload: ["title": .text("Mine")])
        try f.store.applyConfirmed([server.op("article.update", entity: article.entityID, from: phone, payload: ["title": .text("Phone's")])])
        #expect(try f.field(article.entityID, "title") == .text("Mine"), "the queued local edit still shows")
        #expect(try f.store.row(article.entityID)?.pending == true)

        // The server confirms my edit after the phone's: by server order, mine wins.
        let result = try f.store.applyConfirmed([server.confirm(mine)])
        #expect(result.confirmedOwn == 1)
        #expect(try f.field(article.entityID, "title") == .text("Mine"))
        #expect(try f.store.row(article.entityID)?.pending == false)
        #expect(try f.store.status().unsentOps == 0)
        #expect(try f.store.digest() == f.store.replayDigest())
    }

    @Test func laterRemoteEditWinsOnceMineIsConfirmedEarlier() throws {
        let f = try Fixture()
        let server = ServerLog(library: f.store.libraryID)
        let article = try f.store.write("article.save", payload: ["url": .text("https://example.com/x")])
        let mine = try f.store.write("article.update", entity: article.entityID, payload: ["title": .text("Mine")])
        try f.store.applyConfirmed([server.confirm(article), server.confirm(mine),
                                    server.op("article.update", entity: article.entityID, from: phone, payload: ["title": .text("Phone's")])])
        #expect(try f.field(article.entityID, "title") == .text("Phone's"))
    }

    @Test func rebaseKeepsTagsAndDeletesOnTop() throws {
        let f = try Fixture()
        let server = ServerLog(library: f.store.libraryID)
        let article = try f.store.write("article.save", payload: ["url": .text("https://example.com/x")])
        try f.store.applyConfirmed([server.confirm(article)])
        try f.store.write("article.tag", entity: article.entityID, payload: ["tag": .text("mine")])
        try f.store.applyConfirmed([server.op("article.tag", entity: article.entityID, from: phone, payload: ["tag": .text("phone")])])
        #expect(try f.tags(article.entityID) == ["mine", "phone"])
        try f.store.write("article.delete", entity: article.entityID)
        try f.store.applyConfirmed([server.op("article.update", entity: article.entityID, from: phone, payload: ["title": .text("T")])])
        #expect(try f.field(article.entityID, "deleted_at")?.isNull == false, "the queued delete still shows")
        #expect(try f.field(article.entityID, "title") == .text("T"), "the remote title is folded in underneath")
        #expect(try f.store.search("T").isEmpty, "deleted rows are not found")
    }

    @Test func batchThatDoesNotTouchPendingRowsReplaysNothing() throws {
        let f = try Fixture()
        let server = ServerLog(library: f.store.libraryID)
        let a = try f.store.write("article.save", payload: ["url": .text("https://example.com/a")])
        let result = try f.store.applyConfirmed([server.op("article.save", entity: UUID(), from: phone, payload: ["url": .text("https://example.com/b")])])
        #expect(result.rebased == 0)
        #expect(try f.store.row(a.entityID)?.pending == true)
    }

    @Test func forwardOnlyProgressFromAStaleDeviceIsIgnored() throws {
        let f = try Fixture()
        let server = ServerLog(library: f.store.libraryID)
        let tablet = UUID(uuidString: "00000000-0000-4000-8000-0000000000c1")!
        let article = try f.store.write("article.save", payload: ["url": .text("https://example.com/x")])
        try f.store.applyConfirmed([server.confirm(article)])
        let t0: Int64 = 1_800_000_000_000
        try f.store.applyConfirmed([
            server.op("article.progress", entity: article.entityID, from: phone, payload: ["progress": .real(0.8)], deviceTime: t0),
            // A tablet whose clock is far ahead still cannot move progress back.
            server.op("article.progress", entity: article.entityID, from: tablet, payload: ["progress": .real(0.45)], deviceTime: t0 + 86_400_000),
        ])
        #expect(try f.field(article.entityID, "progress") == .real(0.8))
        // The phone re-reads inside five minutes by its own clock: allowed to go back.
        try f.store.applyConfirmed([server.op("article.progress", entity: article.entityID, from: phone, payload: ["progress": .real(0.3)], deviceTime: t0 + 60_000)])
        #expect(try f.field(article.entityID, "progress") == .real(0.3))
        // Ten minutes later by its clock, a lower value from the phone is ignored again.
        try f.store.applyConfirmed([server.op("article.progress", entity: article.entityID, from: phone, payload: ["progress": .real(0.1)], deviceTime: t0 + 660_000)])
        #expect(try f.field(article.entityID, "progress") == .real(0.3))

        let audit = try f.store.audit(article.entityID)
        let tabletEntry = try #require(audit.entries.first { $0.op.deviceID == tablet })
        #expect(tabletEntry.effects.first?.outcome == .ignored)
        #expect(tabletEntry.effects.first?.detail.contains("forward-only, current 0.8") == true)
    }
}
