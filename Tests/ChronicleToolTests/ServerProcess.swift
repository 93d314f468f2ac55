import ChronicleCore
import ChronicleStore
import ChronicleTesting
import Foundation
import Testing
import ChronicleServerStore

/// A `chronicle serve` child process on a loopback port; its JSON logs go to a file.
final class ServerProcess {
    let process: ChildProcess
    let data: String
    let url: String
    let port: Int
    let logPath: String
    /// The line it printed on starting (where it listens, where its data is).
    let banner: String

    /// Starts `chronicle serve` and waits for the line saying where it listens. `dataFlag`:
    /// `--replicas` for a server with no data directory (`--postgres`), `data` its replicas.
    /// `chronicle serve`, or with `fault503Rate` the test server that answers that fraction of
    /// library requests 503 (`chronicle-test-server`: `chronicle serve` has no faults in it).
    init(data: String, port: Int = 0, environment: [String: String] = [:], arguments: [String] = [], dataFlag: String = "--data",
         fault503Rate: Double? = nil) throws {
        self.data = data
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
        logPath = data + "/serve-\(UUID().uuidString.prefix(8)).log"
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        let command = fault503Rate.map { rate in
            (Tool.binary.deletingLastPathComponent().appendingPathComponent("chronicle-test-server").path,
             ["--data", data, "--port", String(port), "--fault-503-rate", String(rate)])
        } ?? (Tool.binary.path, ["serve", dataFlag, data, "--port", String(port), "--threads", "4"] + arguments)
        process = try ChildProcess(command.0, command.1,
                                   environment: ProcessInfo.processInfo.environment.merging(environment) { $1 },
                                   stdout: .pipe, stderr: .file(logPath))
        // Read the first line (bounded in time: a server that never says where it listens fails the test).
        nonisolated(unsafe) var line = ""
        let ready = DispatchSemaphore(value: 0)
        let reader = process.standardOutput!
        DispatchQueue.global().async {
            var bytes: [UInt8] = []
            while true {
                let chunk = reader.readData(ofLength: 1)
                if chunk.isEmpty || chunk.first == UInt8(ascii: "\n") { break }
                bytes.append(chunk.first!)
            }
            line = String(decoding: bytes, as: UTF8.self)
            ready.signal()
        }
        guard ready.wait(timeout: .now() + 30) == .success, let range = line.range(of: "http://127.0.0.1:") else {
            process.terminate()
            throw ChronicleError(.invariantViolated, "chronicle serve did not start: '\(line)'; log: \((try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "")")
        }
        banner = line
        let rest = line[range.upperBound...]
        self.port = Int(rest.prefix { $0.isNumber })!
        url = "http://127.0.0.1:\(self.port)"
    }

    /// SIGKILL: no chance to clean up, as when the machine loses power.
    func kill9() {
        process.signal(SIGKILL)
        process.wait()
    }

    /// SIGTERM: a clean stop.
    func stop() {
        guard process.isRunning else { return }
        process.terminate()
        process.wait()
    }

    deinit { if process.isRunning { kill9() } }

    /// How many ops the running server has committed for a library (read-only, beside the server).
    func committedOps(_ id: String) -> Int {
        var options = Database.Options()
        options.readOnly = true
        guard let db = try? Database(path: "\(data)/libraries/\(id).sqlite", options: options),
              let count = try? db.scalarInt("SELECT count(*) FROM chronicle_log") else { return 0 }
        return Int(count)
    }

    /// Polls until the server has committed at least `count` ops (or `seconds` pass).
    func waitForCommitted(_ id: String, atLeast count: Int, seconds: Double = 30) {
        let deadline = Date().addingTimeInterval(seconds)
        while committedOps(id) < count && Date() < deadline { usleep(5_000) }
    }

    /// The server's store for one library, opened after the server stopped.
    func library(_ id: String) throws -> ServerLibrary {
        try ServerLibrary.openOrCreate(at: "\(data)/libraries/\(id).sqlite", libraryID: UUID(text: id)!, schema: .readItLater)
    }
}

extension Tool {
    /// `init` and `login` against a server as user `ada`.
    func signIn(_ server: ServerProcess, user: String = "ada", password: String = "password123") throws {
        try ok("init")
        let login = try run(["login", "--server", server.url, "--user", user], stdin: password + "\n")
        #expect(login.status == 0, "login failed: \(login.stderr)")
    }

    var credentials: [String: Any] {
        get throws {
            let data = try Data(contentsOf: URL(fileURLWithPath: store + ".credentials"))
            return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        }
    }

    /// Starts `chronicle sync` without waiting for it.
    func startSync(environment: [String: String] = [:]) throws -> ChildProcess {
        try ChildProcess(Tool.binary.path, ["sync", "--once"],
                         environment: ProcessInfo.processInfo.environment.merging(["CHRONICLE_STORE": store].merging(environment) { $1 }) { $1 })
    }

    /// Writes `count` article saves and tags straight through the library (much faster than one process per op).
    func write(_ count: Int, prefix: String) throws {
        let store = try DeviceStore.open(at: self.store)
        for i in 0..<count {
            if i % 3 == 2, let last = try store.rows("article", limit: 1).first {
                try store.write("article.tag", entity: UUID(text: last.id), payload: ["tag": .text("t\(i % 7)")])
            } else {
                try store.write("article.save", payload: ["url": .text("https://example.com/\(prefix)/\(i)"), "title": .text("\(prefix) \(i)")])
            }
        }
    }
}

/// Waits for a child process, failing the test if it runs past `seconds`.
func waitForExit(_ process: ChildProcess, seconds: Double) -> Int32? {
    let deadline = Date().addingTimeInterval(seconds)
    while process.isRunning && Date() < deadline { usleep(20_000) }
    if process.isRunning {
        process.signal(SIGKILL)
        process.wait()
        return nil
    }
    return process.wait().status
}
