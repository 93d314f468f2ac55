import ChronicleCore
import ChroniclePostgres
import ChronicleServer
import ChronicleStore
import Foundation
import ChronicleServerStore

extension Command {
    static let maintenanceCommands: [Command] = [compact, migrate, salvage,
        Command(name: "rebuild", summary: "Drop every projection table and search index and replay the log.",
                usage: "chronicle rebuild [--verify] [--from-genesis]",
                details: """
                    One transaction: readers see the old tables until it commits; if interrupted, nothing changes.
                    It starts from the newest snapshot and replays the ops after it; --from-genesis replays every op
                    from the first (sealed segments included). Both give the same state digest.
                    --verify compares the state digest before and after and fails (exit 1) on any difference.
                    Then the phrase indexes (word pairs of titles, article text and transcripts, which answer phrase
                    searches) are filled again, in short transactions: the store is usable meanwhile, and if
                    interrupted the app's next open carries on in the background.
                    """) { args, ctx in
            let check = args.flag("verify")
            let genesis = args.flag("from-genesis")
            try args.finish(usage: "chronicle rebuild [--verify] [--from-genesis]")
            let store = try ctx.store()
            let before = check ? try store.digest() : nil
            let bar = ProgressBar("Rebuilding")
            let report = try store.rebuild(fromGenesis: genesis) { bar.update($0, $1) }
            bar.finish()
            let phrases = ProgressBar("Phrase indexes")
            try store.completePhraseIndexes { phrases.update($0, $1) }
            phrases.finish()
            let matches = before.map { $0 == report.digest } ?? true
            if ctx.output.json {
                var object: [String: Any] = ["confirmed_ops": report.confirmedReplayed, "pending_ops": report.pendingReplayed,
                                             "seconds": report.seconds, "digest": report.digest,
                                             "from_snapshot_seq": report.fromSnapshot as Any? ?? NSNull()]
                if let before { object["digest_before"] = before; object["verified"] = matches }
                ctx.output.emit(object)
            } else {
                let rate = report.seconds > 0 ? Int(Double(report.confirmedReplayed + Int64(report.pendingReplayed)) / report.seconds) : 0
                let start = report.fromSnapshot.map { "the snapshot at seq \($0), then " } ?? ""
                ctx.output.line("Rebuilt from \(start)\(report.confirmedReplayed) confirmed and \(report.pendingReplayed) pending ops in \(String(format: "%.2f", report.seconds)) s (\(rate) ops/s).")
                ctx.output.line("Digest \(report.digest)")
                if let before {
                    ctx.output.line(matches ? "Verified: the digest is the same as before the rebuild."
                                            : "MISMATCH: the digest before the rebuild was \(before).")
                }
            }
            if !matches {
                ctx.output.error("rebuild --verify: the incremental projection (\(before!)) differs from a rebuild (\(report.digest)). [digest_mismatch]")
                return ExitCode.verificationFailed
            }
            return ExitCode.success
        },
        Command(name: "verify", summary: "Check the store: SQLite integrity, FTS5 indexes, log invariants, the projection's indexes, digest against a replay.",
                usage: "chronicle verify",
                details: "Read-only. Exits 1 if any check fails.") { args, ctx in
            try args.finish(usage: "chronicle verify")
            let bar = ProgressBar("Replaying")
            let report = try ctx.store().verify { bar.update($0, $1) }
            bar.finish()
            if ctx.output.json {
                ctx.output.emit(["passed": report.passed, "digest": report.digest,
                                 "checks": report.checks.map { ["name": $0.name, "passed": $0.passed, "detail": $0.detail] }])
            } else {
                for check in report.checks {
                    ctx.output.line("\(check.passed ? "ok  " : "FAIL") \(check.name): \(check.detail)")
                }
                ctx.output.line(report.passed ? "All checks passed." : "Some checks FAILED.")
            }
            return report.passed ? ExitCode.success : ExitCode.verificationFailed
        },
    ]
}

extension Command {
    static let compact = Command(
        name: "compact", summary: "Seal old ops into LZ4 segments, write a snapshot, give space back.",
        usage: "chronicle compact [--keep-ops N] [--keep-days D] [--segment-ops N] [--horizon-days D] [--keep-snapshot] [--unnamed-file-days D] [--dry-run]",
        details: """
            Keeps the newest ops hot in the log (default --keep-ops 10000; --keep-days D keeps ops confirmed in the last
            D days too) and seals everything older into immutable, hash-chained segments (LZ4 frames that `lz4 -d` opens),
            writes a snapshot of the state (at the head, read from the tables, when no op is pending; otherwise at the
            seal point, replayed), and VACUUMs. The store never comes out larger than it went in: where the snapshot
            (which only lets a rebuild start later in the log) would outweigh what sealing saved, it is left out and the
            output says so; --keep-snapshot keeps it anyway. Audit, log and rebuild --from-genesis read the
            segments, so the whole history stays. --horizon-days D (off by default) drops sealed history older than D days
            where a snapshot covers it; audit then says where history begins. Files (`chronicle blob`) no row has named
            for --unnamed-file-days D days (default 30; 0 keeps them) are deleted first: added or fetched more than D
            days ago, and named by no row (rows deleted more than D days ago do not count). --dry-run says what would happen.
            Safe to interrupt at any point: every step is one transaction.
            """) { args, ctx in
        let usage = "chronicle compact [--keep-ops N] [--keep-days D] [--segment-ops N] [--horizon-days D] [--keep-snapshot] [--unnamed-file-days D] [--dry-run]"
        var policy = CompactionPolicy()
        policy.keepsSnapshotThatGrowsFile = args.flag("keep-snapshot")
        func number(_ name: String) throws -> Int64? {
            guard let text = args.option(name) else { return nil }
            guard let n = Int64(text), n >= 0 else { throw ChronicleError(.usage, "--\(name) takes a whole number (got '\(text)').") }
            return n
        }
        if let keep = try number("keep-ops") { policy.keepOps = keep }
        if let days = try number("keep-days") { policy.keepMilliseconds = days * 86_400_000 }
        if let ops = try number("segment-ops") {
            guard ops > 0 else { throw ChronicleError(.usage, "--segment-ops must be at least 1.") }
            policy.segmentOpsMax = Int(ops)
        }
        if let days = try number("horizon-days") { policy.horizonMilliseconds = days * 86_400_000 }
        let unnamedDays = try number("unnamed-file-days") ?? 30
        let dryRun = args.flag("dry-run")
        try args.finish(usage: usage)
        let store = try ctx.store()
        let plan = try store.compactionPlan(policy)
        // The store measures the period on the clock each time came from (`DeviceStore.unnamedBlobs`).
        let (unnamedPeriod, periodOverflow) = unnamedDays.multipliedReportingOverflow(by: 86_400_000)
        let unnamedFor: Int64? = unnamedDays == 0 ? nil : periodOverflow ? Int64.max : unnamedPeriod
        let bytes = { (n: Int64) in ByteCountFormatter.string(fromByteCount: n, countStyle: .file) }
        func filesLine(_ count: Int, _ held: Int64, would: Bool) -> String? {
            guard count > 0 else { return nil }
            return "\(would ? "Delete" : "Deleted") \(count) file\(count == 1 ? "" : "s") (\(bytes(held))) no row has named for \(unnamedDays) days."
        }
        func describe(_ plan: CompactionPlan) -> [String] {
            var lines: [String] = []
            lines.append(plan.opsToSeal == 0 ? "Nothing to seal (sealed through seq \(plan.alreadySealedThrough); \(plan.hotOpsAfter) ops stay hot)."
                : "Seal seqs \(plan.alreadySealedThrough + 1)…\(plan.sealThrough) (\(plan.opsToSeal) ops) into \(plan.segmentsToWrite) segment\(plan.segmentsToWrite == 1 ? "" : "s"); \(plan.hotOpsAfter) ops stay hot.")
            if let at = plan.snapshotAt {
                lines.append((plan.snapshotAtHead
                    ? "Write a snapshot of the state at the head (seq \(plan.sealThrough + plan.hotOpsAfter) now), read from the tables as they are."
                    : "Write a snapshot of the state at seq \(at).")
                    + (policy.keepsSnapshotThatGrowsFile || plan.dropThrough != nil ? "" : " (Left out if it would make the store larger than it is.)"))
            }
            if let drop = plan.snapshotAtDrop { lines.append("Write a snapshot of the state at seq \(drop), where history will begin.") }
            if let drop = plan.dropThrough { lines.append("Drop history through seq \(drop) (older than the horizon; the snapshot covers it).") }
            return lines
        }
        if dryRun {
            let unnamed = try unnamedFor.map { try store.unnamedBlobs(unnamedFor: $0) } ?? []
            let unnamedBytes = unnamed.reduce(0) { $0 + $1.received }
            if ctx.output.json {
                ctx.output.emit(["dry_run": true, "seal_through": plan.sealThrough, "ops_to_seal": plan.opsToSeal,
                                 "unnamed_files": unnamed.count, "unnamed_file_bytes": unnamedBytes,
                                 "segments_to_write": plan.segmentsToWrite, "snapshot_at": plan.snapshotAt as Any? ?? NSNull(),
                                 "snapshot_at_head": plan.snapshotAtHead,
                                 "drop_through": plan.dropThrough as Any? ?? NSNull(), "snapshot_at_drop": plan.snapshotAtDrop as Any? ?? NSNull(),
                                 "hot_ops": plan.hotOpsAfter])
            } else {
                if let line = filesLine(unnamed.count, unnamedBytes, would: true) { ctx.output.line(line) }
                describe(plan).forEach { ctx.output.line($0) }
                ctx.output.line("(dry run: nothing was changed)")
            }
            return ExitCode.success
        }
        // For interruption tests: stop the process right after step N has committed.
        let stopAfter = ProcessInfo.processInfo.environment["CHRONICLE_COMPACT_STOP_AFTER_STEP"].flatMap(Int.init)
        // Files first, so that the compaction's VACUUM gives their space back too (or, with nothing
        // to seal, their own).
        let dropped = try unnamedFor.map { try store.dropUnnamedBlobs(unnamedFor: $0, givesSpaceBack: plan.isEmpty) } ?? (blobs: 0, bytes: 0)
        let bar = ProgressBar("Sealing")
        let report = try store.compact(policy, progress: { bar.update($0, $1) }) { step, _ in
            if step == stopAfter { _exit(137) }
        }
        bar.finish()
        let before = report.fileBytesBefore, after = report.fileBytesAfter
        if ctx.output.json {
            ctx.output.emit(["segments_written": report.segmentsWritten, "ops_sealed": report.opsSealed, "log_bytes_sealed": report.logBytesSealed,
                             "segment_body_bytes": report.segmentBodyBytes, "segment_frame_bytes": report.segmentFrameBytes,
                             "compression_ratio": report.compressionRatio, "snapshot_seq": report.snapshotSeq as Any? ?? NSNull(),
                             "snapshot_bytes": report.snapshotBytes, "snapshot_left_out_bytes": report.snapshotLeftOut as Any? ?? NSNull(),
                             "history_dropped_through": report.historyDroppedThrough as Any? ?? NSNull(),
                             "file_bytes_before": before, "file_bytes_after": after, "seconds": report.seconds,
                             "unnamed_files_deleted": dropped.blobs, "unnamed_file_bytes_deleted": dropped.bytes])
            return ExitCode.success
        }
        if let line = filesLine(dropped.blobs, dropped.bytes, would: false) { ctx.output.line(line) }
        if report.plan.isEmpty {
            ctx.output.line(describe(report.plan).joined(separator: " "))
            return ExitCode.success
        }
        ctx.output.line("Sealed \(report.opsSealed) ops into \(report.segmentsWritten) segment\(report.segmentsWritten == 1 ? "" : "s"): \(bytes(report.logBytesSealed)) of log → \(bytes(report.segmentFrameBytes)) (\(String(format: "%.1f", report.compressionRatio))x).")
        if let at = report.snapshotSeq { ctx.output.line("Snapshot of the state at seq \(at): \(bytes(report.snapshotBytes)).") }
        if let left = report.snapshotLeftOut {
            ctx.output.line("No snapshot kept: its \(bytes(left)) would have left the file larger than before (a rebuild replays from the last snapshot or the start; --keep-snapshot keeps one).")
        }
        if let drop = report.historyDroppedThrough { ctx.output.line("Dropped history through seq \(drop) (horizon).") }
        ctx.output.line("File: \(bytes(before)) → \(bytes(after)) in \(String(format: "%.2f", report.seconds)) s.")
        return ExitCode.success
    }
}

extension Command {
    static let migrate = Command(
        name: "migrate", summary: "Bring a store from an earlier Chronicle version up to this one (says what it will do).",
        usage: "chronicle migrate [--dry-run]",
        details: """
            Opening an older store migrates it anyway; this does it explicitly and tells you each step: a backup first
            (<store>.backup-v<N>, a copy made with SQLite's backup API), each store-format step in its own transaction, then, when the
            app schema changed, the projection rebuilt from the log (older ops are read through upcasters; the log is
            never rewritten). Safe to interrupt: the next run or open carries on. --dry-run only lists the steps.
            A store from a newer Chronicle is refused and left untouched.
            """) { args, ctx in
        let dryRun = args.flag("dry-run")
        try args.finish(usage: "chronicle migrate [--dry-run]")
        let path = try ctx.requirePath()
        let plan = try DeviceStore.migrationPlan(at: path)
        func emit(_ done: Bool) {
            if ctx.output.json {
                ctx.output.emit(["from_format": plan.fromFormat, "to_format": plan.toFormat, "schema": plan.schema,
                                 "from_schema_version": plan.fromSchemaVersion, "to_schema_version": plan.toSchemaVersion,
                                 "backup": plan.backupPath as Any? ?? NSNull(), "steps": plan.steps, "dry_run": !done])
            } else if plan.isEmpty {
                ctx.output.line("Nothing to do: \(path) is at store format v\(plan.toFormat) and schema \(plan.schema) v\(plan.toSchemaVersion).")
            } else {
                ctx.output.line(done ? "Migrated \(path):" : "Migrating \(path) would:")
                for (index, step) in plan.steps.enumerated() { ctx.output.line("  \(index + 1). \(step)") }
                if !done { ctx.output.line("(dry run: nothing was changed)") }
            }
        }
        if dryRun || plan.isEmpty {
            emit(false)
            return ExitCode.success
        }
        // For interruption tests: stop the process right after step N has committed.
        let stopAfter = ProcessInfo.processInfo.environment["CHRONICLE_MIGRATE_STOP_AFTER_STEP"].flatMap(Int.init)
        try DeviceStore.migrate(at: path) { step, _ in if step == stopAfter { _exit(137) } }
        emit(true)
        return ExitCode.success
    }
}

extension Command {
    static let salvage = Command(
        name: "salvage", summary: "Keep what can still be read of a damaged store, in a new one; set the damaged file aside.",
        usage: "chronicle salvage [--dry-run]",
        details: """
            For a store SQLite finds damaged (error store_damaged: a disk, file system or copy broke one of its
            pages). Close the app first: no other process may have the store open.
            It copies the store's own tables (the confirmed log, changes waiting to sync, sealed segments,
            snapshots, refusals, ids) into a new file, leaving out only the rows on pages that cannot be read,
            then rebuilds the tables and search indexes from them and runs every check of `chronicle verify`.
            Only then is the damaged file renamed to PATH.damaged-TIME (with its -wal) and the new store put at PATH;
            if anything fails before, the damaged file is left as it was.
            The confirmed history is kept up to its first op that cannot be read: the next `chronicle sync`
            pulls the rest from the server again. Changes waiting to sync that cannot be read are lost and
            listed by number. Exit 0 when nothing was lost, 1 when something was, 4 when the store cannot be
            salvaged at all (its list of tables or its ids cannot be read): sign in again with a new store.
            --dry-run does all of it but the last step: it says what would be kept and lost, deletes the
            new store and leaves the damaged one where it is.
            """) { args, ctx in
        let dryRun = args.flag("dry-run")
        try args.finish(usage: "chronicle salvage [--dry-run]")
        let path = try ctx.requirePath()
        let json = ctx.output.json
        let report = try DeviceStore.salvage(at: path, dryRun: dryRun) { step in
            if !json { FileHandle.standardError.write(Data("\(step)\n".utf8)) }
        }
        if json {
            ctx.output.emit([
                "lost_nothing": report.lostNothing, "digest": report.digest, "damaged_path": report.damagedPath,
                "confirmed_before": report.confirmedBefore, "confirmed_kept": report.confirmedKept,
                "pending_kept": report.pendingKept, "requeued": report.requeued, "own_numbers_given_up": report.ownNumbersGivenUp, "pending_lost": report.pendingLost.map { [$0.lowerBound, $0.upperBound] },
                "segments_dropped": report.segmentsDropped, "snapshots_dropped": report.snapshotsDropped, "seconds": report.seconds,
                "dry_run": dryRun, "tables": tablesJSON(report.tables),
            ])
        } else {
            printTables(report.tables, ctx)
            if report.confirmedKept < report.confirmedBefore {
                ctx.output.line("Confirmed history kept through seq \(report.confirmedKept) of \(report.confirmedBefore); `chronicle sync` pulls the rest from the server again.")
            } else {
                ctx.output.line("Confirmed history kept whole (through seq \(report.confirmedKept)).")
            }
            if report.requeued > 0 {
                ctx.output.line("\(report.requeued) of this device's own ops past that point are queued again (the server answers those it holds as duplicates).")
            }
            if report.ownNumbersGivenUp > 0 {
                ctx.output.line("\(report.ownNumbersGivenUp) of this device's own confirmed ops past that point could not be read; the next sync pulls back those the server holds.")
            }
            if report.pendingLost.isEmpty {
                ctx.output.line("Changes waiting to sync: all \(report.pendingKept) kept.")
            } else {
                ctx.output.line("Changes waiting to sync: \(report.pendingKept) kept; LOST: numbers \(ranges(report.pendingLost)) could not be read.")
            }
            if report.segmentsDropped + report.snapshotsDropped > 0 {
                ctx.output.line("Dropped past the kept history: \(report.segmentsDropped) sealed segments, \(report.snapshotsDropped) snapshots.")
            }
            ctx.output.line("Rebuilt and verified in \(String(format: "%.2f", report.seconds)) s; digest \(report.digest).")
            if dryRun {
                ctx.output.line("(dry run: nothing was changed; \(path) is still the damaged store)")
            } else {
                ctx.output.line("The damaged file is now \(report.damagedPath).")
            }
        }
        return report.lostNothing ? ExitCode.success : ExitCode.verificationFailed
    }

    /// `chronicle server verify --data DIR (NAME | --all)`: each library's checks, beside a running server.
    static func verifyLibraries(data: String, user: String?, _ ctx: Context) throws -> Int32 {
        try verifyLibraries(try SyncService(dataDirectory: data, limits: .besideARunningServer, maintenance: .off), postgres: nil, user: user, ctx)
    }

    /// `chronicle server verify --postgres CONNINFO (NAME | --all)`: PostgreSQL's checks of each
    /// library, then a scratch replica read from its log and verified as a library file is
    /// (the projection against a replay), beside the running servers.
    static func verifyPostgres(conninfo: String, accounts: Accounts, user: String?, _ ctx: Context) throws -> Int32 {
        let directory = (NSTemporaryDirectory() as NSString).appendingPathComponent("chronicle-verify-\(UUID().lowercased)")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try AccountsPlace.postgresStore(conninfo, replicas: directory, poolSize: 2)
        let service = try SyncService(dataDirectory: directory, limits: .besideARunningServer, maintenance: .off, shared: store, accounts: accounts)
        return try verifyLibraries(service, postgres: store, user: user, ctx)
    }

    /// `chronicle server compact --postgres CONNINFO (NAME | --all)`: each library read into a scratch
    /// replica and compacted there with `policy`, which has PostgreSQL seal as far (and drop history
    /// past the horizon), beside the running servers.
    static func compactPostgres(conninfo: String, accounts: Accounts, user: String?, policy: CompactionPolicy, _ ctx: Context) throws -> Int32 {
        let directory = (NSTemporaryDirectory() as NSString).appendingPathComponent("chronicle-compact-\(UUID().lowercased)")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try AccountsPlace.postgresStore(conninfo, replicas: directory, poolSize: 2)
        let service = try SyncService(dataDirectory: directory, limits: .besideARunningServer, maintenance: .off, shared: store, accounts: accounts)
        var policy = policy
        policy.givesSpaceBack = false   // the scratch replica is thrown away; PostgreSQL's autovacuum reuses what the rows left
        return try compactEach(try libraryTargets(accounts, user: user), all: user == nil, ctx) { target in
            let before = try store.lifecycle(target.library)
            _ = try service.compact(library: target.library, policy: policy)
            let after = try store.lifecycle(target.library)
            let dropped = after.historyBase > before.historyBase
            return (["user": target.name, "library_id": target.library.lowercased, "head": after.head,
                     "ops_sealed": after.sealedThrough - before.sealedThrough, "sealed_through": after.sealedThrough,
                     "history_base": after.historyBase, "history_dropped_through": dropped ? after.historyBase : NSNull()],
                    "Sealed \(after.sealedThrough - before.sealedThrough) ops of \(target.name)'s library in PostgreSQL: "
                    + "its segments reach seq \(after.sealedThrough) of \(after.head)"
                    + (dropped ? "; history through seq \(after.historyBase) dropped" : "")
                    + (after.historyBase > 0 ? "; history begins after seq \(after.historyBase)." : "."))
        }
    }

    /// NAME's library, or every user's (`user` nil), by user name.
    static func libraryTargets(_ accounts: Accounts, user: String?) throws -> [(name: String, library: UUID)] {
        guard let user else { return try accounts.libraries().map { ($0.name, $0.libraryID) } }
        guard let record = try accounts.user(user) else { throw ChronicleError(.unknownEntity, "No user named '\(user)'.") }
        return [(user, record.libraryID)]
    }

    /// `server compact`'s loop: `compact` on each target under a progress bar, its line printed (or
    /// its result gathered for --json). With --all (`all`), one that fails does not stop the rest,
    /// and the command fails at the end naming each.
    static func compactEach(_ targets: [(name: String, library: UUID)], all: Bool, _ ctx: Context,
                            _ compact: ((name: String, library: UUID)) throws -> (result: [String: Any], line: String)) throws -> Int32 {
        let bar = ProgressBar("Compacting", unit: "libraries")
        var results: [[String: Any]] = []
        var failures: [String] = []
        for (done, target) in targets.enumerated() {
            bar.update(Int64(done), Int64(targets.count))
            do {
                let (result, line) = try compact(target)
                results.append(result)
                if !ctx.output.json {
                    bar.finish()
                    ctx.output.line(line)
                }
            } catch {
                guard all else { throw error }
                failures.append("\(target.name): \((error as? ChronicleError)?.message ?? (error as? ProtocolError)?.message ?? "\(error)")")
            }
        }
        bar.finish()
        if ctx.output.json { ctx.output.emit(all ? results as Any : results.first as Any) }
        if !failures.isEmpty {
            throw ChronicleError(.database, "\(failures.count) of \(targets.count) libraries could not be compacted (the others were): \(failures.joined(separator: "; ")).")
        }
        return ExitCode.success
    }

    static func verifyLibraries(_ service: SyncService, postgres: PostgresServerStore?, user: String?, _ ctx: Context) throws -> Int32 {
        // The libraries PostgreSQL has a row for (empty for a data directory).
        let ordered = Set(try (service.accounts.storage as? PostgresAccountsStorage)?.libraries().map(\.id) ?? [])
        let targets = try libraryTargets(service.accounts, user: user)
        var results: [[String: Any]] = []
        var failed: [String] = []
        // With --all, the accounts file too: which library is whose, and the devices' tokens.
        let accounts = user == nil ? service.accounts.verify() : nil
        if let accounts, !ctx.output.json {
            ctx.output.line(postgres == nil ? "The accounts file \(service.accounts.path):" : "The accounts in \(service.accounts.path):")
            ctx.output.line("  \(accounts.passed ? "ok  " : "FAIL") \(accounts.name): \(accounts.detail)")
        }
        for target in targets {
            var report: VerifyReport
            var first: [VerifyCheck] = []   // PostgreSQL's own checks, ahead of the replica's
            do {
                if postgres != nil, !ordered.contains(target.library) {
                    // No row in PostgreSQL: the library never synced, and verifying it would make one.
                    report = VerifyReport(checks: [VerifyCheck(name: "the library is in PostgreSQL", passed: true, detail: "not yet: it has never synced")],
                                          digest: "")
                } else {
                    first = try postgres?.checks(of: target.library) ?? []
                    let bar = ProgressBar("Replaying \(target.name)'s library")
                    var verified = try service.library(target.library).verify { bar.update($0, $1) }
                    bar.finish()
                    verified.checks = first + verified.checks
                    report = verified
                }
            } catch let error as ProtocolError {
                // A library so damaged it does not open (or, from PostgreSQL, cannot be read into a replica): a failed check too.
                let what = postgres == nil ? "the file can be opened" : "the log in PostgreSQL can be read into a replica"
                report = VerifyReport(checks: first + [VerifyCheck(name: what, passed: false, detail: "\(error.message) [\(error.code)]")], digest: "")
            }
            // A lone server's files file beside the library (PostgreSQL keeps its servers' files itself).
            if postgres == nil, let files = ServerBlobFiles(dataDirectory: service.dataDirectory)
                .verify(library: target.library, salvage: "chronicle server salvage --data \(service.dataDirectory) \(target.name) --files") {
                report.checks.append(files)
            }
            if !report.passed { failed.append(target.name) }
            if ctx.output.json {
                results.append(["user": target.name, "library_id": target.library.lowercased, "passed": report.passed, "digest": report.digest,
                                "checks": report.checks.map { ["name": $0.name, "passed": $0.passed, "detail": $0.detail] }])
            } else {
                ctx.output.line("\(target.name)'s library \(target.library.lowercased):")
                for check in report.checks { ctx.output.line("  \(check.passed ? "ok  " : "FAIL") \(check.name): \(check.detail)") }
            }
        }
        let accountsFailed = accounts.map { !$0.passed } ?? false
        if ctx.output.json {
            if let accounts {
                ctx.output.emit([
                    "accounts": ["path": service.accounts.path, "passed": accounts.passed, "detail": accounts.detail],
                    "libraries": results,
                ] as [String: Any])
            } else {
                ctx.output.emit(results.first as Any)
            }
        } else if user == nil {
            var verdict = failed.isEmpty ? "All \(targets.count) libraries passed." : "FAILED: \(failed.joined(separator: ", ")) (\(failed.count) of \(targets.count))."
            if accountsFailed { verdict += " The accounts file FAILED." }
            ctx.output.line(verdict)
        } else {
            ctx.output.line(failed.isEmpty ? "All checks passed." : "Some checks FAILED.")
        }
        return failed.isEmpty && !accountsFailed ? ExitCode.success : ExitCode.verificationFailed
    }

    /// `chronicle server salvage --data DIR NAME [--dry-run]`.
    static func salvageLibrary(data: String, user: String, dryRun: Bool, _ ctx: Context) throws -> Int32 {
        let json = ctx.output.json
        let report = try ServerSalvage.run(dataDirectory: data, user: user, dryRun: dryRun) { step in
            if !json { FileHandle.standardError.write(Data("\(step)\n".utf8)) }
        }
        if json {
            ctx.output.emit([
                "user": user, "lost_nothing": report.lostNothing, "digest": report.digest, "damaged_path": report.damagedPath,
                "head_before": report.headBefore, "head_kept": report.headKept, "incarnation": report.incarnation.lowercased,
                "refusals_kept": report.refusalsKept, "refusals_dropped": report.refusalsDropped, "devices": report.devices,
                "old_op_ids_lost": report.oldOpIDsLost, "server_ops_lost": report.serverOpsLost, "segments_dropped": report.segmentsDropped,
                "snapshots_dropped": report.snapshotsDropped, "seconds": report.seconds, "dry_run": dryRun,
                "tables": tablesJSON(report.tables),
            ])
        } else {
            printTables(report.tables, ctx)
            if report.headKept < report.headBefore {
                ctx.output.line("History kept through seq \(report.headKept) of \(report.headBefore). Devices that synced past it push their own ops again when they next sync; ops only the server held (its own, or from devices that never sync again) are lost.")
            } else {
                ctx.output.line("History kept whole (through seq \(report.headKept)).")
            }
            if !report.serverOpsLost.isEmpty {
                ctx.output.line("The server's own ops past that point, which no device pushes again (do again what still matters, e.g. `chronicle server set-plan`):")
                for op in report.serverOpsLost { ctx.output.line("  \(op)") }
            }
            ctx.output.line("Refusals kept: \(report.refusalsKept)" + (report.refusalsDropped > 0 ? "; \(report.refusalsDropped) dropped (a repeat of those ops is answered anew)." : "."))
            if report.oldOpIDsLost {
                ctx.output.line("The ids of ops before the library's snapshot could not be read: a device that pushes one of those again has it taken as new.")
            }
            if report.segmentsDropped + report.snapshotsDropped > 0 {
                ctx.output.line("Dropped past the kept history: \(report.segmentsDropped) sealed segments, \(report.snapshotsDropped) snapshots.")
            }
            ctx.output.line("Rebuilt and checked in \(String(format: "%.2f", report.seconds)) s; digest \(report.digest); new incarnation \(report.incarnation.lowercased).")
            if dryRun {
                ctx.output.line("(dry run: nothing was changed)")
            } else {
                ctx.output.line("The damaged file is now \(report.damagedPath). Start the server again.")
            }
        }
        return report.lostNothing ? ExitCode.success : ExitCode.verificationFailed
    }

    /// `chronicle server salvage --data DIR NAME --files [--dry-run]`.
    static func salvageFiles(data: String, user: String, dryRun: Bool, _ ctx: Context) throws -> Int32 {
        let json = ctx.output.json
        let report = try ServerSalvage.runFiles(dataDirectory: data, user: user, dryRun: dryRun) { step in
            if !json { FileHandle.standardError.write(Data("\(step)\n".utf8)) }
        }
        if json {
            ctx.output.emit([
                "user": user, "lost_nothing": report.lostNothing, "damaged_path": report.damagedPath, "files_kept": report.filesKept,
                "files_cut_short": report.filesCutShort, "files_dropped": report.filesDropped, "bytes_kept": report.bytesKept,
                "seconds": report.seconds, "dry_run": dryRun, "tables": tablesJSON(report.tables),
            ])
        } else {
            printTables(report.tables, ctx)
            let bytes = ByteCountFormatter.string(fromByteCount: report.bytesKept, countStyle: .file)
            ctx.output.line("Files kept whole: \(report.filesKept) (\(bytes) in all, uploads under way included); kept up to their first unreadable chunk: \(report.filesCutShort); dropped: \(report.filesDropped).")
            if dryRun {
                ctx.output.line("(dry run: nothing was changed)")
            } else {
                ctx.output.line("The library took a new incarnation: when they next sync, devices ask about each file they hold and send the ones the server lacks.")
                ctx.output.line("The damaged file is now \(report.damagedPath). Start the server again.")
            }
        }
        return report.lostNothing ? ExitCode.success : ExitCode.verificationFailed
    }

    /// `chronicle server salvage --data DIR --accounts [--dry-run]`.
    static func salvageAccounts(data: String, dryRun: Bool, _ ctx: Context) throws -> Int32 {
        let report = try ServerSalvage.runAccounts(dataDirectory: data, dryRun: dryRun)
        func giveBack(_ unowned: AccountsSalvageReport.Unowned) -> String {
            let schema = unowned.schemaName.map { " --schema \($0)" } ?? ""
            return "chronicle server add-user --data \(data) \(unowned.formerUser ?? "NAME") --library \(unowned.libraryID.lowercased)\(schema)"
        }
        if ctx.output.json {
            ctx.output.emit([
                "lost_nothing": report.lostNothing, "users_kept": report.usersKept, "devices_kept": report.devicesKept,
                "rows_dropped": report.rowsDropped, "damaged_path": report.damagedPath, "seconds": report.seconds, "dry_run": dryRun,
                "tables": tablesJSON(report.tables),
                "unowned_libraries": report.unowned.map { ["library_id": $0.libraryID.lowercased, "schema": $0.schemaName as Any? ?? NSNull(),
                                                           "former_user": $0.formerUser as Any? ?? NSNull(), "give_back": giveBack($0)] as [String: Any] },
            ])
        } else {
            printTables(report.tables, ctx)
            ctx.output.line("Kept \(report.usersKept) user\(report.usersKept == 1 ? "" : "s") and \(report.devicesKept) device registration\(report.devicesKept == 1 ? "" : "s")"
                            + (report.rowsDropped > 0 ? "; \(report.rowsDropped) row\(report.rowsDropped == 1 ? "" : "s") dropped (an id that does not parse, or a device whose user was not kept)." : "."))
            if !report.lostNothing {
                ctx.output.line("A device whose registration was lost is answered 401 and signs in again (`chronicle login`); its store and queued changes are kept.")
            }
            if !report.unowned.isEmpty {
                ctx.output.line("Libraries no kept user owns (their files are untouched; give each back to its user, with a new password on stdin):")
                for unowned in report.unowned { ctx.output.line("  \(giveBack(unowned))") }
            }
            if dryRun {
                ctx.output.line("(dry run: nothing was changed)")
            } else {
                ctx.output.line("The damaged file is now \(report.damagedPath). Start the server again.")
            }
        }
        return report.lostNothing ? ExitCode.success : ExitCode.verificationFailed
    }

    static func ranges(_ list: [ClosedRange<Int64>]) -> String {
        list.map { $0.lowerBound == $0.upperBound ? "\($0.lowerBound)" : "\($0.lowerBound)…\($0.upperBound)" }.joined(separator: ", ")
    }

    static func tablesJSON(_ tables: [SalvageReport.Table]) -> [[String: Any]] {
        tables.map { ["name": $0.name, "rows_copied": $0.rowsCopied, "lost_whole": $0.lostWhole, "made_again": $0.madeAgain,
                      "unreadable_keys": $0.unreadableKeys,
                      "unreadable": $0.unreadable.map { [$0.lowerBound, $0.upperBound] }] as [String: Any] }
    }

    static func printTables(_ tables: [SalvageReport.Table], _ ctx: Context) {
        for table in tables {
            let again = table.madeAgain ? ", made again from what was kept" : ""
            let lost = table.lostWhole ? (table.madeAgain ? "; could not be read, made again from what was kept" : "; could not be read, nothing kept")
                : !table.unreadable.isEmpty ? "; unreadable row ids \(ranges(table.unreadable))\(again)"
                : !table.unreadableKeys.isEmpty ? "; unreadable keys \(table.unreadableKeys.joined(separator: ", "))\(again)" : ""
            ctx.output.line("  \(table.name): \(table.rowsCopied) rows\(lost)")
        }
    }
}
