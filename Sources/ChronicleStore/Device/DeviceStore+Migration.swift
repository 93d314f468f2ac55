import ChronicleCore
import Foundation

/// What opening an older store will do to it (`chronicle migrate --dry-run`).
public struct MigrationPlan: Sendable, Equatable {
    public var path: String
    public var fromFormat: Int64
    public var toFormat: Int64
    public var schema: String
    public var fromSchemaVersion: Int64
    public var toSchemaVersion: Int
    /// The schema file changed: the projection is rebuilt from the log.
    public var rebuildsProjection: Bool
    /// Where the backup goes (made first, when the format changes).
    public var backupPath: String?
    /// One line per step, in order.
    public var steps: [String]

    public var isEmpty: Bool { steps.isEmpty }
}

extension DeviceStore {
    /// The steps that would bring the store at `path` to this build's versions; reads only.
    public static func migrationPlan(at path: String, schema given: Schema? = nil) throws -> MigrationPlan {
        guard FileManager.default.fileExists(atPath: path) else {
            throw ChronicleError(.storeMissing, "No store at \(path).")
        }
        var options = Database.Options()
        options.readOnly = true
        let meta: [String: Value]
        do {
            let probe = try Database(path: path, options: options)
            meta = Dictionary(uniqueKeysWithValues: try probe.query("SELECT key, value FROM chronicle_meta") { ($0.text(0), $0.value(1)) })
        } catch {
            throw ChronicleError(.notAChronicleStore, "\(path) is not a Chronicle store.")
        }
        let format = meta["format_version"]?.integerValue ?? 0
        if format > StoreFormat.currentVersion {
            throw ChronicleError(.futureStoreVersion, "\(path) uses store format v\(format), but this build reads up to v\(StoreFormat.currentVersion). Update Chronicle to open it; the store was left untouched.")
        }
        let schema = try schemaOfStore(at: path, named: meta["schema_name"]?.textValue, given: given)
        let schemaName = schema.name
        let schemaVersion = meta["schema_version"]?.integerValue ?? 0
        if schemaVersion > Int64(schema.version) {
            throw ChronicleError(.futureStoreVersion, "\(path) uses schema \(schemaName) v\(schemaVersion), but this build knows up to v\(schema.version). Update Chronicle to open it; the store was left untouched.")
        }
        var steps: [String] = []
        let backup = format < StoreFormat.currentVersion ? "\(path).backup-v\(format)" : nil
        if let backup { steps.append("back up the store to \(backup)") }
        for version in format..<StoreFormat.currentVersion {
            steps.append("store format v\(version) → v\(version + 1): " + (formatStepSummary[version] ?? "schema change"))
        }
        let rebuild = meta["schema_fingerprint"]?.textValue != schema.fingerprint
        if rebuild {
            steps.append("schema \(schemaName) v\(schemaVersion) → v\(schema.version): rebuild the projection from the log, reading older ops through upcasters (the log is not rewritten)")
        }
        return MigrationPlan(path: path, fromFormat: format, toFormat: StoreFormat.currentVersion, schema: schemaName,
                             fromSchemaVersion: schemaVersion, toSchemaVersion: schema.version, rebuildsProjection: rebuild,
                             backupPath: backup, steps: steps)
    }

    static let formatStepSummary: [Int64: String] = [
        1: "sync bookkeeping (rejected ops and their notices, acknowledged device seq)",
        2: "the log's lifecycle (sealed segments, sealed op ids, snapshots)",
        3: "snapshot frames stored last in their row, so a downloaded one streams in; entity filters beside sealed segments",
        4: "sealed op ids kept as 16 bytes with their seq (chronicle_sealed_ids), about a third of their size as text",
        5: "phrase indexes (word pairs) beside the search indexes over documents, made when the store opens and filled in the background",
        6: "phrase indexes beside each entity's own search index too (titles, names), made when the store opens and filled in the background",
        7: "blobs (large files named by their SHA-256), queued for upload or fetched, in chunks",
        8: "the confirmed log kept in blocks of encoded ops (a row per batch, not per op); confirmed op ids and this device's own confirmed ops kept apart",
    ]

    /// Migrates the store at `path` to this build's versions, step by step: a backup first,
    /// each format step in its own transaction, then the projection rebuilt from the log if
    /// the schema changed. Killed at any point, the next open and upkeep (or run) carries on
    /// from the last completed step with nothing lost. `afterStep` runs after each step commits.
    @discardableResult
    public static func migrate(at path: String, schema: Schema? = nil,
                               afterStep: ((Int, String) throws -> Void)? = nil) throws -> MigrationPlan {
        let plan = try migrationPlan(at: path, schema: schema)
        guard !plan.isEmpty else { return plan }
        var step = 0
        if plan.fromFormat < plan.toFormat {
            let db = try Database(path: path, options: { var o = Database.Options(); o.create = false; return o }())
            try migrateFormat(db, from: plan.fromFormat) { what in
                step += 1
                try afterStep?(step, what)
            }
        }
        if plan.rebuildsProjection {
            // The rebuild records the schema in its own transaction.
            try DeviceStore.open(at: path, schema: schema).performUpkeep()
            step += 1
            try afterStep?(step, "rebuilt the projection")
        }
        return plan
    }

    /// Brings an older store format up to the current one: a backup first
    /// (`<path>.backup-v<N>`, through SQLite's backup API), then one transaction per step, so an
    /// interrupted migration leaves the store at the last completed step.
    static func migrateFormat(_ db: Database, from format: Int64, afterStep: ((String) throws -> Void)? = nil) throws {
        let backup = "\(db.path).backup-v\(format)"
        if !FileManager.default.fileExists(atPath: backup) {
            // Into a temporary name first, then renamed: a backup killed half-way is never mistaken for a whole one.
            let partial = backup + ".partial"
            try? FileManager.default.removeItem(atPath: partial)
            try db.backup(to: partial)
            try FileManager.default.moveItem(atPath: partial, toPath: backup)
            try afterStep?("backed up")
        }
        for version in format..<StoreFormat.currentVersion {
            try db.transaction { db in
                try StoreFormat.migrate(db, from: version)
                try LogTables.setMeta("format_version", .integer(version + 1), in: db)
            }
            try afterStep?("format v\(version + 1)")
        }
    }
}
