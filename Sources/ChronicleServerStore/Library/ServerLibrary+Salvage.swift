import ChronicleCore
import ChronicleStore
import Foundation

/// What `ServerLibrary.salvage` kept of a damaged library file, and what it could not read.
public struct LibrarySalvageReport: Sendable {
    /// The library's own tables (the log, sealed segments and op ids, snapshots, refusals) as
    /// they were copied.
    public var tables: [SalvageReport.Table]
    /// The last seq the damaged file was seen to hold (its log's or sealed history's end, where
    /// that could be read).
    public var headBefore: Int64
    /// The last seq kept: the history up to its first op that could not be read. Devices that
    /// synced past it push their own ops it lost again, as after a restore from a backup.
    public var headKept: Int64
    /// Sealed segments and snapshots past the kept history, dropped.
    public var segmentsDropped: Int
    public var snapshotsDropped: Int
    /// Refusals kept: the answers to ops the server did not take, given before the kept head.
    public var refusalsKept: Int
    /// Refusals dropped: given after the kept head, or unreadable. A repeat of such an op is
    /// answered anew.
    public var refusalsDropped: Int
    /// Devices the salvaged library knows the last answered deviceSeq of: read from the damaged
    /// file where its history is whole, or else worked out again from what was kept.
    public var devices: Int
    /// The ids of ops sealed before the snapshot the library starts from could not be read, and
    /// cannot be made again (their segments were dropped past the retention horizon): a device
    /// that pushes one of those ops again would have it taken as new.
    public var oldOpIDsLost: Bool
    /// The server's own ops past the kept history that could still be read, described (seq,
    /// type, entity, payload): no device pushes them again, so what they did (a plan change, an
    /// article's parsed text) is undone unless the operator does it again.
    public var serverOpsLost: [String] = []
    /// The new file's incarnation: devices compare their history with it op by op.
    public var incarnation: UUID
    /// Where the damaged file (and its WAL) now are; empty after a dry run.
    public var damagedPath: String
    /// The salvaged library's state digest, its projection rebuilt from what was kept.
    public var digest: String
    public var seconds: Double

    /// Nothing was lost: every row of every table was read, and the history is whole.
    public var lostNothing: Bool {
        tables.allSatisfy { !$0.incomplete || $0.madeAgain } && headKept == headBefore
            && refusalsDropped == 0 && !oldOpIDsLost
    }
}

extension ServerLibrary {
    /// Keeps everything that can still be read of a damaged library file (answered with
    /// `library_damaged`), in a new one, as `DeviceStore.salvage` does for a device's store.
    ///
    /// The library's own tables are copied range by range around the pages SQLite cannot read.
    /// Its history is kept up to its first op that could not be read (sealed segments checked
    /// link by link, then the log without a gap); what came after is dropped, as a restore from a
    /// backup taken at that moment would drop it. Refusals given after that point are dropped,
    /// each device's last answered deviceSeq is worked out again from what was kept, and the
    /// file takes a new incarnation: devices that synced past the kept head find that out
    /// (`cursor_ahead`) and push their own ops the server lost again. Ops whose only copy was on
    /// the server (authored by it, or by a device that is gone) are lost.
    ///
    /// The projection is rebuilt from the kept history and the new file must pass `verify` (SQLite's
    /// integrity, the segment chain, a log without gaps, a replay's digest) before the damaged file (with its WAL)
    /// is renamed to `<path>.damaged-<time>` and the new one put in its place; if anything fails
    /// before, the damaged file is left as it was. Run it with the server stopped.
    ///
    /// `dryRun`: everything but the last step; the new file is deleted.
    public static func salvage(at path: String, libraryID: UUID, schema: Schema, clock: any ChronicleClock = SystemClock(),
                               dryRun: Bool = false, progress: ((String) -> Void)? = nil) throws -> LibrarySalvageReport {
        let start = DispatchTime.now().uptimeNanoseconds
        var report = LibrarySalvageReport(tables: [], headBefore: 0, headKept: 0, segmentsDropped: 0, snapshotsDropped: 0,
                                          refusalsKept: 0, refusalsDropped: 0, devices: 0, oldOpIDsLost: false,
                                          incarnation: UUID(), damagedPath: "", digest: "", seconds: 0)
        report.damagedPath = try SalvageCopy.salvage(
            path, missing: "No library file at \(path).",
            notSQLite: "\(path) is not a SQLite database, so not a library's file; there is nothing to salvage.", dryRun: dryRun) { salvaged in
            try copyOwnTables(from: path, into: salvaged, libraryID: libraryID, report: &report, progress: progress)
            progress?("Rebuilding the library's projection from what was kept…")
            report.digest = try rebuildAndCheck(salvaged, path: path, libraryID: libraryID, schema: schema, clock: clock, head: report.headKept)
        }
        report.seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        return report
    }

    private static func beyondSalvage(_ path: String, _ what: String, _ error: SQLiteError) -> ChronicleError {
        ChronicleError(.storeDamaged, "\(path) is damaged beyond salvage: \(what) (\(error.message)). It was left as it was. Restore the data directory from a backup (`chronicle server backup`).")
    }

    /// Opens the copy (which rebuilds its projection from the kept history: its fingerprint
    /// matches no schema) and verifies it (`verify`); returns its digest.
    private static func rebuildAndCheck(_ salvaged: String, path: String, libraryID: UUID, schema: Schema, clock: any ChronicleClock,
                                        head: Int64) throws -> String {
        let library = try ServerLibrary.openOrCreate(at: salvaged, libraryID: libraryID, schema: schema, clock: clock)
        let verified = try library.verify()
        var problems = verified.checks.filter { !$0.passed }.map { "\($0.name): \($0.detail)" }
        if library.head != head { problems.append("its head is \(library.head), not \(head)") }
        guard problems.isEmpty else {
            throw ChronicleError(.invariantViolated, "The salvaged library did not pass its checks (\(problems.joined(separator: "; "))); \(path) was left as it was, the attempt is at \(salvaged).")
        }
        return verified.digest
    }

    /// Copies the library's own tables, their indexes and triggers into a new file at
    /// `salvaged`, then cuts the history at its first gap and works out what follows from that.
    private static func copyOwnTables(from path: String, into salvaged: String, libraryID: UUID, report: inout LibrarySalvageReport,
                                      progress: ((String) -> Void)?) throws {
        let (out, objects) = try SalvageCopy.open(path, into: salvaged) { beyondSalvage(path, $0, $1) }
        defer { try? out.execute("DETACH DATABASE damaged") }
        let own = objects.filter { $0.type == "table" && $0.name.hasPrefix("chronicle_") && !SalvageCopy.isDerived($0.name) }
        guard own.contains(where: { $0.name == "chronicle_meta" }), own.contains(where: { $0.name == "chronicle_log" }),
              own.contains(where: { $0.name == "chronicle_devices" }) else {
            throw ChronicleError(.notAChronicleStore, "\(path) is not a server library's file (it has no chronicle_meta, chronicle_log or chronicle_devices table).")
        }
        for table in own { try out.execute(table.sql) }
        do {
            try SalvageCopy.run("INSERT INTO main.chronicle_meta SELECT * FROM damaged.chronicle_meta", in: out)
        } catch let error as SQLiteError where error.isCorrupt {
            throw beyondSalvage(path, "its metadata (library, format, schema) cannot be read", error)
        }
        guard try LogTables.meta("kind", in: out).textValue == "server-library" else {
            throw ChronicleError(.notAChronicleStore, "\(path) is not a server library's file (a device's store is salvaged with `chronicle salvage`).")
        }
        let stored = try LogTables.meta("library_id", in: out).textValue
        guard stored == libraryID.lowercased else {
            throw ChronicleError(.wrongLibrary, "\(path) holds library \(stored ?? "?"), not \(libraryID.lowercased).")
        }
        let format = try LogTables.meta("format_version", in: out).integerValue ?? 0
        guard format <= formatVersion else {
            throw ChronicleError(.futureStoreVersion, "\(path) uses server library format v\(format), but this build reads up to v\(formatVersion). Salvage it with a build that reads it; the file was left untouched.")
        }

        // The log last: where its ends cannot be read, the other tables bound the search.
        var bound: Int64 = 1
        for table in own where table.name != "chronicle_meta" && table.name != "chronicle_log" {
            progress?("Copying \(table.name)…")
            report.tables.append(try copy(table, objects, in: out, bound: bound))
            bound = max(bound, try maxSeq(in: out))
        }
        progress?("Copying chronicle_log…")
        guard let log = own.first(where: { $0.name == "chronicle_log" }) else { return }
        report.tables.append(try copy(log, objects, in: out, bound: bound + 1_048_576))
        report.tables.insert(SalvageReport.Table(name: "chronicle_meta", rowsCopied: try out.scalarInt("SELECT count(*) FROM main.chronicle_meta") ?? 0,
                                                 unreadable: [], lostWhole: false), at: 0)
        let logTable = report.tables.last!
        report.headBefore = max(try maxSeq(in: out), logTable.unreadable.last?.upperBound ?? 0)

        try out.transaction { db in
            try cutHistory(in: db, path: path, libraryID: libraryID, report: &report)
            // A file that matches no schema has its projection rebuilt when it is opened, and a
            // new incarnation has devices compare their history with it op by op.
            try LogTables.setMeta("schema_fingerprint", .text("salvaged"), in: db)
            try LogTables.setMeta(incarnationKey, .text(report.incarnation.lowercased), in: db)
            try db.execute("DELETE FROM chronicle_meta WHERE key = ?1 AND value > ?2", [.text(stateCarriedOverKey), .integer(report.headKept)])
        }
        // The indexes and guard triggers of the copied tables, as the damaged file defined them.
        let names = Set(own.map(\.name))
        for object in objects where (object.type == "index" || object.type == "trigger") && names.contains(object.table) {
            try out.execute(object.sql)
        }
    }

    private static func copy(_ table: SalvageCopy.SchemaObject, _ objects: [SalvageCopy.SchemaObject], in out: Database,
                             bound: Int64) throws -> SalvageReport.Table {
        if table.withoutRowID { return try SalvageCopy.copyWhole(table.name, in: out) }
        let indexes = objects.filter { $0.type == "index" && $0.table == table.name }.map(\.name)
        return try SalvageCopy.copyByRowID(table.name, in: out, indexes: indexes, bound: bound)
    }

    /// The highest seq the copied tables name.
    private static func maxSeq(in db: Database) throws -> Int64 {
        var seq: Int64 = 0
        for (table, column) in [("chronicle_log", "server_seq"), ("chronicle_segments", "last_seq"), ("chronicle_snapshots", "seq"),
                                ("chronicle_sealed_ops", "server_seq")]
        where try db.scalarInt("SELECT count(*) FROM main.sqlite_schema WHERE type = 'table' AND name = ?1", [.text(table)]) == 1 {
            seq = max(seq, try db.scalarInt("SELECT coalesce(max(\(column)), 0) FROM main.\(table)") ?? 0)
        }
        return seq
    }

    /// What a salvage keeps of a library's history: the sealed end and the last seq kept, and
    /// each device's last deviceSeq, time and whether any of its ops are kept.
    private struct KeptHistory {
        var sealedEnd: Int64 = 0
        var kept: Int64 = 0
        var lastOfDevice: [String: Int64] = [:]
        var withOpsKept = Set<String>()
        var lastTime: Int64?

        mutating func saw(device: String, deviceSeq: Int64, time: Int64?) {
            lastOfDevice[device] = max(lastOfDevice[device] ?? 0, deviceSeq)
            withOpsKept.insert(device)
            if let time { lastTime = max(lastTime ?? time, time) }
        }
    }

    /// Keeps the history up to its first op that cannot be read and drops what lies past it
    /// (segments, log rows, sealed op ids, snapshots, later refusals); works out each device's
    /// last answered deviceSeq from what was kept.
    private static func cutHistory(in db: Database, path: String, libraryID: UUID, report: inout LibrarySalvageReport) throws {
        let base = try LogTables.historyBase(in: db)
        var history = try keptHistory(in: db, base: base, libraryID: libraryID, report: &report)
        report.serverOpsLost = try serverOpsPast(history, libraryID: libraryID, in: db)
        try dropPast(history, base: base, path: path, report: &report, in: db)
        _ = try db.query("SELECT device_id, max(device_seq), max(server_time) FROM chronicle_log GROUP BY device_id") { row in
            history.saw(device: row.text(0), deviceSeq: row.int(1), time: row.int(2))
        }
        // Where the history is whole (and every refusal was read), so is what the server answered
        // each device; otherwise the answers are those of the kept history.
        let refusals = report.tables.first { $0.name == "chronicle_rejected_ops" }
        let devices = report.tables.firstIndex { $0.name == "chronicle_devices" }
        guard history.kept < report.headBefore || refusals?.incomplete == true || devices.map({ report.tables[$0].incomplete }) ?? true else {
            report.refusalsKept = Int(try db.scalarInt("SELECT count(*) FROM chronicle_rejected_ops") ?? 0)
            report.devices = Int(try db.scalarInt("SELECT count(*) FROM chronicle_devices") ?? 0)
            return
        }
        try keepRefusals(&history, report: &report, in: db)
        try recordDevices(history, base: base, report: &report, in: db)
        if let devices { report.tables[devices].madeAgain = true }
    }

    /// The sealed segments that can be read from the history's base on, then the log rows that
    /// continue them without a gap. The ids of sealed ops, if their table could not be read, are
    /// made again from the segments kept.
    private static func keptHistory(in db: Database, base: Int64, libraryID: UUID, report: inout LibrarySalvageReport) throws -> KeptHistory {
        let idsLost = report.tables.firstIndex { $0.name == "chronicle_sealed_ops" && $0.incomplete }
        let remember = try idsLost.map { _ in
            try db.statement("INSERT OR IGNORE INTO chronicle_sealed_ops(op_id, server_seq, device_id) VALUES (?1, ?2, ?3)")
        }
        var history = KeptHistory()
        history.sealedEnd = try SalvageCopy.keptSegments(try SalvageCopy.segments(in: db), from: base, libraryID: libraryID, in: db) { decoded in
            for op in decoded.ops {
                let device = op.deviceID.lowercased
                try remember?.execute([.text(op.opID.lowercased), .integer(op.serverSeq ?? 0), .text(device)])
                history.saw(device: device, deviceSeq: op.deviceSeq, time: op.serverTime)
            }
        }
        if let idsLost {
            report.tables[idsLost].madeAgain = base == 0
            report.oldOpIDsLost = base > 0
        }
        history.kept = history.sealedEnd
        for seq in try db.query("SELECT server_seq FROM chronicle_log WHERE server_seq > ?1 ORDER BY server_seq", [.integer(history.sealedEnd)], { $0.int(0) }) {
            guard seq == history.kept + 1 else { break }
            history.kept = seq
        }
        return history
    }

    /// The server's own ops past the kept point that can still be read (plan changes, parsed
    /// text): no device holds them to push again, so the operator is told what they were.
    private static func serverOpsPast(_ history: KeptHistory, libraryID: UUID, in db: Database) throws -> [String] {
        var own: [Op] = []
        for segment in try SalvageCopy.segments(in: db) where segment.first > history.sealedEnd {
            own += SalvageCopy.sound(segment, libraryID: libraryID, in: db)?.ops.filter { $0.deviceID == Op.serverDeviceID && ($0.serverSeq ?? 0) > history.kept } ?? []
        }
        try db.uncached("SELECT \(LogTables.logColumns) FROM chronicle_log WHERE server_seq > ?1 AND device_id = ?2 ORDER BY server_seq")
            .forEach([.integer(history.kept), .text(Op.serverDeviceID.lowercased)]) { row in
                if let op = try? LogTables.logOp(row, libraryID: libraryID) { own.append(op) }
            }
        return own.map { "seq \($0.serverSeq ?? 0): \($0.type) \($0.entityID.lowercased) \(CanonicalJSON.encode($0.payload))" }
    }

    /// Drops the segments, log rows, sealed ids and snapshots past what is kept. A library whose
    /// history starts from a snapshot (a horizon) that cannot be read is beyond salvage.
    private static func dropPast(_ history: KeptHistory, base: Int64, path: String, report: inout LibrarySalvageReport, in db: Database) throws {
        let (kept, sealedEnd) = (history.kept, history.sealedEnd)
        try db.execute("DELETE FROM chronicle_segments WHERE first_seq > ?1", [.integer(sealedEnd)])
        report.segmentsDropped = db.changes
        try db.execute("DELETE FROM chronicle_segment_filters WHERE first_seq > ?1", [.integer(sealedEnd)])
        try db.execute("DELETE FROM chronicle_log WHERE server_seq > ?1 OR server_seq <= ?2", [.integer(kept), .integer(sealedEnd)])
        try db.execute("DELETE FROM chronicle_sealed_ops WHERE server_seq > ?1", [.integer(sealedEnd)])
        try db.execute("DELETE FROM chronicle_snapshots WHERE seq > ?1", [.integer(kept)])
        report.snapshotsDropped = db.changes
        if base > 0, try db.scalarInt("SELECT count(*) FROM chronicle_snapshots WHERE seq >= ?1", [.integer(base)]) == 0 {
            throw ChronicleError(.storeDamaged, "\(path) is damaged beyond salvage: its history starts from a snapshot at seq \(base) (retention horizon), and that snapshot cannot be read. It was left as it was. Restore the data directory from a backup (`chronicle server backup`).")
        }
        report.headKept = kept
    }

    /// Refusals given before the kept head's op was taken: answers keep the server's time
    /// order, and whatever came before that op is kept. With no op kept after the snapshot
    /// the library starts from, there is no time to go by, and none is kept.
    private static func keepRefusals(_ history: inout KeptHistory, report: inout LibrarySalvageReport, in db: Database) throws {
        let before = try db.scalarInt("SELECT count(*) FROM chronicle_rejected_ops") ?? 0
        if history.kept < report.headBefore {
            try db.execute("DELETE FROM chronicle_rejected_ops WHERE ?1 IS NULL OR rejected_at >= ?1", [history.lastTime.map { .integer($0) } ?? .null])
        }
        report.refusalsKept = Int(try db.scalarInt("SELECT count(*) FROM chronicle_rejected_ops") ?? 0)
        report.refusalsDropped = Int(before) - report.refusalsKept
        _ = try db.query("SELECT device_id, max(device_seq) FROM chronicle_rejected_ops GROUP BY device_id") { row in
            history.lastOfDevice[row.text(0)] = max(history.lastOfDevice[row.text(0)] ?? 0, row.int(1))
        }
    }

    /// Each device's last answered deviceSeq, from the kept history and refusals. A number too
    /// high or too low is mended by the device on its next push (`device_seq_reused`,
    /// `device_seq_gap`): no op is lost.
    private static func recordDevices(_ history: KeptHistory, base: Int64, report: inout LibrarySalvageReport, in db: Database) throws {
        var lastOfDevice = history.lastOfDevice
        if base > 0 {
            // A device none of whose ops are kept past the library's snapshot may have ops in the
            // history before it, whose numbers went with that history (a refusal kept says nothing
            // of them): it keeps the damaged file's number. Where that table could not be read, the
            // authors of that history, and the server itself (which numbers its own ops by it and
            // has no way to mend a number too low), get a number above any they can have been
            // answered for: each answer took a seq or left a refusal. A device numbers its next
            // ops after it.
            let old = Dictionary(try db.query("SELECT device_id, last_device_seq FROM chronicle_devices") { ($0.text(0), $0.int(1)) },
                                 uniquingKeysWith: max)
            let above = report.headBefore + Int64(report.refusalsKept)
            let authors = Set(try db.query("SELECT DISTINCT device_id FROM chronicle_sealed_ops WHERE server_seq <= ?1", [.integer(base)]) { $0.text(0) })
                .union([Op.serverDeviceID.lowercased])
            for device in authors.union(old.keys) where !history.withOpsKept.contains(device) {
                lastOfDevice[device] = max(lastOfDevice[device] ?? 0, old[device] ?? (authors.contains(device) ? above : 0))
            }
        }
        try db.execute("DELETE FROM chronicle_devices")
        let insert = try db.statement("INSERT INTO chronicle_devices(device_id, last_device_seq) VALUES (?1, ?2)")
        for (device, last) in lastOfDevice.sorted(by: { $0.key < $1.key }) { try insert.execute([.text(device), .integer(last)]) }
        report.devices = lastOfDevice.count
    }
}
