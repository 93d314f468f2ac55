import ChronicleCore
import ChronicleStore
import Foundation
import Testing

/// `chronicle server salvage`: refused while a server runs on the data directory (so is a second
/// server), and a library whose log cannot be read at all comes back whole from the device that
/// wrote it.
@Suite(.serialized) struct ServerSalvageToolTests {
    @Test func aLibraryWhoseLogIsUnreadableIsSalvagedAndTheDeviceGivesItsOpsBack() throws {
        let t = try Tool()
        let data = t.directory.appendingPathComponent("server").path
        _ = try Tool.exec(Tool.binary, ["server", "add-user", "--data", data, "ada"], stdin: "password123\n")
        let server = try ServerProcess(data: data)
        defer { server.stop() }
        try t.signIn(server)
        try t.write(400, prefix: "before")
        try t.ok("sync")
        let library = try #require(try t.credentials["library"] as? String)

        // One server per data directory, and no salvage beside it.
        let second = try Tool.exec(Tool.binary, ["serve", "--data", data, "--port", "0"])
        #expect(second.status == 4 && second.stderr.contains("[data_directory_in_use]") && second.stderr.contains("chronicle serve"),
                "\(second.stderr)")
        let beside = try Tool.exec(Tool.binary, ["server", "salvage", "--data", data, "ada"])
        #expect(beside.status == 4 && beside.stderr.contains("[data_directory_in_use]"), "\(beside.stderr)")

        // Verified beside the running server.
        let verified = try Tool.exec(Tool.binary, ["server", "verify", "--data", data, "ada"])
        #expect(verified.status == 0 && verified.stdout.contains("ok   digest equals a replay of the log") && verified.stdout.contains("400 ops"),
                "\(verified.stdout)\(verified.stderr)")

        server.stop()
        let path = "\(data)/libraries/\(library).sqlite"
        try Tool.breakRootPage(of: "chronicle_log", in: path)
        let failed = try Tool.exec(Tool.binary, ["server", "verify", "--data", data, "--all", "--json"])
        #expect(failed.status == 1, "\(failed.stdout)\(failed.stderr)")
        let checks = try #require(try failed.json() as? [[String: Any]]).first?["checks"] as? [[String: Any]] ?? []
        #expect(checks.contains { $0["passed"] as? Bool == false && ($0["detail"] as? String ?? "").contains("chronicle server salvage") }, "\(checks)")
        let dry = try Tool.exec(Tool.binary, ["server", "salvage", "--data", data, "ada", "--dry-run"])
        #expect(dry.status == 1 && dry.stdout.contains("History kept through seq 0 of 400") && dry.stdout.contains("dry run"),
                "\(dry.stdout)\(dry.stderr)")
        let salvaged = try Tool.exec(Tool.binary, ["server", "salvage", "--data", data, "ada", "--json"])
        #expect(salvaged.status == 1, "\(salvaged.stderr)")
        let report = try salvaged.object()
        #expect(report["head_before"] as? Int == 400 && report["head_kept"] as? Int == 0 && report["lost_nothing"] as? Bool == false)
        #expect(FileManager.default.fileExists(atPath: try #require(report["damaged_path"] as? String)))

        // The server again, at the same address: the device finds it holds nothing of what it had
        // and sends its 400 ops again, with two more written since.
        let restarted = try ServerProcess(data: data, port: server.port)
        defer { restarted.stop() }
        try t.write(2, prefix: "after")
        let back = try t.run(["sync"])
        #expect(back.status == 0, "\(back.stdout)\(back.stderr)")
        let other = try Tool()
        try other.signIn(restarted)
        try other.ok("sync")
        restarted.stop()
        let ops = try restarted.library(library).allOps()
        #expect(ops.count == 402 && Set(ops.map(\.opID)).count == 402, "every op the device wrote, once: \(ops.count)")
        #expect(ops.map(\.deviceSeq) == Array(1...402), "in the order it wrote them")
        let digest = try restarted.library(library).digest()
        #expect(try DeviceStore.open(at: t.store).digest() == digest && DeviceStore.open(at: other.store).digest() == digest)
        #expect(try Tool.exec(Tool.binary, ["server", "verify", "--data", data, "--all"]).stdout.contains("All 1 libraries passed."))
        #expect(try Tool.exec(Tool.binary, ["server", "--help"]).stdout.contains("salvage keeps what can still be read"))
    }
}
