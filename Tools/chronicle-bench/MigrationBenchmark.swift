import CSQLite
import ChronicleCore
import ChronicleStore
import Foundation

/// Issue 6's figure: `DeviceStore.migrate(at:)` of an N-op store from the oldest version
/// (store format v1, readitlater schema v1) to this build's, beside a plain
/// `DeviceStore.rebuild()` of the same store (same ops, same schema) in the same run.
/// Each runs in a fresh child process, so its peak RSS (`VmHWM`) is its own.
///
/// The v1 store is made with v1's exact DDL and metadata, taken from the fixture
/// `Tests/Fixtures/readitlater-v1-format-v1/store.sql` (written by v1's own code): every
/// statement of that dump except its data rows, then the workload's ops (all in their v1
/// formats, e.g. `article.save@1` with `byline`) inserted into `chronicle_log` with plain
/// SQL. The v1 projection tables are left empty (their FTS5 indexes emptied with
/// `'delete-all'`): the current engine cannot materialize v1's shape, and the migration
/// drops and rebuilds the projection from the log anyway.
struct MigrationBenchmark {
    struct Result {
        var ops: Int
        var buildSeconds: Double
        var v1StoreBytes: Int64
        var fixtureFingerprint: String
        var migrate: Child
        var rebuild: Child
        var backupBytes: Int64
        var migratedStoreBytes: Int64

        var ratio: Double { migrate.seconds / rebuild.seconds }
        var digestMatches: Bool { migrate.digest == rebuild.digest }
    }

    /// One child's answer.
    struct Child {
        var seconds: Double
        var peakKilobytes: Int
        var startKilobytes: Int
        var digest: String
        /// Migration only: each step's name and seconds (backup, each format step, projection rebuild).
        var steps: [(String, Double)] = []
        var unreadable: Int = 0
        var confirmedOps: Int64 = 0
        var transactionSeconds: Double?
    }

    static let fixture = "Tests/Fixtures/readitlater-v1-format-v1/store.sql"

    let directory: String
    let ops: Int
    let seed: UInt64
    let vocabulary: Vocabulary
    let keep: Bool

    func run() throws -> Result {
        let path = directory + "/migrate-v1.chronicle"
        let b0 = nowNanoseconds()
        let fingerprint = try buildV1Store(at: path)
        let buildSeconds = Double(nowNanoseconds() - b0) / 1e9
        let v1Bytes = databaseBytes(path)
        progress("migrate: v1 store of \(formatCount(Double(ops))) ops, \(v1Bytes / 1_048_576) MB, in \(formatFixed(buildSeconds, 1)) s; DeviceStore.migrate (child process)…")

        let m = try runBenchChild(["_migrate", path])
        var migrate = try Self.child(m)
        migrate.steps = (m["steps"] as? [[Any]] ?? []).compactMap { pair in
            guard pair.count == 2, let name = pair[0] as? String, let seconds = (pair[1] as? NSNumber)?.doubleValue else { return nil }
            return (name, seconds)
        }
        migrate.unreadable = (m["unreadable_ops"] as? NSNumber)?.intValue ?? -1
        migrate.confirmedOps = (m["confirmed_ops"] as? NSNumber)?.int64Value ?? -1
        let backup = path + ".backup-v1"
        let backupBytes = fileBytes(backup)
        try? FileManager.default.removeItem(atPath: backup)
        progress("migrate: \(formatFixed(migrate.seconds, 2)) s, peak \(migrate.peakKilobytes / 1024) MB; baseline: rebuild() of the migrated store (child process)…")

        let r = try runBenchChild(["_rebuild", path])
        var rebuild = try Self.child(r)
        rebuild.transactionSeconds = (r["transaction_seconds"] as? NSNumber)?.doubleValue
        progress("migrate: rebuild \(formatFixed(rebuild.seconds, 2)) s, peak \(rebuild.peakKilobytes / 1024) MB")
        let migratedBytes = databaseBytes(path)
        if !keep { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        return Result(ops: ops, buildSeconds: buildSeconds, v1StoreBytes: v1Bytes, fixtureFingerprint: fingerprint, migrate: migrate,
                      rebuild: rebuild, backupBytes: backupBytes, migratedStoreBytes: migratedBytes)
    }

    private static func child(_ object: [String: Any]) throws -> Child {
        guard let seconds = (object["seconds"] as? NSNumber)?.doubleValue, let peak = (object["vmhwm_kb"] as? NSNumber)?.intValue,
              let start = (object["start_vmhwm_kb"] as? NSNumber)?.intValue, let digest = object["digest"] as? String else {
            throw BenchError("a migrate/rebuild child printed an unexpected result: \(object)")
        }
        return Child(seconds: seconds, peakKilobytes: peak, startKilobytes: start, digest: digest)
    }

    // MARK: - The v1 store

    /// The fixture's dump, found from this source file (the benchmark runs from its checkout)
    /// or `CHRONICLE_BENCH_V1_FIXTURE`.
    static func fixtureText() throws -> String {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let candidates: [String] = [ProcessInfo.processInfo.environment["CHRONICLE_BENCH_V1_FIXTURE"], root.appendingPathComponent(fixture).path,
                                    FileManager.default.currentDirectoryPath + "/" + fixture].compactMap { $0 }
        for path in candidates where FileManager.default.fileExists(atPath: path) {
            return try String(contentsOfFile: path, encoding: .utf8)
        }
        throw BenchError("migrate: cannot find the v1 fixture \(fixture) (set CHRONICLE_BENCH_V1_FIXTURE)")
    }

    /// The dump's statements without its data rows: kept are the schema, `chronicle_meta`'s rows,
    /// the `sqlite_schema` rows that declare the FTS5 tables, and the FTS5 shadow tables' rows.
    static func v1Statements(_ dump: String) -> [String] {
        var statements: [String] = []
        var current = ""
        for line in dump.split(separator: "\n", omittingEmptySubsequences: false) {
            current += line + "\n"
            guard sqlite3_complete(current) != 0 else { continue }
            let statement = current.trimmingCharacters(in: .whitespacesAndNewlines)
            current = ""
            if statement.hasPrefix("INSERT INTO ") {
                let table = statement.dropFirst("INSERT INTO ".count).prefix { $0 != " " && $0 != "(" }
                    .trimmingCharacters(in: CharacterSet(charactersIn: "\"'"))
                guard table == "chronicle_meta" || table == "sqlite_schema" || table.contains("_fts_") else { continue }
            }
            statements.append(statement)
        }
        return statements
    }

    /// Builds the v1 store and returns the schema fingerprint its metadata carries (v1's, from the fixture).
    func buildV1Store(at path: String) throws -> String {
        for suffix in ["", "-wal", "-shm", ".backup-v1"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        let statements = Self.v1Statements(try Self.fixtureText())
        let libraryID = benchLibraryID(seed: seed)
        let deviceID = SplitMix64(seed: seed ^ 0x0001_DE71).uuidValue
        do {
            let db = try RawDatabase(path: path)
            try db.exec(statements.joined(separator: "\n"))
        }
        let db = try RawDatabase(path: path)   // reopened: the FTS5 tables were declared through writable_schema
        // v1's own FTS5 tables (the current schema has others).
        for row in try db.rows("SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%USING fts5%' ORDER BY name") {
            let fts = ProjectionSchema.quoted(row[0] ?? "")
            try db.exec("INSERT INTO \(fts)(\(fts)) VALUES ('delete-all')")
        }
        let meta: [(String, Value)] = [("library_id", .text(libraryID.lowercased)), ("device_id", .text(deviceID.lowercased)),
                                       ("cursor", .integer(Int64(ops))), ("last_device_seq", .integer(0))]
        for (key, value) in meta { try db.run("UPDATE chronicle_meta SET value = ?2 WHERE key = ?1", [.text(key), value]) }
        let check = try db.rows("SELECT key, value FROM chronicle_meta WHERE key IN ('format_version', 'schema_version', 'schema_fingerprint') ORDER BY key")
        let values = Dictionary(uniqueKeysWithValues: check.map { ($0[0] ?? "", $0[1] ?? "") })
        guard values["format_version"] == "1", values["schema_version"] == "1", let fingerprint = values["schema_fingerprint"],
              fingerprint != Schema.readItLater.fingerprint else {
            throw BenchError("migrate: the fixture's metadata is not v1's: \(values)")
        }

        progress("migrate: building a v1 store of \(formatCount(Double(ops))) ops (plain SQL inserts into v1's chronicle_log)…")
        let insert = try db.prepare(LogRow.insertSQL)
        var workload = ConfirmedWorkload(seed: seed, total: ops, libraryID: libraryID, vocabulary: vocabulary)
        var throttle = Throttle()
        while !workload.isDone {
            try db.exec("BEGIN IMMEDIATE")
            for _ in 0..<10 where !workload.isDone {
                for op in workload.nextBatch(10_000) { try db.run(insert, LogRow.arguments(op)) }
            }
            try db.exec("COMMIT")
            if throttle.ready() { progress("migrate: \(formatCount(Double(workload.produced)))/\(formatCount(Double(ops))) ops in the v1 store") }
        }
        try db.exec("PRAGMA wal_checkpoint(TRUNCATE)")
        return fingerprint
    }

    // MARK: - Child process

    /// `chronicle-bench _migrate STORE`: `DeviceStore.migrate(at:)`, timed step by step; then
    /// (untimed) the migrated store's digest and counts.
    static func migrateChild(path: String) throws -> String {
        let plan = try DeviceStore.migrationPlan(at: path)
        guard plan.fromFormat == 1, plan.fromSchemaVersion == 1, plan.rebuildsProjection else {
            throw BenchError("migrate: \(path) is not a v1 store needing a rebuild: \(plan.steps)")
        }
        let start = procStatusKilobytes("VmHWM") ?? 0
        var steps: [(String, Double)] = []
        let t0 = nowNanoseconds()
        var last = t0
        try DeviceStore.migrate(at: path) { _, what in
            let now = nowNanoseconds()
            steps.append((what, Double(now - last) / 1e9))
            last = now
        }
        let seconds = Double(nowNanoseconds() - t0) / 1e9
        let peak = procStatusKilobytes("VmHWM") ?? 0
        let store = try DeviceStore.open(at: path)
        // The rebuild left the phrase indexes to the background: complete before the next child times a rebuild.
        try completePhraseIndexes(store, label: "migrate child")
        let status = try store.status()
        return JSON.object([
            ("seconds", .number(seconds)), ("vmhwm_kb", .int(Int64(peak))), ("start_vmhwm_kb", .int(Int64(start))),
            ("steps", .array(steps.map { .array([.string($0.0), .number($0.1)]) })),
            ("digest", .string(try store.digest())), ("unreadable_ops", .int(Int64(try store.unreadableOps().count))),
            ("confirmed_ops", .int(status.confirmedOps)), ("format_version", .int(status.formatVersion)),
        ]).rendered
    }
}
