import ChronicleCore
@testable import ChronicleServer
@testable import ChronicleServerStore
import ChronicleStore
import ChronicleTesting
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing

/// `/healthz`, `/readyz` and `/metrics` over real HTTP name the server's files found damaged:
/// a damaged library leaves the server ready (every other library is served) but shows in all
/// three; a damaged accounts file makes it not ready from the moment it starts.
@Suite struct ServerHealthTests {
    typealias Pages = DamagedPages

    /// A server on `directory` whose JSON-line log goes to a file the test reads.
    final class Rig: @unchecked Sendable {
        let server: SyncServer
        let logPath: String
        private let logFile: FileHandle
        let session = URLSession(configuration: .ephemeral)

        init(directory: String, schema: Schema, maintenance: MaintenancePolicy = .off) throws {
            logPath = NSTemporaryDirectory() + "chronicle-health-log-\(UUID().lowercased).jsonl"
            _ = FileManager.default.createFile(atPath: logPath, contents: nil)
            logFile = try #require(FileHandle(forWritingAtPath: logPath))
            server = try SyncServer(dataDirectory: directory, maintenance: maintenance, log: ServerLog(to: logFile), schemas: [schema])
        }

        deinit {
            server.stop()
            try? logFile.close()
            try? FileManager.default.removeItem(atPath: logPath)
        }

        func get(_ path: String, token: String? = nil) async throws -> (status: Int, body: String, json: [String: Any]) {
            var request = URLRequest(url: URL(string: server.url.absoluteString + path)!)
            request.timeoutInterval = 10
            if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
            let (data, response) = try await session.data(for: request)
            let json = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
            return ((response as! HTTPURLResponse).statusCode, String(decoding: data, as: UTF8.self), json)
        }

        /// The log's lines of one event.
        func logged(_ event: String) throws -> [[String: Any]] {
            try String(contentsOfFile: logPath, encoding: .utf8).split(separator: "\n").compactMap { line in
                (try JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
            }.filter { $0["event"] as? String == event }
        }
    }

    static func problems(_ json: [String: Any]) -> [[String: Any]] { json["problems"] as? [[String: Any]] ?? [] }

    @Test func aDamagedLibraryShowsInHealthReadinessAndMetricsAndIsNoLongerCompacted() async throws {
        let h = try LibraryFixture()
        let a = try h.device("A")
        try a.write(300, seed: 71)
        #expect(await a.sync().outcome == .synced)
        let libraryID = h.user.libraryID
        let path = try h.library.path
        try Pages.checkpoint(path)
        try Pages.damage(page: try Pages.rootPage(of: "chronicle_log", in: path), in: path)

        // Compaction due on every pass: all but 10 ops sealed, 100 to a segment.
        var maintenance = MaintenancePolicy()
        maintenance.compaction?.keepOps = 10
        maintenance.compaction?.segmentOpsMax = 100
        maintenance.checkIntervalSeconds = 3_600
        let rig = try Rig(directory: h.directory + "/server", schema: h.schema, maintenance: maintenance)
        // Nothing is known to be damaged before a request meets the broken page.
        var health = try await rig.get("/healthz")
        #expect(health.status == 200 && health.json["status"] as? String == "ok" && Self.problems(health.json).isEmpty, "\(health.body)")
        var ready = try await rig.get("/readyz")
        #expect(ready.status == 200 && ready.json["status"] as? String == "ready", "\(ready.body)")

        for _ in 0..<2 {
            let pull = try await rig.get("/v1/libraries/\(libraryID.lowercased)/ops?after=0&limit=100", token: a.token)
            #expect(pull.status == 503 && pull.body.contains(ProtocolError.Code.libraryDamaged.rawValue), "\(pull.body)")
        }

        health = try await rig.get("/healthz")
        #expect(health.status == 200 && health.json["status"] as? String == "degraded", "\(health.body)")
        let problems = Self.problems(health.json)
        #expect(problems.count == 1, "\(health.body)")
        let problem = try #require(problems.first)
        #expect(problem["code"] as? String == ProtocolError.Code.libraryDamaged.rawValue)
        #expect(problem["library"] as? String == libraryID.lowercased)
        #expect(problem["file"] as? String == "libraries/\(libraryID.lowercased).sqlite")
        #expect((problem["message"] as? String ?? "").contains("SQLite cannot read"), "\(problem)")
        #expect(problem["action"] as? String == "chronicle server salvage --data \(h.directory)/server ada", "\(problem)")
        #expect((problem["since"] as? String ?? "").hasPrefix("20"), "\(problem)")
        // Every other library is still served: the server stays ready, and says what is wrong.
        ready = try await rig.get("/readyz")
        #expect(ready.status == 200 && ready.json["status"] as? String == "degraded" && Self.problems(ready.json).count == 1, "\(ready.body)")
        let metrics = try await rig.get("/metrics")
        #expect(metrics.body.contains(#"chronicle_damaged_files{kind="library"} 1"#), "\(metrics.body)")
        #expect(metrics.body.contains(#"chronicle_damaged_files{kind="accounts"} 0"#))

        // Logged once, however many requests met it, with the file's full path.
        let lines = try rig.logged("file_damaged")
        #expect(lines.count == 1, "\(lines)")
        #expect(lines.first?["file"] as? String == h.directory + "/server/libraries/\(libraryID.lowercased).sqlite")
        #expect(lines.first?["library"] as? String == libraryID.lowercased)

        // The server's own compaction leaves the damaged file alone (it would fail every pass,
        // writing into it); `runMaintenance(all:)` would otherwise look at every library.
        #expect(rig.server.service.runMaintenance(all: true).isEmpty)
        #expect(try rig.logged("compact_failed").isEmpty)
    }

    @Test func aDamagedAccountsFileMakesTheServerNotReadyFromItsStart() async throws {
        let h = try LibraryFixture()
        let a = try h.device("A")
        try a.write(20, seed: 72)
        #expect(await a.sync().outcome == .synced)
        let path = h.directory + "/server/server.sqlite"
        try Pages.checkpoint(path)
        try Pages.damage(page: try Pages.rootPage(of: "devices", in: path), in: path)

        let rig = try Rig(directory: h.directory + "/server", schema: h.schema)
        // Found by the check `serve` runs as it starts, before any request.
        let ready = try await rig.get("/readyz")
        #expect(ready.status == 503 && ready.json["status"] as? String == "unavailable", "\(ready.body)")
        let problem = try #require(Self.problems(ready.json).first)
        #expect(problem["code"] as? String == ProtocolError.Code.accountsDamaged.rawValue && problem["file"] as? String == "server.sqlite" && problem["library"] == nil,
                "\(problem)")
        #expect(problem["action"] as? String == "chronicle server salvage --data \(h.directory)/server --accounts", "\(problem)")
        // Liveness stays 200: restarting the process mends nothing.
        let health = try await rig.get("/healthz")
        #expect(health.status == 200 && health.json["status"] as? String == "degraded", "\(health.body)")

        let pull = try await rig.get("/v1/libraries/\(h.user.libraryID.lowercased)/ops?after=0", token: a.token)
        #expect(pull.status == 503 && pull.body.contains(ProtocolError.Code.accountsDamaged.rawValue), "\(pull.body)")
        let metrics = try await rig.get("/metrics")
        #expect(metrics.body.contains(#"chronicle_damaged_files{kind="accounts"} 1"#), "\(metrics.body)")
        #expect(try rig.logged("file_damaged").count == 1)
    }

    @Test func aWholeServerIsReadyAndSaysSo() async throws {
        let h = try LibraryFixture()
        let a = try h.device("A")
        try a.write(20, seed: 73)
        #expect(await a.sync().outcome == .synced)
        let rig = try Rig(directory: h.directory + "/server", schema: h.schema)
        let pull = try await rig.get("/v1/libraries/\(h.user.libraryID.lowercased)/ops?after=0", token: a.token)
        #expect(pull.status == 200)
        let ready = try await rig.get("/readyz")
        #expect(ready.status == 200 && ready.body == #"{"status":"ready"}"#, "\(ready.body)")
        let health = try await rig.get("/healthz")
        #expect(health.status == 200 && health.body == #"{"status":"ok"}"#, "\(health.body)")
        let again = try await rig.get("/readyz?probe=1")
        #expect(again.status == 200)
        let metrics = try await rig.get("/metrics")
        #expect(metrics.body.contains(#"chronicle_http_requests_total{method="GET",route="/readyz",status="200"} 2"#), "\(metrics.body)")
        #expect(try rig.logged("file_damaged").isEmpty)
    }
}
