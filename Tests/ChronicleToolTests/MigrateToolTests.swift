import ChronicleCore
@testable import ChronicleStore
import ChronicleTesting
import Foundation
import Testing

/// `chronicle migrate` on a store made by the first version (format v1, schema v1).
@Suite(.serialized) struct MigrateToolTests {
    static let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/readitlater-v1-format-v1/store.sql")

    func load(_ t: Tool, as name: String) throws -> String {
        let path = t.directory.appendingPathComponent(name).path
        #expect(try ChildProcess.run("/usr/bin/sqlite3", [path], stdin: .file(Self.fixture.path)).status == 0)
        return path
    }

    @Test func dryRunThenStepsKilledOneByOneThenDone() throws {
        let t = try Tool()
        let path = try load(t, as: "old.chronicle")
        let dry = try Tool.exec(Tool.binary, ["migrate", "--dry-run"], environment: ["CHRONICLE_STORE": path])
        #expect(dry.status == 0)
        #expect(dry.stdout.contains("1. back up the store to \(path).backup-v1"))
        #expect(dry.stdout.contains("store format v1 → v2") && dry.stdout.contains("store format v2 → v3") && dry.stdout.contains("store format v3 → v4"))
        #expect(dry.stdout.contains("schema readitlater v1 → v3: rebuild the projection from the log"))
        #expect(dry.stdout.contains("(dry run: nothing was changed)"))
        #expect(!FileManager.default.fileExists(atPath: path + ".backup-v1"))

        for step in 1...4 {
            let copy = try load(t, as: "killed-\(step).chronicle")
            let killed = try Tool.exec(Tool.binary, ["migrate"], environment: ["CHRONICLE_STORE": copy, "CHRONICLE_MIGRATE_STOP_AFTER_STEP": String(step)])
            #expect(killed.status == 137, "step \(step)")
            let finished = try Tool.exec(Tool.binary, ["migrate"], environment: ["CHRONICLE_STORE": copy])
            #expect(finished.status == 0, "\(finished.stderr)")
            let verify = try Tool.exec(Tool.binary, ["verify"], environment: ["CHRONICLE_STORE": copy])
            #expect(verify.status == 0, "killed after step \(step): \(verify.stdout)")
            #expect(try DeviceStore.open(at: copy).pendingOps().count == 26)
        }

        let run = try Tool.exec(Tool.binary, ["migrate"], environment: ["CHRONICLE_STORE": path])
        #expect(run.status == 0 && run.stdout.hasPrefix("Migrated \(path):"))
        #expect(FileManager.default.fileExists(atPath: path + ".backup-v1"))
        let again = try Tool.exec(Tool.binary, ["migrate"], environment: ["CHRONICLE_STORE": path])
        #expect(again.stdout.contains("Nothing to do"))
        // The old outbox is still there, in its old formats, and reads through upcasters.
        let log = try Tool.exec(Tool.binary, ["log", "--json"], environment: ["CHRONICLE_STORE": path])
        #expect(log.stdout.contains("\"type\":\"collection.add\"") && log.stdout.contains("\"byline\""))
    }

    @Test func aStoreFromAFutureVersionIsRefusedByMigrateAndLeftAlone() throws {
        let t = try Tool()
        let path = try load(t, as: "future.chronicle")
        let future = StoreFormat.currentVersion + 1
        _ = try Tool.exec(URL(fileURLWithPath: "/usr/bin/sqlite3"), [path, "UPDATE chronicle_meta SET value = \(future) WHERE key = 'format_version'"])
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        let refused = try Tool.exec(Tool.binary, ["migrate"], environment: ["CHRONICLE_STORE": path])
        #expect(refused.status == 4)
        #expect(refused.stderr.contains("v\(future)") && refused.stderr.contains("v\(StoreFormat.currentVersion)") && refused.stderr.contains("future_store_version"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
    }
}
