import ChronicleCore
import ChronicleStore
import Foundation

extension Command {
    static let maintenanceCommands: [Command] = [
        Command(name: "rebuild", summary: "Drop every projection table and search index and replay the log.",
                usage: "chronicle rebuild [--verify]",
                details: """
                    One transaction: readers see the old tables until it commits; if interrupted, nothing changes.
                    --verify compares the state digest before and after and fails (exit 1) on any difference.
                    """) { args, ctx in
            let check = args.flag("verify")
            try args.finish(usage: "chronicle rebuild [--verify]")
            let store = try ctx.store()
            let before = check ? try store.digest() : nil
            let bar = ProgressBar("Rebuilding")
            let report = try store.rebuild { bar.update($0, $1) }
            bar.finish()
            let matches = before.map { $0 == report.digest } ?? true
            if ctx.output.json {
                var object: [String: Any] = ["confirmed_ops": report.confirmedReplayed, "pending_ops": report.pendingReplayed,
                                             "seconds": report.seconds, "digest": report.digest]
                if let before { object["digest_before"] = before; object["verified"] = matches }
                ctx.output.emit(object)
            } else {
                let rate = report.seconds > 0 ? Int(Double(report.confirmedReplayed + Int64(report.pendingReplayed)) / report.seconds) : 0
                ctx.output.line("Rebuilt from \(report.confirmedReplayed) confirmed and \(report.pendingReplayed) pending ops in \(String(format: "%.2f", report.seconds)) s (\(rate) ops/s).")
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
        Command(name: "verify", summary: "Check the store: SQLite integrity, FTS5 indexes, log invariants, digest against a replay.",
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
