import ChronicleCore
@testable import ChronicleStore
import ChronicleTesting
import Foundation
import Testing

/// The store fixtures under `Tests/Fixtures/`: one per earlier version, each a SQL dump
/// made by that version's own code (`chronicle-fixture`), with `fixture.json`.
struct StoreFixture: CustomTestStringConvertible, Sendable {
    let name: String
    let directory: URL
    let meta: [String: String]
    let schemaVersion: Int
    let formatVersion: Int
    let digest: String
    let confirmed: Int
    let pending: Int

    var testDescription: String { name }

    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fixtures")

    static var all: [StoreFixture] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: root.path)) ?? []
        return names.sorted().compactMap { name in
            let directory = root.appendingPathComponent(name)
            guard let data = FileManager.default.contents(atPath: directory.appendingPathComponent("fixture.json").path),
                  let json = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else { return nil }
            let meta = json.compactMapValues { value -> String? in
                if let s = value as? String { return s }
                if let n = value as? NSNumber { return n.stringValue }
                return nil
            }
            return StoreFixture(name: name, directory: directory, meta: meta,
                                schemaVersion: Int(meta["schema_version"] ?? "") ?? 0, formatVersion: Int(meta["format_version"] ?? "") ?? 0,
                                digest: meta["digest"] ?? "", confirmed: Int(meta["confirmed_ops"] ?? "") ?? 0,
                                pending: Int(meta["pending_ops"] ?? "") ?? 0)
        }
    }

    var schema: String { meta["schema"] ?? "" }

    /// Loads the dump into a new SQLite file with the `sqlite3` shell (any SQLite tool reads it).
    func load(into path: String) throws {
        let loaded = try ChildProcess.run("/usr/bin/sqlite3", [path], stdin: .file(directory.appendingPathComponent("store.sql").path),
                                          stdout: .null)
        guard loaded.status == 0 else { throw ChronicleError(.invariantViolated, "sqlite3 could not load \(name)") }
    }
}
