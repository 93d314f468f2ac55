import ChronicleCore
import ChroniclePostgres
import ChronicleStore
import Foundation
import Testing

/// Two `chronicle serve --postgres` processes sharing one data directory (users, devices) and one
/// PostgreSQL database (the order), with devices syncing through each, one server killed and
/// restarted on the way.
@Suite(.serialized) struct PostgresToolTests {
    /// A database of its own on the test script's PostgreSQL server (`CHRONICLE_TEST_POSTGRES`).
    func database() throws -> (conninfo: String, drop: () -> Void) {
        guard let base = ProcessInfo.processInfo.environment["CHRONICLE_TEST_POSTGRES"], !base.isEmpty else {
            throw ChronicleError(.usage, "CHRONICLE_TEST_POSTGRES is not set: run the tests with `bash Tools/scripts/test.sh`, which starts PostgreSQL.")
        }
        let name = "chronicle_tool_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(12)
        try PostgresConnection(base).execute("CREATE DATABASE \(name)")
        let conninfo = base.replacingOccurrences(of: #"dbname=\S+"#, with: "dbname=\(name)", options: .regularExpression)
        return (conninfo, { _ = try? PostgresConnection(base).execute("DROP DATABASE IF EXISTS \(name) WITH (FORCE)") })
    }

    @Test func twoServersShareTheOrderAndOneIsKilledAndRestarted() throws {
        let (conninfo, drop) = try database()
        defer { drop() }
        let a = try Tool(), b = try Tool()
        let data = a.directory.appendingPathComponent("server").path
        #expect(try Tool.exec(Tool.binary, ["server", "add-user", "--data", data, "ada"], stdin: "password123\n").status == 0)
        let flags = ["--postgres", conninfo]
        var one = try ServerProcess(data: data, arguments: flags)
        let two = try ServerProcess(data: data, arguments: flags)
        try a.signIn(one)
        try b.signIn(two)
        for index in 0..<20 {
            try a.ok("save", "https://example.com/a/\(index)", "--title", "A \(index)")
            try b.ok("save", "https://example.com/b/\(index)", "--title", "B \(index)")
        }
        try a.ok("sync")
        try b.ok("sync")

        // Killed with no chance to clean up, and started again on its port: it finds its replicas again.
        one.kill9()
        one = try ServerProcess(data: data, port: one.port, arguments: flags)
        for index in 20..<30 { try a.ok("save", "https://example.com/a/\(index)") }
        try a.ok("sync")
        try b.ok("sync")
        try a.ok("sync")
        let digests = try [a, b].map { try DeviceStore.open(at: $0.store).digest() }
        #expect(digests[0] == digests[1])
        for tool in [a, b] { #expect(try DeviceStore.open(at: tool.store).pendingOps().isEmpty) }

        let pg = try PostgresConnection(conninfo)
        let rows = try pg.execute("SELECT count(*), count(DISTINCT op_id), min(server_seq), max(server_seq) FROM chronicle_log")
        #expect(try rows.int(0, 0) == 50 && rows.int(0, 1) == 50 && rows.int(0, 2) == 1 && rows.int(0, 3) == 50, "every op once, gap-free")
        let replicas = try FileManager.default.contentsOfDirectory(atPath: data + "/replicas").sorted()
        #expect(replicas == ["1", "2"], "each server its own replicas, found again after the restart: \(replicas)")

        // The data directory is PostgreSQL's now: a server without --postgres, and the commands that
        // work on library files, refuse it.
        one.stop()
        two.stop()
        let plain = try Tool.exec(Tool.binary, ["serve", "--data", data, "--port", "0"])
        #expect(plain.status != 0 && plain.stderr.contains("libraries_in_postgresql"), "\(plain.stderr)")
        let backup = try Tool.exec(Tool.binary, ["server", "backup", "--data", data, "--to", a.directory.appendingPathComponent("copy").path])
        #expect(backup.status != 0 && backup.stderr.contains("libraries_in_postgresql"), "\(backup.stderr)")
        let unreachable = try Tool.exec(Tool.binary, ["serve", "--data", data, "--port", "0", "--postgres", "host=127.0.0.1 port=1 dbname=none connect_timeout=2"])
        #expect(unreachable.status != 0 && unreachable.stderr.contains("Cannot use PostgreSQL"), "\(unreachable.stderr)")
    }
}
