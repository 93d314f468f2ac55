import ChronicleTesting
import Foundation
import Testing

/// Runs the built `chronicle` binary the way a person or a script would.
struct ToolResult {
    var status: Int32
    var stdout: String
    var stderr: String

    /// Parses stdout as JSON.
    func json() throws -> Any { try JSONSerialization.jsonObject(with: Data(stdout.utf8), options: [.fragmentsAllowed]) }
    func object() throws -> [String: Any] { try #require(try json() as? [String: Any], "stdout was: \(stdout)") }
}

final class Tool {
    let directory: URL
    let store: String

    static let binary: URL = {
        if let path = ProcessInfo.processInfo.environment["CHRONICLE_BIN"] { return URL(fileURLWithPath: path) }
        // The test bundle sits next to the products in .build/<triple>/<config>/.
        var url = URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL
        for _ in 0..<4 {
            url.deleteLastPathComponent()
            let candidate = url.appendingPathComponent("chronicle")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        }
        return URL(fileURLWithPath: ".build/debug/chronicle")
    }()

    init() throws {
        let root = FileManager.default.fileExists(atPath: "/dev/shm") ? URL(fileURLWithPath: "/dev/shm") : FileManager.default.temporaryDirectory
        directory = root.appendingPathComponent("chronicle-tool-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        store = directory.appendingPathComponent("library.chronicle").path
    }

    deinit { try? FileManager.default.removeItem(at: directory) }

    /// Runs `chronicle ARGS` with CHRONICLE_STORE pointing at this tool's store.
    @discardableResult
    func run(_ arguments: [String], environment extra: [String: String] = [:], stdin: String? = nil) throws -> ToolResult {
        try Self.exec(Self.binary, arguments, environment: ["CHRONICLE_STORE": store].merging(extra) { $1 }, stdin: stdin)
    }

    func run(_ arguments: String...) throws -> ToolResult { try run(arguments) }

    /// Runs a command and requires it to succeed.
    @discardableResult
    func ok(_ arguments: String...) throws -> ToolResult {
        let result = try run(arguments)
        #expect(result.status == 0, "chronicle \(arguments.joined(separator: " ")) failed: \(result.stderr)")
        return result
    }

    /// The `id` a write command printed with --json.
    func id(_ arguments: String...) throws -> String {
        let result = try run(arguments + ["--json"])
        #expect(result.status == 0, "\(result.stderr)")
        return try #require(try result.object()["id"] as? String)
    }

    static func exec(_ executable: URL, _ arguments: [String], environment: [String: String] = [:], stdin: String? = nil) throws -> ToolResult {
        let result = try ChildProcess.run(executable.path, arguments, environment: ProcessInfo.processInfo.environment.merging(environment) { $1 },
                                          stdin: stdin.map { .bytes(Array($0.utf8)) } ?? .null)
        return ToolResult(status: result.status, stdout: result.stdout, stderr: result.stderr)
    }
}

extension Tool {
    /// Breaks the root page of `table` in this tool's store, as a failing disk leaves a page
    /// (its header overwritten), after merging the WAL into the file with the `sqlite3` shell.
    func breakRootPage(of table: String) throws {
        try Self.breakRootPage(of: table, in: store)
    }

    /// The same in any SQLite file (a server's library).
    static func breakRootPage(of table: String, in file: String) throws {
        let sqlite = URL(fileURLWithPath: "/usr/bin/sqlite3")
        _ = try exec(sqlite, [file, "PRAGMA journal_mode=DELETE;"])
        let root = try #require(Int(try exec(sqlite, [file, "SELECT rootpage FROM sqlite_schema WHERE name = '\(table)'"])
            .stdout.trimmingCharacters(in: .whitespacesAndNewlines)))
        let handle = try #require(FileHandle(forUpdatingAtPath: file))
        try handle.seek(toOffset: UInt64((root - 1) * 4096))
        handle.write(Data(repeating: 0xEE, count: 16))
        try handle.close()
    }
}
