import ChronicleCore
import ChronicleServer
@testable import ChronicleStore
@testable import ChronicleSync
import Foundation
import Testing
import ChronicleTesting

/// Stores from every earlier version (fixtures made by that version's own code) open
/// in this one: migrated step by step, safe to interrupt, and they sync with a current
/// server, their old-format outbox arriving upcast and correct.
@Suite struct MigrationTests {
    /// The digest each fixture has once migrated to this build's versions. Recorded when a
    /// version ships (`CHRONICLE_RECORD_FIXTURE_DIGESTS=1` rewrites the file) and then kept:
    /// a change here means a migration changed what an old store turns into.
    static let expectedURL = StoreFixture.root.appendingPathComponent("expected-digests.json")

    static func expected() -> [String: String] {
        guard let data = FileManager.default.contents(atPath: expectedURL.path),
              let json = try? JSONSerialization.jsonObject(with: data) as? [String: String] else { return [:] }
        return json
    }

    static let recorded = Locked<[String: String]>([:])

    func scratch() throws -> String {
        let root = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm" : NSTemporaryDirectory()
        let directory = "\(root)/chronicle-fixture-\(UUID().lowercased)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        return directory
    }

    @Test func thereIsAFixtureForEveryEarlierVersion() {
        let fixtures = StoreFixture.all
        let readItLater = Set(fixtures.filter { $0.schema == "readitlater" }.map(\.schemaVersion))
        #expect(readItLater.isSuperset(of: Set(1..<Schema.readItLater.version)), "a fixture per earlier read-it-later schema version")
        let formats = Set(fixtures.map(\.formatVersion))
        #expect(formats.contains(Int(StoreFormat.currentVersion)) || !formats.isEmpty)
    }

    @Test(arguments: StoreFixture.all)
    func aFixtureMigratesAndKeepsEverything(fixture: StoreFixture) throws {
        let directory = try scratch()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/store.chronicle"
        try fixture.load(into: path)
        let plan = try DeviceStore.migrationPlan(at: path)
        #expect(plan.fromFormat == Int64(fixture.formatVersion))
        let store = try DeviceStore.open(at: path)
        try store.performUpkeep()
        let status = try store.status()
        #expect(status.formatVersion == StoreFormat.currentVersion)
        #expect(try store.verify().passed, "\(fixture.name): the migrated projection equals a replay of its log")
        #expect(try store.recreateRedefinedSearchIndexes() == [], "\(fixture.name): its search indexes are defined as this build defines them")
        #expect(status.confirmedOps == Int64(fixture.confirmed) && status.unsentOps == Int64(fixture.pending), "\(fixture.name): nothing lost")
        #expect(status.cursor == Int64(fixture.meta["cursor"] ?? "") ?? -1)
        #expect(try store.unreadableOps().isEmpty, "every op of every earlier version reads")
        if fixture.schemaVersion == store.schema.version && fixture.meta["made_by_commit"] == nil {
            #expect(try store.digest() == fixture.digest, "\(fixture.name): same schema, same state")
        }
        let digest = try store.digest()
        if ProcessInfo.processInfo.environment["CHRONICLE_RECORD_FIXTURE_DIGESTS"] == "1" {
            Self.recorded.withLock { $0[fixture.name] = digest }
            var all = Self.expected()
            for (key, value) in Self.recorded.withLock({ $0 }) { all[key] = value }
            let data = try JSONSerialization.data(withJSONObject: all, options: [.prettyPrinted, .sortedKeys])
            try data.write(to: Self.expectedURL)
        } else {
            let expected = try #require(Self.expected()[fixture.name], "no expected digest recorded for \(fixture.name)")
            #expect(digest == expected, "\(fixture.name) migrates to the recorded state")
        }
    }

    /// Format v5 keeps the ids of sealed ops as 16 bytes (v9 with every confirmed op's): a v4
    /// store's ids (text) come across one for one, and each still keeps its op from applying twice.
    @Test func aSealedV4StoreKeepsEverySealedOpIdAsItsBytes() throws {
        let fixture = try #require(StoreFixture.all.first { $0.name == "readitlater-v3-format-v4-sealed" })
        let directory = try scratch()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/store.chronicle"
        try fixture.load(into: path)
        let before = try Database(path: path).query("SELECT op_id, server_seq FROM chronicle_sealed_ops ORDER BY server_seq") {
            ($0.text(0).replacingOccurrences(of: "-", with: ""), $0.int(1))
        }
        #expect(before.count == Int(fixture.meta["sealed_ops"] ?? "") ?? -1 && before.count > 0)

        let store = try DeviceStore.open(at: path)

        try store.performUpkeep()
        let after = try store.read { db in
            try db.query("SELECT lower(hex(op_id)), server_seq, typeof(op_id) FROM chronicle_op_ids WHERE server_seq <= ?1 ORDER BY server_seq",
                         [.integer(Int64(before.count))]) {
                ($0.text(0), $0.int(1), $0.text(2))
            }
        }
        #expect(after.map(\.0) == before.map(\.0) && after.map(\.1) == before.map(\.1))
        #expect(after.allSatisfy { $0.2 == "blob" })
        #expect(try store.read { db in try db.scalarInt("SELECT count(*) FROM sqlite_schema WHERE name = 'chronicle_sealed_ops'") } == 0)
        #expect(try store.verify().passed)

        // A sealed op arriving again (at the next seq) is refused as a duplicate; the store is unchanged.
        let digest = try store.digest()
        var again = try #require(try store.confirmedOps(limit: 1).first)
        #expect(before.contains { $0.0 == again.opID.lowercased.replacingOccurrences(of: "-", with: "") })
        again.serverSeq = try store.cursor() + 1
        let refused = #expect(throws: ChronicleError.self) { try store.applyConfirmed([again]) }
        #expect(refused?.code == .duplicateOp)
        #expect(try store.digest() == digest)
        // Only ids in their 16-byte form go in.
        #expect(throws: SQLiteError.self) {
            try store.writeTransaction { db in try db.execute("INSERT INTO chronicle_op_ids(op_id, server_seq) VALUES (?1, 1000)", [.text(UUID().lowercased)]) }
        }
    }

    @Test(arguments: StoreFixture.all.filter { $0.formatVersion < Int(StoreFormat.currentVersion) || $0.schemaVersion < Schema.readItLater.version })
    func aMigrationKilledAfterAnyStepCarriesOnWithNothingLost(fixture: StoreFixture) throws {
        struct Stop: Error {}
        let directory = try scratch()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let reference = directory + "/reference.chronicle"
        try fixture.load(into: reference)
        try DeviceStore.migrate(at: reference)
        let final = try DeviceStore.open(at: reference).digest()   // `migrate` did its upkeep
        let steps = try { () throws -> Int in
            let probe = directory + "/probe.chronicle"
            try fixture.load(into: probe)
            return try DeviceStore.migrationPlan(at: probe).steps.count
        }()
        #expect(steps >= 1)
        for stop in 1...steps {
            let path = directory + "/stop-\(stop).chronicle"
            try fixture.load(into: path)
            do {
                try DeviceStore.migrate(at: path) { step, _ in if step == stop { throw Stop() } }
            } catch is Stop {}
            let store = try DeviceStore.open(at: path)
            try store.performUpkeep()
            #expect(try store.digest() == final, "\(fixture.name): stopped after step \(stop)")
            #expect(try store.verify().passed)
            #expect(try store.pendingOps().count == fixture.pending)
        }
    }

    @Test(arguments: StoreFixture.all.filter { $0.schema == "readitlater" || $0.schema == "fieldservice" })
    func aMigratedStoreSyncsWithACurrentServerAndItsOldOutboxArrivesUpcast(fixture: StoreFixture) async throws {
        let directory = try scratch()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/store.chronicle"
        try fixture.load(into: path)
        let store = try DeviceStore.open(at: path)
        try store.performUpkeep()
        let schema = store.schema
        // A current server that holds the same confirmed history the fixture's device had pulled.
        let service = try SyncService(dataDirectory: directory + "/server")
        let user = try service.accounts.addUser("ada", password: "correct horse", schema: schema, libraryID: store.libraryID)
        try service.library(user.libraryID).importConfirmed(try store.confirmedOps(limit: 1_000_000))
        let (token, _) = try service.accounts.registerDevice(user: "ada", password: "correct horse", deviceID: store.deviceID)
        let queued = try store.pendingOps()
        #expect(!queued.isEmpty)
        let engine = SyncEngine(store: store, transport: InMemoryTransport(endpoint: service, library: store.libraryID, token: token))
        let report = await engine.syncOnce()
        #expect(report.outcome == .synced)
        let notices = try store.notices().map { "\($0.op.typeAndVersion): \($0.message)" }
        #expect(report.rejected == 0, "\(fixture.name): \(notices)")
        #expect(report.pushed == queued.count)
        #expect(try store.pendingOps().isEmpty)
        let library = try service.library(user.libraryID)
        #expect(try store.digest() == library.digest(), "\(fixture.name): the device converges with the server")
        // The server logged the old ops exactly as written; every reader upcasts them.
        let logged = Dictionary(uniqueKeysWithValues: try library.allOps().map { ($0.opID, $0) })
        for op in queued { #expect(logged[op.opID]?.typeAndVersion == op.typeAndVersion) }
    }
}

/// Ops from the future: refused by the server with a clear code, set aside (never lost,
/// never blocking) by a device that receives one it cannot read.
@Suite struct FutureOpTests {
    @Test func aFutureOpVersionIsRejectedAloneByTheServer() async throws {
        let h = try SyncHarness(.inMemory)
        let a = try h.device("A")
        let before = try a.save("Before")
        try a.store.writer.withLock { db in
            try db.execute("""
                INSERT INTO chronicle_outbox(device_seq, op_id, type, version, entity_id, payload, device_time, base_seq)
                VALUES (2, ?1, 'article.update', 9, ?2, '{"title":"from the future"}', 0, 0)
                """, [.text(UUID().lowercased), .text(before.lowercased)])
        }
        let after = try a.save("After")
        let report = await a.sync()
        #expect(report.rejected == 1 && report.pushed == 2)
        #expect(try a.store.notices().map(\.code) == ["future_op_version"])
        #expect(try a.title(after) == "After")
        try h.expectConverged()
    }

    @Test func aDeviceSetsAsideAConfirmedOpItCannotReadAndAppliesTheRest() async throws {
        let h = try SyncHarness(.inMemory)
        let a = try h.device("A")
        let article = try a.save("Kept")
        var future = try a.store.pendingOps()[0]
        await a.sync()
        future.opID = UUID()
        future.deviceID = UUID()
        future.deviceSeq = 1
        future.type = "article.summarize"
        future.version = 1
        future.serverSeq = 2
        future.serverTime = 1
        var next = future
        next.opID = UUID()
        next.deviceSeq = 2
        next.type = "article.tag"
        next.payload = ["tag": .text("after-the-unknown-op")]
        next.serverSeq = 3
        try a.store.applyConfirmed([future, next])
        #expect(try a.store.unreadableOps().map(\.code) == ["unknown_op_type"])
        #expect(try a.tags(article) == ["after-the-unknown-op"])
        #expect(try a.store.verify().passed)
        #expect(try a.store.audit(article).entries.contains { $0.effects.contains { $0.detail.contains("set aside") } })
    }
}
