import ChronicleCore
import Foundation

/// What `DeviceStore.salvage` kept of a damaged store, and what it could not read.
public struct SalvageReport: Sendable {
    /// One of the store's own tables (the log, the outbox, …) as it was copied.
    public struct Table: Sendable, Equatable {
        public var name: String
        public var rowsCopied: Int64
        /// Row ids (the log's server seqs, the outbox's device seqs, …) in pages SQLite could not
        /// read. A range may hold ids no row had.
        public var unreadable: [ClosedRange<Int64>]
        /// A table keyed otherwise (`WITHOUT ROWID`) none of whose rows could be read.
        public var lostWhole: Bool
        /// Made again from what was kept instead (the ids of sealed ops, from the sealed segments).
        public var madeAgain = false
        /// Ranges of keys of a table keyed otherwise (`WITHOUT ROWID`) that could not be read,
        /// written as the ranges of keys they cover; their rows are lost, the rest were copied.
        public var unreadableKeys: [String] = []

        /// Rows of it could not be read (a range of row ids, of keys, or the whole table).
        public var incomplete: Bool { !unreadable.isEmpty || lostWhole || !unreadableKeys.isEmpty }

        package init(name: String, rowsCopied: Int64, unreadable: [ClosedRange<Int64>], lostWhole: Bool,
                     madeAgain: Bool = false, unreadableKeys: [String] = []) {
            (self.name, self.rowsCopied, self.unreadable, self.lostWhole) = (name, rowsCopied, unreadable, lostWhole)
            (self.madeAgain, self.unreadableKeys) = (madeAgain, unreadableKeys)
        }
    }

    public var tables: [Table]
    /// The last server seq the damaged store had confirmed (its cursor).
    public var confirmedBefore: Int64
    /// The last server seq kept: the confirmed history up to the first op that could not be read.
    /// The next sync pulls the ops after it from the server again.
    public var confirmedKept: Int64
    /// Ops of this device still waiting to sync, kept.
    public var pendingKept: Int
    /// This device's own ops found in readable history past the kept point, queued again (as a
    /// rewind does): should the server have lost one (restored from a backup), this may be its
    /// last copy; the server answers those it holds as duplicates. Counted in `pendingKept`.
    public var requeued = 0
    /// The device seqs of waiting ops that could not be read: those changes are lost, and their
    /// numbers are recorded as given up.
    public var pendingLost: [ClosedRange<Int64>]
    /// This device's own confirmed ops past the kept point whose only copy here could not be read,
    /// numbered among the ops still queued (an op queued again ahead of them): their numbers are
    /// recorded as given up, as a rewind gives up the numbers of ops it no longer holds. The next
    /// sync pulls back those the server holds; any the server lost too are gone.
    public var ownNumbersGivenUp = 0
    /// Sealed segments and snapshots past the kept history, dropped.
    public var segmentsDropped: Int
    public var snapshotsDropped: Int
    /// Where the damaged file (and its WAL) now are.
    public var damagedPath: String
    /// The salvaged store's state digest, after a rebuild from what was kept and a full verify.
    public var digest: String
    public var seconds: Double

    /// Nothing was lost: every row of every table was read, and the history is whole.
    public var lostNothing: Bool {
        tables.allSatisfy { !$0.incomplete || $0.madeAgain } && confirmedKept == confirmedBefore && pendingLost.isEmpty
    }
}

extension DeviceStore {
    /// Keeps everything that can still be read of a damaged store (`store_damaged`), in a new one.
    ///
    /// The store's own tables (the confirmed log, the outbox, sealed segments, snapshots, refusals,
    /// metadata) are copied into a new file, range by range; a range SQLite cannot read is split
    /// until only the unreadable rows are left out. The confirmed history is kept up to its first
    /// op that could not be read (the next sync pulls the rest from the server again), queued
    /// changes that could not be read are reported and their numbers given up, and the projection
    /// and search indexes, which are derived, are rebuilt from what was kept and verified. Only then
    /// is the damaged file (with its WAL) renamed to `<path>.damaged-<time>` and the new one put in
    /// its place; if anything fails before, the damaged file is left as it was.
    ///
    /// Run it with no other process using the store. Refused, with the store untouched, when
    /// even the store's list of tables or its metadata cannot be read, or when the history it
    /// started from (a snapshot past a retention horizon) is unreadable.
    ///
    /// `dryRun`: everything but the last step; the new store is deleted and the damaged one left
    /// where it is (`damagedPath` is empty), so the report says what a salvage would keep.
    public static func salvage(at path: String, schema: Schema? = nil, clock: any ChronicleClock = SystemClock(),
                               dryRun: Bool = false, progress: ((String) -> Void)? = nil) throws -> SalvageReport {
        let start = DispatchTime.now().uptimeNanoseconds
        var report = SalvageReport(tables: [], confirmedBefore: 0, confirmedKept: 0, pendingKept: 0, pendingLost: [],
                                   segmentsDropped: 0, snapshotsDropped: 0, damagedPath: "", digest: "", seconds: 0)
        report.damagedPath = try SalvageCopy.salvage(
            path, missing: "No store at \(path).",
            notSQLite: "\(path) is not a SQLite database, so not a Chronicle store; there is nothing to salvage.", dryRun: dryRun) { salvaged in
            try copyOwnTables(from: path, into: salvaged, report: &report, progress: progress)
            progress?("Rebuilding the tables and search indexes from what was kept…")
            report.digest = try rebuildAndVerify(salvaged, path: path, schema: schema, clock: clock, progress: progress)
        }
        report.seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        return report
    }

    /// Opens the copy and rebuilds its projection (its upkeep), completes its phrase indexes and
    /// verifies it; returns its digest. The store is closed when this returns, but for threads
    /// of its own that may still be letting go of it (`closeIntoOneFile` waits for them).
    private static func rebuildAndVerify(_ salvaged: String, path: String, schema: Schema?, clock: any ChronicleClock,
                                         progress: ((String) -> Void)?) throws -> String {
        let store = try DeviceStore.open(at: salvaged, schema: schema, clock: clock)
        try store.performUpkeep()
        progress?("Filling the phrase indexes…")
        try store.completePhraseIndexes()
        _ = store.waitForPhraseIndexing()
        progress?("Verifying the new store (SQLite and FTS5 integrity, log invariants, digest against a replay)…")
        let verified = try store.verify()
        guard verified.passed else {
            let failed = verified.checks.filter { !$0.passed }.map { "\($0.name): \($0.detail)" }.joined(separator: "; ")
            throw ChronicleError(.invariantViolated, "The salvaged store did not pass verify (\(failed)); \(path) was left as it was, the attempt is at \(salvaged).")
        }
        return verified.digest
    }

    /// Copies the store's own tables, their indexes and triggers into a new file at `salvaged`,
    /// then cuts the confirmed history at its first gap and records what was lost.
    private static func copyOwnTables(from path: String, into salvaged: String, report: inout SalvageReport,
                                      progress: ((String) -> Void)?) throws {
        let (out, objects) = try SalvageCopy.open(path, into: salvaged) { beyondSalvage(path, $0, $1) }
        defer { try? out.execute("DETACH DATABASE damaged") }
        let own = objects.filter { $0.type == "table" && $0.name.hasPrefix("chronicle_") && !SalvageCopy.isDerived($0.name) }
        guard own.contains(where: { $0.name == "chronicle_meta" }),
              own.contains(where: { $0.name == "chronicle_log_blocks" || $0.name == "chronicle_log" }) else {
            throw ChronicleError(.notAChronicleStore, "\(path) is not a Chronicle store (it has no chronicle_meta table or confirmed log).")
        }
        for table in own { try out.execute(table.sql) }

        // The metadata first: without it (the library, the device, the format) nothing else means anything.
        do {
            try SalvageCopy.run("INSERT INTO main.chronicle_meta SELECT * FROM damaged.chronicle_meta", in: out)
        } catch let error as SQLiteError where error.isCorrupt {
            throw beyondSalvage(path, "its metadata (library, device, format) cannot be read", error)
        }
        let format = try LogTables.meta("format_version", in: out).integerValue ?? 0
        if format > StoreFormat.currentVersion {
            throw ChronicleError(.futureStoreVersion, "\(path) uses store format v\(format), but this build of Chronicle reads up to v\(StoreFormat.currentVersion). Salvage it with a build that reads it; the store was left untouched.")
        }
        report.confirmedBefore = try LogTables.meta("cursor", in: out).integerValue ?? 0

        // Every row id of the store's own tables is a server seq (the log, segments, snapshots) or a
        // device seq (the outbox, refusals): none lies past the cursor or the last device seq. That
        // bounds the search where a table's last page cannot be read.
        let bound = max(report.confirmedBefore, try LogTables.meta("last_device_seq", in: out).integerValue ?? 0, 1)
        for table in own where table.name != "chronicle_meta" {
            progress?("Copying \(table.name)…")
            let indexes = objects.filter { $0.type == "index" && $0.table == table.name }.map(\.name)
            report.tables.append(table.withoutRowID ? try SalvageCopy.copyWhole(table.name, in: out)
                                                    : try SalvageCopy.copyByRowID(table.name, in: out, indexes: indexes, bound: bound))
        }
        report.tables.insert(SalvageReport.Table(name: "chronicle_meta", rowsCopied: try out.scalarInt("SELECT count(*) FROM main.chronicle_meta") ?? 0,
                                                 unreadable: [], lostWhole: false), at: 0)

        try out.transaction { db in
            try cutHistory(in: db, path: path, report: &report)
            // Queued changes that could not be read: their numbers are given up, as a renumbering
            // gives them up, so the ops queued after them still go out (`closeOutboxGap`).
            let last = try LogTables.meta("last_device_seq", in: db).integerValue ?? 0
            let lost = report.tables.first { $0.name == "chronicle_outbox" }?.unreadable ?? []
            report.pendingLost = lost.compactMap { range in range.lowerBound <= last ? range.lowerBound...min(range.upperBound, last) : nil }
            if !report.pendingLost.isEmpty {
                var skips = try deviceSeqSkips(in: db)
                skips += report.pendingLost.map { [$0.lowerBound, $0.upperBound] }
                try setDeviceSeqSkips(skips, in: db)
            }
            // Own confirmed ops on pages that could not be read, whose numbers lie inside the queue's
            // run (an op queued again ahead of them after the server lost data): nothing here accounts
            // for those numbers any more (seed 1433 of the damage soak).
            report.ownNumbersGivenUp = try giveUpUnheldNumbers(in: db)
            report.pendingKept = Int(try db.scalarInt("SELECT count(*) FROM chronicle_outbox") ?? 0)
            // The projection is made again from what was kept: whatever the damaged store said of
            // its derived tables (search indexes left stale, phrase indexes filled so far, the
            // log's entity index set aside before format v9) no longer holds. A fingerprint that
            // matches no schema has the open rebuild the projection.
            try db.execute("DELETE FROM chronicle_meta WHERE key IN ('search_stale', 'log_entity_index_aside') OR key LIKE 'phrase_index_through:%'")
            try LogTables.setMeta("schema_fingerprint", .text("salvaged"), in: db)
        }
        // The indexes and guard triggers of the copied tables, as the damaged store defined them.
        let names = Set(own.map(\.name))
        for object in objects where (object.type == "index" || object.type == "trigger") && names.contains(object.table) {
            try out.execute(object.sql)
        }
    }

    private static func beyondSalvage(_ path: String, _ what: String, _ error: SQLiteError) -> ChronicleError {
        ChronicleError(.storeDamaged, "\(path) is damaged beyond salvage: \(what) (\(error.message)). It was left as it was. Sign this device in again with a new store; the server holds everything it confirmed.")
    }

    /// Keeps the confirmed history up to its first op that cannot be read: sealed segments that
    /// follow each other and whose bytes match their digests, then log blocks (log rows, before
    /// format v9) without a gap. What lies past that point (segments, blocks, op ids, snapshots)
    /// is dropped, and the cursor moves back to it: the next sync pulls the rest from the server
    /// again. This device's own ops past it are queued again.
    private static func cutHistory(in db: Database, path: String, report: inout SalvageReport) throws {
        var cut = try HistoryCut(in: db, report: &report)
        try cut.keepLog(in: db)
        try cut.collectOwnInLaterSegments(in: db)
        try cut.dropPast(in: db, path: path, report: &report)
        try queueAgain(cut.own, report: &report, in: db)
    }

    /// What a salvage keeps of a device's confirmed history, worked out step by step.
    private struct HistoryCut {
        let libraryID: UUID?
        let deviceID: UUID?
        /// Where the store's history begins (a snapshot it started from, or a horizon).
        let base: Int64
        /// Store format v9's log blocks (else the log's rows, before it).
        let blocks: Bool
        let segments: [SalvageCopy.StoredSegment]
        /// Re-records confirmed op ids where their table could not be read.
        private let remember: Statement?
        /// The last seq of the sealed segments kept, and of the history kept.
        private(set) var sealedEnd: Int64 = 0
        private(set) var kept: Int64 = 0
        /// This device's ops kept, from which `chronicle_own_confirmed` is made again (v9).
        private(set) var ownKept: [Op] = []
        /// This device's ops past the kept point that can still be read: queued again.
        private(set) var own: [Op] = []

        /// Keeps the sealed segments that can be read and follow each other from the base.
        init(in db: Database, report: inout SalvageReport) throws {
            libraryID = try LogTables.meta("library_id", in: db).textValue.flatMap(UUID.init(uuidString:))
            deviceID = try LogTables.meta("device_id", in: db).textValue.flatMap(UUID.init(uuidString:))
            base = try LogTables.historyBase(in: db)
            blocks = try db.scalarInt("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'chronicle_log_blocks'") == 1
            // The ids of confirmed ops, if their table could not be read, are made again from the
            // segments and blocks kept (all of them, unless the store started from a snapshot, whose
            // ops' ids are gone).
            let idsTable = blocks ? "chronicle_op_ids" : "chronicle_sealed_ids"
            let idsLost = report.tables.firstIndex { $0.name == idsTable && $0.incomplete }
            remember = try idsLost.map { _ in try db.statement("INSERT OR IGNORE INTO \(idsTable)(op_id, server_seq) VALUES (?1, ?2)") }
            segments = try SalvageCopy.segments(in: db)
            var ownKept: [Op] = []
            let (remember, deviceID) = (remember, deviceID)
            sealedEnd = try SalvageCopy.keptSegments(segments, from: base, libraryID: libraryID, in: db) { decoded in
                for op in decoded.ops { try remember?.execute([.null, .integer(op.serverSeq ?? 0)], uuid: op.opID, at: 1) }
                ownKept += decoded.ops.filter { $0.deviceID == deviceID }
            }
            self.ownKept = ownKept
            kept = sealedEnd
            if let idsLost, base == 0 { report.tables[idsLost].madeAgain = true }
        }

        /// Keeps the log after the segments: blocks that decode and follow each other (the first
        /// may start inside the sealed prefix), or rows without a gap.
        mutating func keepLog(in db: Database) throws {
            guard blocks else { return try keepRows(in: db) }
            let stored = try db.query("SELECT first_seq, last_seq FROM chronicle_log_blocks WHERE last_seq > ?1 ORDER BY first_seq",
                                      [.integer(sealedEnd)]) { ($0.int(0), $0.int(1)) }
            var cut = false
            for (first, last) in stored {
                let ops = libraryID.flatMap { library in
                    (try? LogTables.blockBody(firstSeq: first, in: db)).flatMap { $0 }.flatMap { try? LogTables.decodeBlock($0, firstSeq: first, libraryID: library) }
                }
                guard let ops, ops.last?.serverSeq == last else { cut = true; continue }
                if !cut, first <= kept + 1 {
                    for op in ops where op.serverSeq! > kept { try remember?.execute([.null, .integer(op.serverSeq!)], uuid: op.opID, at: 1) }
                    ownKept += ops.filter { $0.deviceID == deviceID && $0.serverSeq! > kept }
                    kept = last
                } else {
                    cut = true
                    own += ops.filter { $0.deviceID == deviceID && $0.serverSeq! > kept }
                }
            }
        }

        /// Before format v9: the log's rows without a gap, and this device's readable rows past them.
        private mutating func keepRows(in db: Database) throws {
            let logSeqs = try db.query("SELECT server_seq FROM chronicle_log WHERE server_seq > ?1 ORDER BY server_seq", [.integer(sealedEnd)]) { $0.int(0) }
            for seq in logSeqs {
                guard seq == kept + 1 else { break }
                kept = seq
            }
            guard let deviceID, let libraryID else { return }
            var own: [Op] = []
            try db.uncached("SELECT \(LogTables.logColumns) FROM chronicle_log WHERE server_seq > ?1 ORDER BY server_seq").forEach([.integer(kept)]) { row in
                if let op = try? LogTables.logOp(row, libraryID: libraryID), op.deviceID == deviceID { own.append(op) }
            }
            self.own += own
        }

        /// This device's ops in readable segments past the kept point whose bytes match their digest.
        mutating func collectOwnInLaterSegments(in db: Database) throws {
            guard let deviceID, let libraryID else { return }
            for segment in segments where segment.first > sealedEnd {
                guard let decoded = SalvageCopy.sound(segment, libraryID: libraryID, in: db) else { continue }
                own += decoded.ops.filter { $0.deviceID == deviceID && ($0.serverSeq ?? 0) > kept }
            }
        }

        /// Drops what lies past the kept point and moves the cursor back to it. A store that
        /// started from a snapshot that cannot be read is beyond salvage.
        func dropPast(in db: Database, path: String, report: inout SalvageReport) throws {
            report.segmentsDropped = Int(try db.scalarInt("SELECT count(*) FROM chronicle_segments WHERE first_seq > ?1", [.integer(sealedEnd)]) ?? 0)
            try db.execute("DELETE FROM chronicle_segments WHERE first_seq > ?1", [.integer(sealedEnd)])
            try db.execute("DELETE FROM chronicle_segment_filters WHERE first_seq > ?1", [.integer(sealedEnd)])
            if blocks {
                try db.execute("DELETE FROM chronicle_log_blocks WHERE first_seq > ?1 OR last_seq <= ?2", [.integer(kept), .integer(sealedEnd)])
                try db.execute("DELETE FROM chronicle_op_ids WHERE server_seq > ?1", [.integer(kept)])
                try db.execute("DELETE FROM chronicle_own_confirmed")
                let record = try db.statement("INSERT OR IGNORE INTO chronicle_own_confirmed(server_seq, device_seq, op_id) VALUES (?1, ?2, ?3)")
                for op in ownKept { try record.execute([.integer(op.serverSeq!), .integer(op.deviceSeq), .text(op.opID.lowercased)]) }
            } else {
                try db.execute("DELETE FROM chronicle_log WHERE server_seq > ?1 OR server_seq <= ?2", [.integer(kept), .integer(sealedEnd)])
            }
            for table in ["chronicle_sealed_ids", "chronicle_sealed_ops"]
            where try db.scalarInt("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?1", [.text(table)]) == 1 {
                try db.execute("DELETE FROM \(table) WHERE server_seq > ?1", [.integer(sealedEnd)])
            }
            report.snapshotsDropped = Int(try db.scalarInt("SELECT count(*) FROM chronicle_snapshots WHERE seq > ?1", [.integer(kept)]) ?? 0)
            try db.execute("DELETE FROM chronicle_snapshots WHERE seq > ?1", [.integer(kept)])
            if base > 0, try db.scalarInt("SELECT count(*) FROM chronicle_snapshots WHERE seq >= ?1", [.integer(base)]) == 0 {
                throw ChronicleError(.storeDamaged, "\(path) is damaged beyond salvage: it started from a snapshot at seq \(base), and that snapshot cannot be read. Sign this device in again with a new store; the server holds everything it confirmed.")
            }
            try LogTables.setMeta("cursor", .integer(kept), in: db)
            report.confirmedKept = kept
        }
    }

    /// Own ops back in the queue with their ids, numbers and content, ahead of the ops queued
    /// since, as `rewind(toAgreedSeq:)` puts them (the guard triggers are not made yet here).
    private static func queueAgain(_ own: [Op], report: inout SalvageReport, in db: Database) throws {
        report.requeued = try queueAgain(own, in: db)
        guard report.requeued > 0 else { return }
        // Every queued op is pushed again: the answers say which ones the server holds.
        try LogTables.setMeta("acked_device_seq", .integer(0), in: db)
    }
}
