import ChronicleCore
import ChronicleStore
import Foundation
import Testing

/// `chronicle` on a damaged store: a stable code and exit 4, `verify` says so, and `salvage`
/// puts a whole store back in its place.
@Suite struct SalvageToolTests {
    @Test func aDamagedStoreIsNamedSoVerifiedAndSalvaged() throws {
        let t = try Tool()
        do {
            let store = try DeviceStore.create(at: t.store, schema: .readItLater, libraryID: UUID(), deviceID: UUID())
            for i in 0..<300 {
                _ = try store.write("article.save", payload: ["url": .text("https://example.org/\(i)"), "title": .text("Article number \(i) about tunnels")])
            }
        }
        try t.breakRootPage(of: "article")

        let listed = try t.run("list")
        #expect(listed.status == 4)
        #expect(listed.stderr.contains("[store_damaged]") && listed.stderr.contains("chronicle salvage"), "\(listed.stderr)")
        let verified = try t.run("verify")
        #expect(verified.status == 1)
        #expect(verified.stdout.contains("FAIL the store can be read"), "\(verified.stdout)")

        let before = try Data(contentsOf: URL(fileURLWithPath: t.store))
        let dry = try t.run("salvage", "--dry-run")
        #expect(dry.status == 0, "\(dry.stderr)")
        #expect(dry.stdout.contains("all 300 kept") && dry.stdout.contains("dry run: nothing was changed"), "\(dry.stdout)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: t.store)) == before)
        #expect(try t.run("list").status == 4, "still the damaged store")

        let salvaged = try t.run("salvage", "--json")
        #expect(salvaged.status == 0, "\(salvaged.stderr)")
        let report = try salvaged.object()
        #expect(report["lost_nothing"] as? Bool == true)
        #expect(report["pending_kept"] as? Int == 300)
        let aside = try #require(report["damaged_path"] as? String)
        #expect(FileManager.default.fileExists(atPath: aside))
        #expect(try t.run("verify").status == 0)
        let articles = try #require(try t.run("list", "--limit", "1000", "--json").json() as? [Any])
        #expect(articles.count == 300)
        #expect(try t.run("salvage", "--help").stdout.contains("damaged"))
    }
}
