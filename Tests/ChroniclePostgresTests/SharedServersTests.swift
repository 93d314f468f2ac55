import ChronicleArticles
import ChronicleCore
import ChroniclePostgres
import ChronicleServer
import ChronicleStore
import ChronicleSync
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing

/// Two sync servers over real loopback HTTP, each with a directory of its own (its replicas),
/// sharing one PostgreSQL database (the order, users and devices), as on two machines: devices
/// syncing through either end with one history and one sign-in.
@Suite("Servers sharing PostgreSQL", .serialized)
struct SharedServersTests {
    final class Pair: @unchecked Sendable {
        let database: TestDatabase
        let servers: [SyncServer]
        let user: UserRecord
        let password = "correct horse battery staple"

        /// `extensions`: what each server is handed, made anew for each (an extension serves one server).
        init(maintenance: MaintenancePolicy = MaintenancePolicy(), extensions: () -> [any ServerExtension] = { [] }) throws {
            let database = try TestDatabase()
            self.database = database
            servers = try ["one", "two"].map { name in
                try SyncServer(dataDirectory: database.directory + "/\(name)", maintenance: maintenance, shared: try database.server(name),
                               accounts: Accounts(storage: try PostgresAccountsStorage(conninfo: database.conninfo)), extensions: extensions())
            }
            user = try servers[0].service.accounts.addUser("ada", password: password, schema: .readItLater)
        }

        deinit { for server in servers { server.stop() } }

        /// A device signed in through server `index`, syncing with it.
        func device(_ index: Int) throws -> (store: DeviceStore, transport: HTTPTransport, engine: SyncEngine) {
            let store = try DeviceStore.create(at: database.directory + "/device-\(UUID().lowercased).chronicle", schema: .readItLater,
                                               libraryID: user.libraryID, deviceID: UUID())
            let (token, _) = try servers[index].service.accounts.registerDevice(user: "ada", password: password, deviceID: store.deviceID)
            let transport = HTTPTransport(baseURL: servers[index].url, library: user.libraryID, token: token, requestTimeoutSeconds: 30)
            var configuration = SyncEngine.Configuration()
            configuration.backoffBaseMilliseconds = 5
            configuration.backoffMaxMilliseconds = 50
            return (store, transport, SyncEngine(store: store, transport: transport, configuration: configuration, random: { 0.5 }))
        }
    }

    /// Both servers compact their replicas on their own (every 20 ms, segments of 40 ops) while
    /// devices push through both: PostgreSQL is sealed as they go, under the same row lock as the
    /// pushes, and ends whole, gap-free and in one history with every replica and device.
    @Test func serversSealPostgreSQLWhileDevicesPushThroughBoth() async throws {
        var maintenance = MaintenancePolicy()
        maintenance.compaction?.keepOps = 20
        maintenance.compaction?.segmentOpsMax = 40
        maintenance.compaction?.snapshotEveryOps = 200
        maintenance.checkIntervalSeconds = 0.02
        let pair = try Pair(maintenance: maintenance)
        let devices = try [pair.device(0), pair.device(1), pair.device(0), pair.device(1)]
        for round in 0..<12 {
            for (index, device) in devices.enumerated() {
                for op in 0..<10 {
                    _ = try device.store.write("article.save", payload: ["url": .text("https://example.com/\(index)/\(round)/\(op)")])
                }
            }
            async let one = devices[0].engine.syncOnce()
            async let two = devices[1].engine.syncOnce()
            async let three = devices[2].engine.syncOnce()
            async let four = devices[3].engine.syncOnce()
            let outcomes = await [one.outcome, two.outcome, three.outcome, four.outcome]
            #expect(outcomes.allSatisfy { $0 == .synced }, "\(outcomes)")
        }
        let total: Int64 = 12 * 4 * 10
        let check = try pair.database.server("check")
        let pg = try pair.database.connection()
        var sealed: Int64 = 0
        let deadline = Date().addingTimeInterval(20)
        while sealed < total - 20 - 39, Date() < deadline {
            sealed = try pg.execute("SELECT sealed_through FROM chronicle_libraries").int(0, 0)
            try await Task.sleep(nanoseconds: 20_000_000)
        }
        #expect(sealed >= total - 20 - 39 && sealed % 40 == 0, "sealed through \(sealed) of \(total)")
        #expect(try pg.execute("SELECT count(*) FROM chronicle_log").int(0, 0) == total - sealed)
        let failed = try check.checks(of: pair.user.libraryID).filter { !$0.passed }
        #expect(failed.isEmpty, "\(failed)")
        for device in devices { _ = await device.engine.syncOnce() }
        let replicas = try pair.servers.map { try $0.service.library(pair.user.libraryID) } + [try check.library(pair.user.libraryID)]
        for replica in replicas { try replica.catchUp() }
        let digest = try replicas[0].digest()
        for replica in replicas { #expect(try replica.digest() == digest) }
        for device in devices { #expect(try device.store.digest() == digest) }
        let ops = try replicas[2].allOps()
        #expect(ops.count == Int(total) && Set(ops.map(\.opID)).count == ops.count)
    }

    @Test func devicesOnEitherServerConvergeOnOneHistory() async throws {
        let pair = try Pair()
        let a = try pair.device(0), b = try pair.device(1), c = try pair.device(1)
        // Offline on every device: saves, tags, edits of the same rows, then everyone syncs, twice.
        let shared = try a.store.write("article.save", payload: ["url": .text("https://example.com/shared"), "title": .text("first")]).entityID
        #expect(await a.engine.syncOnce().outcome == .synced)
        #expect(await b.engine.syncOnce().outcome == .synced)
        for round in 0..<30 {
            let article = try a.store.write("article.save", payload: ["url": .text("https://example.com/a/\(round)")]).entityID
            _ = try a.store.write("article.tag", entity: article, payload: ["tag": .text("a")])
            _ = try b.store.write("article.update", entity: shared, payload: ["title": .text("b \(round)")])
            _ = try c.store.write("article.save", payload: ["url": .text("https://example.com/c/\(round)")])
        }
        for _ in 0..<2 {
            async let one = a.engine.syncOnce()
            async let two = b.engine.syncOnce()
            async let three = c.engine.syncOnce()
            let outcomes = await [one.outcome, two.outcome, three.outcome]
            #expect(outcomes.allSatisfy { $0 == .synced }, "\(outcomes)")
        }
        let replicas = try pair.servers.map { try $0.service.library(pair.user.libraryID) }
        for replica in replicas { try replica.catchUp() }
        let digest = try replicas[0].digest()
        #expect(try replicas[1].digest() == digest)
        for device in [a, b, c] {
            #expect(try device.store.digest() == digest)
            #expect(try device.store.pendingOps().isEmpty)
        }
        let ops = try replicas[1].allOps()
        #expect(ops.count == 1 + 30 * 4)
        #expect(Set(ops.map(\.opID)).count == ops.count, "each op once")
        #expect(ops.enumerated().allSatisfy { $0.element.serverSeq == Int64($0.offset + 1) }, "gap-free")
        #expect(try pair.database.server("check").head(pair.user.libraryID) == Int64(ops.count))
        #expect(try b.store.row(shared)?["title"]?.textValue == "b 29")
    }

    @Test func aPullParkedOnOneServerIsAnsweredByAPushThroughTheOther() async throws {
        let pair = try Pair()
        let a = try pair.device(0), b = try pair.device(1)
        #expect(await b.engine.syncOnce().outcome == .synced)
        let waited = 20_000
        let start = DispatchTime.now().uptimeNanoseconds
        async let parked = b.transport.pull(after: 0, limit: 100, waitMilliseconds: waited)
        try await Task.sleep(nanoseconds: 300_000_000)   // parked on server two by now
        let id = try a.store.write("article.save", payload: ["url": .text("https://example.com/news")]).entityID
        #expect(await a.engine.syncOnce().outcome == .synced)
        let page = try await parked
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        #expect(page.segment.ops.map(\.entityID) == [id])
        // Answered by the push, not by the end of its wait (which would also hold the op).
        #expect(seconds < Double(waited) / 1000 / 2, "answered after \(seconds) s")

        // Server two's /metrics: the notification it got, the catch-up it made, its listener up.
        let (body, _) = try await URLSession.shared.data(from: pair.servers[1].url.appendingPathComponent("metrics"))
        let metrics = String(decoding: body, as: UTF8.self)
        func value(_ name: String) -> Double? {
            metrics.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Double($0.split(separator: " ").last!) }
        }
        #expect((value("chronicle_postgres_notifications_total") ?? 0) >= 1, "\(metrics)")
        #expect((value("chronicle_postgres_catchups_total") ?? 0) >= 1 && (value("chronicle_postgres_ops_caught_up_total") ?? 0) >= 1)
        #expect(value("chronicle_postgres_listening") == 1 && value("chronicle_postgres_unavailable_total") == 0)
    }

    /// A server sharing PostgreSQL builds the start image of its replica's newest snapshot after
    /// compacting it (`MaintenancePolicy.startImageOpsMin`); a new device takes it through that
    /// server, then writes and syncs through the other one: one history, the same digest everywhere.
    @Test func aNewDeviceStartsFromOneServersStartImageAndSyncsThroughTheOther() async throws {
        var maintenance = MaintenancePolicy()
        maintenance.compaction?.keepOps = 10
        maintenance.compaction?.segmentOpsMax = 10
        maintenance.compaction?.snapshotEveryOps = nil   // a snapshot at every seal point
        maintenance.startImageOpsMin = 1
        maintenance.checkIntervalSeconds = 3_600   // passes run here only when the test asks
        let pair = try Pair(maintenance: maintenance)
        let a = try pair.device(0)
        for op in 0..<60 { _ = try a.store.write("article.save", payload: ["url": .text("https://example.com/\(op)")]) }
        #expect(await a.engine.syncOnce().outcome == .synced)
        let pass = pair.servers[0].service.runMaintenance(all: true)
        let snapshotSeq = try #require(pass.first?.report?.snapshotSeq, "\(pass)")
        let image = try #require(try pair.servers[0].service.library(pair.user.libraryID).currentStartImage())
        #expect(image.seq == snapshotSeq)

        let n = try pair.device(0)
        var configuration = SyncEngine.Configuration()
        configuration.snapshotStartOpsMin = 1
        let report = await SyncEngine(store: n.store, transport: n.transport, configuration: configuration, random: { 0.5 }).syncOnce()
        #expect(report.outcome == .synced && report.startedFromImage && report.bootstrappedAt == snapshotSeq, "\(report)")
        #expect(try n.store.cursor() == 60)

        let token = try pair.servers[1].service.accounts.registerDevice(user: "ada", password: pair.password, deviceID: n.store.deviceID).token
        let throughTwo = HTTPTransport(baseURL: pair.servers[1].url, library: pair.user.libraryID, token: token, requestTimeoutSeconds: 30)
        _ = try n.store.write("article.save", payload: ["url": .text("https://example.com/after-the-image")])
        #expect(await SyncEngine(store: n.store, transport: throughTwo, random: { 0.5 }).syncOnce().outcome == .synced)
        #expect(await a.engine.syncOnce().outcome == .synced)
        let digest = try n.store.digest()
        #expect(try a.store.digest() == digest)
        for server in pair.servers {
            #expect(try server.service.library(pair.user.libraryID).digest() == digest)
        }
    }

    /// A device signs in through one server and syncs through the other with the same token, until
    /// an operator revokes it through a third connection: both servers refuse it from then on.
    @Test func aSignInOnOneServerWorksOnTheOtherUntilRevoked() async throws {
        let pair = try Pair()
        let store = try DeviceStore.create(at: pair.database.directory + "/device-\(UUID().lowercased).chronicle", schema: .readItLater,
                                           libraryID: pair.user.libraryID, deviceID: UUID())
        let registration = try await HTTPTransport.register(baseURL: pair.servers[0].url, user: "ada", password: pair.password,
                                                            deviceID: store.deviceID)
        let transports = pair.servers.map { HTTPTransport(baseURL: $0.url, library: pair.user.libraryID, token: registration.token,
                                                          requestTimeoutSeconds: 30) }
        _ = try store.write("article.save", payload: ["url": .text("https://example.com/one")])
        let engine = SyncEngine(store: store, transport: transports[1], random: { 0.5 })
        #expect(await engine.syncOnce().outcome == .synced)
        for transport in transports { _ = try await transport.pull(after: 0, limit: 10, waitMilliseconds: 0) }   // cached on both

        let operatorAccounts = Accounts(storage: try PostgresAccountsStorage(conninfo: pair.database.conninfo, listening: false))
        try operatorAccounts.revokeDevice(store.deviceID)
        for (index, transport) in transports.enumerated() {
            var answer: SyncError?
            let deadline = Date().addingTimeInterval(10)
            repeat {
                do { _ = try await transport.pull(after: 0, limit: 10, waitMilliseconds: 0) } catch { answer = error }
                if answer == nil { try await Task.sleep(nanoseconds: 10_000_000) }
            } while answer == nil && Date() < deadline
            guard case .terminal(let error)? = answer else {
                Issue.record("server \(index) still takes the revoked token: \(String(describing: answer))")
                continue
            }
            #expect(error.status == 401 && error.code == .unauthorized, "\(error)")
        }
    }

    @Test func aLibraryDeletedThroughOneServerIsGoneFromTheDatabase() throws {
        let pair = try Pair()
        let a = try pair.device(0)
        _ = try a.store.write("article.save", payload: ["url": .text("https://example.com/x")])
        let library = pair.user.libraryID
        _ = try pair.servers[0].service.library(library)
        _ = try pair.servers[0].service.accounts.removeUser("ada", deletingLibrary: true)
        #expect(pair.servers[0].service.runLibraryDeletions() == [library])
        let pg = try pair.database.connection()
        #expect(try pg.execute("SELECT count(*) FROM chronicle_libraries WHERE library_id = $1", [library.lowercased]).int(0, 0) == 0)
        #expect(try pg.execute("SELECT count(*) FROM chronicle_log").int(0, 0) == 0)
        #expect(!FileManager.default.fileExists(atPath: pair.database.directory + "/one/\(library.lowercased).sqlite"))
    }

    @Test func readinessSaysWhenTheDatabaseCannotBeReached() async throws {
        let database = try TestDatabase()
        let server = try SyncServer(dataDirectory: database.directory + "/server", shared: try database.server("one"))
        defer { server.stop() }
        func readyz() async throws -> (Int, String) {
            let (body, response) = try await URLSession.shared.data(from: server.url.appendingPathComponent("readyz"))
            return ((response as! HTTPURLResponse).statusCode, String(decoding: body, as: UTF8.self))
        }
        let (up, _) = try await readyz()
        #expect(up == 200)
        // The database goes away under the running server (every connection ended with it).
        try database.dropNow()
        let (down, body) = try await readyz()
        #expect(down == 503 && body.contains("server_store_unavailable"), "\(down) \(body)")
    }

    /// A page saved through one server is read (by whichever server took the save, or opens the
    /// library first) and its text reaches a device syncing through the other.
    @Test func aPageSavedThroughOneServerIsReadAndReachesTheOther() async throws {
        struct Page: HTTPHandler {
            let hits = Locked(0)
            func handle(_ request: HTTPRequest, respond: @escaping @Sendable (HTTPResponse) -> Void) {
                hits.withLock { $0 += 1 }
                respond(HTTPResponse(status: 200, headers: [("Content-Type", "text/html")],
                                     body: Array("<title>Shared</title><article><p>read once for both servers</p></article>".utf8)))
            }
        }
        let page = Page()
        let web = try HTTPServer(configuration: HTTPServer.Configuration(), handler: page)
        defer { web.stop() }
        var fetch = ArticleFetchPolicy()
        fetch.allowsPrivateAddresses = true
        let pair = try Pair(extensions: { [ArticleFetcher(policy: fetch)] })
        let a = try pair.device(0), b = try pair.device(1)
        let id = try a.store.write("article.save", payload: ["url": .text("http://127.0.0.1:\(web.port)/shared")]).entityID
        #expect(await a.engine.syncOnce().outcome == .synced)
        let deadline = Date().addingTimeInterval(30)
        let check = try pair.database.server("check").library(pair.user.libraryID)
        while try check.allOps().allSatisfy({ $0.type != "article.parsed" }), Date() < deadline {
            try await Task.sleep(nanoseconds: 20_000_000)
            try check.catchUp()
        }
        #expect(await b.engine.syncOnce().outcome == .synced)
        let row = try #require(try b.store.row(id))
        #expect(row["text"]?.textValue == "read once for both servers" && row["word_count"]?.integerValue == 5 && row["title"]?.textValue == "Shared")
        #expect((1...2).contains(page.hits.withLock { $0 }), "read by one server, or by both where both opened the library at once")
        #expect(await a.engine.syncOnce().outcome == .synced)
        #expect(try a.store.digest() == b.store.digest())
    }
}
