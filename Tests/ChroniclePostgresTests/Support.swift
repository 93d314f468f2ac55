import ChronicleCore
import ChroniclePostgres
import ChronicleStore
import Foundation
import Testing
import ChronicleTesting

/// A database of its own on the PostgreSQL server the test script started
/// (`CHRONICLE_TEST_POSTGRES`, set by `Tools/scripts/test.sh`), dropped when the test ends.
final class TestDatabase {
    let name: String
    let conninfo: String
    private let base: String
    let directory: String

    init() throws {
        guard let base = ProcessInfo.processInfo.environment["CHRONICLE_TEST_POSTGRES"], !base.isEmpty else {
            throw TestSetupError("CHRONICLE_TEST_POSTGRES is not set. Run the tests with `bash Tools/scripts/test.sh`, which starts a PostgreSQL server for them, or start one with `bash Tools/scripts/postgres.sh start DIR` and set the variable to the connection string it prints.")
        }
        self.base = base
        name = "chronicle_t_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(16)
        try PostgresConnection(base).execute("CREATE DATABASE \(name)")
        conninfo = base.replacingOccurrences(of: #"dbname=\S+"#, with: "dbname=\(name)", options: .regularExpression)
        let root = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm" : NSTemporaryDirectory()
        directory = root + "/chronicle-pg-test-\(name)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    deinit {
        try? FileManager.default.removeItem(atPath: directory)
        if let admin = try? PostgresConnection(base) {
            _ = try? admin.execute("DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
        }
    }

    /// Drops the database now, ending every connection to it.
    func dropNow() throws {
        try PostgresConnection(base).execute("DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
    }

    /// A server process's view of the database: its own pool and replica directory.
    func server(_ label: String, clock: any ChronicleClock = SystemClock()) throws -> PostgresServerStore {
        try PostgresServerStore(conninfo: conninfo, cacheDirectory: directory + "/\(label)", schema: .readItLater, poolSize: 4, clock: clock)
    }

    /// A connection for looking at what the database holds.
    func connection() throws -> PostgresConnection { try PostgresConnection(conninfo) }
}

struct TestSetupError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A device writing ops in its own store, to push them.
final class Writer {
    let store: DeviceStore
    let path: String
    private var pushed = 0

    init(library: UUID, in directory: String, seed: UInt64) throws {
        path = directory + "/device-\(UUID().uuidString).chronicle"
        store = try DeviceStore.create(at: path, schema: .readItLater, libraryID: library, clock: ManualClock(), ids: SeededIDGenerator(seed: seed))
    }

    deinit { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }

    var deviceID: UUID { store.deviceID }

    /// Writes `count` ops of several kinds (saves, tags, edits, progress) and returns the ones not handed out before.
    func write(_ count: Int, salt: Int = 0) throws -> [Op] {
        var article: UUID?
        for index in 0..<count {
            switch index % 4 {
            case 0:
                article = try store.write("article.save", payload: ["url": .text("https://example.com/\(salt)/\(index)"),
                                                                    "title": .text("Article \(index)")]).entityID
            case 1: _ = try store.write("article.tag", entity: article!, payload: ["tag": .text("t\(index % 7)")])
            case 2: _ = try store.write("article.update", entity: article!, payload: ["title": .text("Edited \(salt) \(index)")])
            default: _ = try store.write("article.progress", entity: article!, payload: ["progress": .real(Double(index % 10) / 10)])
            }
        }
        let all = try store.pendingOps()
        defer { pushed = all.count }
        return Array(all[pushed...])
    }

    /// An op the server must refuse (it tags an article that does not exist), under the next deviceSeq.
    func orphan(after last: Op, id: UUID) -> Op {
        Op(opID: id, libraryID: last.libraryID, deviceID: last.deviceID, deviceSeq: last.deviceSeq + 1, type: "article.tag", version: 1,
           entityID: UUID(), payload: ["tag": .text("orphan")], deviceTime: last.deviceTime, baseSeq: 0)
    }
}
