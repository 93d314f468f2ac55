import ChronicleCore
import CSQLite
import Foundation

/// One check `verify` ran.
public struct VerifyCheck: Sendable {
    public var name: String
    public var passed: Bool
    public var detail: String

    public init(name: String, passed: Bool, detail: String) {
        self.name = name
        self.passed = passed
        self.detail = detail
    }
}

/// What `verify` checked, each check with its outcome, and the state digest.
public struct VerifyReport: Sendable {
    public var checks: [VerifyCheck]
    public var digest: String

    public init(checks: [VerifyCheck], digest: String) {
        self.checks = checks
        self.digest = digest
    }
    public var passed: Bool { checks.allSatisfy(\.passed) }
}

extension DeviceStore {
    /// A SHA-256 over the canonical projection rows: every projection table in
    /// schema order, rows by id, every column with its SQLite type. Two stores
    /// with the same digest show the same state.
    public func digest() throws -> String {
        try read { db in try ProjectionTables.digest(projection, in: db) }
    }

    /// Checks everything the store promises: SQLite's own integrity, every FTS5
    /// index against its content, the log's invariants, and that the projection
    /// equals a fresh replay of the log (digest).
    ///
    /// A damaged file is a failed check, not an error: SQLite's integrity check says what it
    /// found, and a check that meets an unreadable page ends the report there (`chronicle
    /// salvage` keeps what can still be read).
    public func verify(progress: ProgressHandler? = nil) throws -> VerifyReport {
        var checks: [VerifyCheck] = []
        do {
            return try verify(into: &checks, progress: progress)
        } catch let error as SQLiteError where error.isCorrupt {
            checks.append(VerifyCheck(name: "the store can be read", passed: false,
                                      detail: "SQLite cannot read part of the file (\(error.message)); `chronicle salvage` keeps what can still be read"))
            return VerifyReport(checks: checks, digest: "")
        }
    }

    private func verify(into checks: inout [VerifyCheck], progress: ProgressHandler?) throws -> VerifyReport {
        let integrity = try read { db in try db.query("PRAGMA integrity_check") { $0.text(0) } }
        checks.append(VerifyCheck(name: "sqlite integrity_check", passed: integrity == ["ok"], detail: integrity.prefix(5).joined(separator: "; ")))
        // Indexes a bulk apply left to be rebuilt (recorded as stale) are said to be so, not checked:
        // the next write that indexes rows, or the store's upkeep, rebuilds them.
        let stale = try needsSearchIndexRebuild()
        checks += searchIndexChecks(stale: stale)
        checks.append(try read { db in try logInvariantsCheck(in: db) })
        checks.append(try projectionIndexCheck(stale: stale))
        checks.append(try verifyBlobs())
        let current = try digest()
        let replayed = try replayDigest(progress: progress)
        checks.append(VerifyCheck(name: "digest equals a replay of the log", passed: current == replayed,
                                  detail: current == replayed ? current : "projection \(current) but replay gives \(replayed)"))
        return VerifyReport(checks: checks, digest: current)
    }

    /// FTS5's integrity-check of each search index against its content view (live rows only;
    /// premium text only on premium), and each phrase index's check; stale ones are said to be so.
    private func searchIndexChecks(stale: Bool) -> [VerifyCheck] {
        guard !stale else {
            return projection.searchIndexes.map { _, index in
                VerifyCheck(name: "fts5 integrity-check \(index.index)", passed: true,
                            detail: "stale: a bulk apply left it to be rebuilt; the next write or the store's upkeep rebuilds it")
            }
        }
        var checks: [VerifyCheck] = []
        for (_, index) in projection.searchIndexes {
            // FTS5's integrity-check is an INSERT, so it runs on the writer and is rolled back.
            let fts = ProjectionSchema.quoted(index.index)
            var detail = "index matches its content"
            var passed = true
            do {
                try writer.withLock { db in
                    try db.transaction { db in try db.execute("INSERT INTO \(fts)(\(fts), rank) VALUES ('integrity-check', 1)") }
                }
            } catch {
                passed = false
                detail = "\(error)"
            }
            checks.append(VerifyCheck(name: "fts5 integrity-check \(index.index)", passed: passed, detail: detail))
        }
        return checks + phraseIndexes.map(verifyPhraseIndex)
    }

    /// The log's invariants: segments and blocks whole and in order, op ids kept for exactly the
    /// hot ops, this device's confirmed ops accounted for, the outbox's numbers, the guard triggers.
    private func logInvariantsCheck(in db: Database) throws -> VerifyCheck {
        let sealedUpTo = try LogTables.sealedUpTo(in: db)
        let cursor = try LogTables.meta("cursor", in: db).integerValue ?? -1
        var problems = try LogTables.verifySegments(in: db, libraryID: libraryID, rowLog: false)
        let blocks = try Self.verifyBlocks(in: db, libraryID: libraryID, deviceID: deviceID, cursor: cursor)
        problems += blocks.problems
        let hot = blocks.hotOps
        // Every hot op's id is kept (an op applies at most once), and no id past the cursor.
        let ids = try db.query("SELECT count(*), coalesce(max(server_seq), 0) FROM chronicle_op_ids WHERE server_seq > ?1",
                               [.integer(sealedUpTo)]) { ($0.int(0), $0.int(1)) }[0]
        if ids.0 != hot || ids.1 > cursor {
            problems.append("the confirmed op ids after seq \(sealedUpTo) (\(ids.0), up to \(ids.1)) are not the log's \(hot) ops")
        }
        let own = try db.scalarInt("SELECT count(*) FROM chronicle_own_confirmed WHERE server_seq > ?1", [.integer(sealedUpTo)]) ?? 0
        if own != blocks.ownOps {
            problems.append("\(own) of this device's ops are recorded as confirmed after seq \(sealedUpTo), but the log holds \(blocks.ownOps)")
        }
        if try db.scalarInt("SELECT count(*) FROM chronicle_own_confirmed WHERE server_seq > ?1 OR server_seq <= ?2",
                            [.integer(cursor), .integer(try LogTables.historyBase(in: db))]) != 0 {
            problems.append("this device's confirmed ops are recorded past the cursor or before the history base")
        }
        let (queued, outboxProblems) = try outboxCheck(sealedUpTo: sealedUpTo, in: db)
        problems += outboxProblems
        problems += try missingGuardTriggers(in: db).map { "guard trigger \($0) is missing" }
        let sealed = try db.scalarInt("SELECT coalesce(sum(op_count), 0) FROM chronicle_segments") ?? 0
        let detail = problems.isEmpty
            ? "\(hot + sealed) confirmed ops (\(sealed) sealed), gap-free; \(queued) pending, gap-free"
            : problems.joined(separator: "; ")
        return VerifyCheck(name: "log invariants", passed: problems.isEmpty, detail: detail)
    }

    /// The outbox's ops and what is wrong with their numbers, or a confirmed op still queued.
    private func outboxCheck(sealedUpTo: Int64, in db: Database) throws -> (queued: Int64, problems: [String]) {
        var problems: [String] = []
        let outbox = try db.query("SELECT count(*), coalesce(min(device_seq), 0), coalesce(max(device_seq), 0) FROM chronicle_outbox") { ($0.int(0), $0.int(1), $0.int(2)) }[0]
        let lastDeviceSeq = try LogTables.meta("last_device_seq", in: db).integerValue ?? -1
        // Queued ops run from the oldest one to the last device seq. Every number in that run is
        // accounted for: queued; refused (ops the server rejected left the outbox from anywhere
        // in the run, and are kept in chronicle_rejected); given up when the queue was numbered
        // again (`renumberOutbox`, `closeOutboxGap`, a rewind past lost history); or confirmed
        // as this device's op (refused ops queued again after the server lost their refusals
        // sit ahead of ops confirmed since). A number may be accounted for twice (a refused op
        // queued again, or taken after all); none may be missing.
        // After starting from a snapshot, queued ops the snapshot already held leave the outbox from
        // anywhere in the run too (recorded as sealed, without their device seq): then only order is checked.
        let startedFromSnapshot = try LogTables.historyBase(in: db) > 0
        if outbox.0 > 0 && (startedFromSnapshot || lastDeviceSeq < outbox.1) {
            if outbox.2 > lastDeviceSeq {
                problems.append("outbox device_seq has gaps (queued up to \(outbox.2), past the last device seq \(lastDeviceSeq))")
            }
        } else if outbox.0 > 0 {
            let run = outbox.1...lastDeviceSeq
            let covered = try Self.accountedDeviceSeqs(in: run, in: db)
            let missing = run.filter { !covered.contains($0) }
            if let first = missing.first {
                problems.append("outbox device_seq has gaps (\(missing.count) of \(outbox.1)…\(lastDeviceSeq) neither queued, refused, given up nor confirmed, from \(first); \(outbox.0) queued)")
            }
        }
        // (Another device's op with the same id is not: this device's op is refused as an
        // op_id_conflict when it is pushed, and a pull may bring the other one first.)
        if try db.scalarInt("SELECT count(*) FROM chronicle_outbox o JOIN chronicle_own_confirmed c ON c.op_id = o.op_id AND c.server_seq > ?1",
                            [.integer(sealedUpTo)]) != 0 {
            problems.append("a confirmed op is still in the outbox")
        }
        return (outbox.0, problems)
    }

    /// The triggers that keep the log append-only and the outbox gap-free, where one is missing.
    private func missingGuardTriggers(in db: Database) throws -> [String] {
        let triggers = Set(try db.query("SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'chronicle_%'") { $0.text(0) })
        return ["chronicle_log_blocks_immutable", "chronicle_log_blocks_leave_only_sealed", "chronicle_log_blocks_gap_free", "chronicle_outbox_once",
                "chronicle_outbox_gap_free", "chronicle_outbox_leaves_when_settled", "chronicle_rejected_kept",
                "chronicle_segments_contiguous", "chronicle_segments_immutable"].filter { !triggers.contains($0) }
    }

    /// The projection's read indexes in place. A bulk apply drops them and builds them at its
    /// close (or the store's upkeep does).
    private func projectionIndexCheck(stale: Bool) throws -> VerifyCheck {
        let missing = try read { db in
            try projection.readIndexes.filter { index in
                try db.scalarInt("SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND name = ?1", [.text(index.name)]) != 1
            }.map(\.name)
        }
        return VerifyCheck(
            name: "projection indexes", passed: stale || missing.isEmpty,
            detail: stale && !missing.isEmpty ? "\(missing.count) set aside by a bulk apply; its close or the store's upkeep builds them"
                : missing.isEmpty ? "\(projection.readIndexes.count) in place" : "missing: " + missing.joined(separator: ", "))
    }

    /// The digest a full replay of the log (and outbox) gives, computed in a
    /// scratch database (a private temporary file: a large library's state need not
    /// fit in memory); the store is not touched.
    public func replayDigest(upTo: Int64? = nil, progress: ProgressHandler? = nil) throws -> String {
        try read { source in
            let scratch = try ProjectionTables.scratchProjection(projection, onDisk: true)
            try scratch.execute("PRAGMA cache_size = -\(Self.bulkCacheKilobytes)")
            // From the first op; from the horizon snapshot only where history was dropped. One
            // transaction: op by op, each commit would be a sync of the scratch file.
            let base = try LogTables.replayBase(in: source, projection, preferLatest: false)
            try scratch.transaction { scratch in
                if let base { try ProjectionTables.load(storedAt: base, from: source, into: scratch, projection, libraryID: libraryID) }
                _ = try ProjectionTables.replay(from: source, into: scratch, materializer, projection, after: base ?? 0, upTo: upTo,
                                    includePending: upTo == nil, progress: progress)
            }
            return try ProjectionTables.digest(projection, in: scratch)
        }
    }

}

extension DeviceStore {
    /// A phrase index holds exactly its word index's rows up to its watermark, each with the same
    /// length in tokens (its `_docsize` rows equal), and passes FTS5's integrity-check.
    func verifyPhraseIndex(_ phrase: PhraseIndex) -> VerifyCheck {
        let name = "phrase index \(phrase.table)"
        let pairs = ProjectionSchema.quoted(phrase.table + "_docsize"), words = ProjectionSchema.quoted(phrase.index.index + "_docsize")
        return writer.withLock { db in
            do {
                return try db.transaction { db in
                    let through = try phrase.watermark(in: db)
                    let table = ProjectionSchema.quoted(phrase.table)
                    try db.execute("INSERT INTO \(table)(\(table)) VALUES ('integrity-check')")
                    let differing = try db.scalarInt("""
                        SELECT (SELECT count(*) FROM (SELECT id, sz FROM \(pairs) EXCEPT SELECT id, sz FROM \(words) WHERE id <= ?1))
                             + (SELECT count(*) FROM (SELECT id, sz FROM \(words) WHERE id <= ?1 EXCEPT SELECT id, sz FROM \(pairs)))
                        """, [.integer(through)]) ?? 0
                    let state = through == PhraseIndex.complete ? "complete" : "filled up to row \(through)"
                    return VerifyCheck(name: name, passed: differing == 0,
                                       detail: differing == 0 ? "\(state); rows and lengths match the word index"
                                           : "\(state); \(differing) rows differ from the word index (a rebuild makes it again)")
                }
            } catch {
                return VerifyCheck(name: name, passed: false, detail: "\(error)")
            }
        }
    }
}
