import Foundation

extension MigrationBenchmark.Result {
    /// The migrate phase's table rows, JSON object and notes; returns whether every target was met.
    func report(rows: inout [TableRow], json: inout [(String, JSON)], notes: inout [String]) -> Bool {
        let m = migrate, r = rebuild
        let pass = ratio <= 1.5
        let backup = m.steps.first { $0.0.hasPrefix("backed up") }?.1 ?? 0
        let formatSteps = m.steps.filter { $0.0.hasPrefix("format") }.reduce(0) { $0 + $1.1 }
        // The steps name the versions they reach ("format v2", …): "v1 -> v2 -> … -> vN".
        let formatPath = (["v1"] + m.steps.filter { $0.0.hasPrefix("format ") }.map { String($0.0.dropFirst("format ".count)) })
            .joined(separator: " -> ")
        let projection = m.steps.first { $0.0.hasPrefix("rebuilt") }?.1 ?? 0
        let peak = Double(m.peakKilobytes) / 1024, basePeak = Double(r.peakKilobytes) / 1024
        let countsPass = m.unreadable == 0 && m.confirmedOps == Int64(ops)
        rows.append(TableRow(measurement: "migrate: \(formatCount(Double(ops)))-op store from format v1 / schema v1 (base: rebuild())",
                             chronicle: formatFixed(m.seconds, 2) + " s", baseline: formatFixed(r.seconds, 2) + " s", ratio: ratioText(ratio),
                             target: "<= 1.5x rebuild", verdict: verdict(pass)))
        rows.append(TableRow(measurement: "migrate: backup step, VACUUM INTO (base: rebuild())", chronicle: formatFixed(backup, 2) + " s",
                             baseline: formatFixed(r.seconds, 2) + " s", ratio: ratioText(backup / r.seconds), target: "", verdict: ""))
        rows.append(TableRow(measurement: "migrate: peak RSS (VmHWM) (base: rebuild())", chronicle: formatFixed(peak, 1) + " MB",
                             baseline: formatFixed(basePeak, 1) + " MB", ratio: ratioText(peak / basePeak), target: "", verdict: ""))
        rows.append(TableRow(measurement: "migrate: digest = rebuild, every op read", chronicle: digestMatches && countsPass ? "yes" : "NO",
                             baseline: "", ratio: "", target: "same state", verdict: verdict(digestMatches && countsPass)))
        notes.append("migrate: the v1 store (store format 1, readitlater schema v1, fingerprint \(fixtureFingerprint.prefix(12))… from the fixture's chronicle_meta) is the fixture's DDL with the workload's \(formatCount(Double(ops))) ops (v1 formats) inserted into chronicle_log with plain SQL in \(formatFixed(buildSeconds, 1)) s; its projection tables and FTS5 indexes are EMPTY (v1's shape cannot be materialized by this build), so the migration drops nothing of size and its backup holds the log alone: v1 store \(v1StoreBytes / 1_048_576) MB, backup \(backupBytes / 1_048_576) MB, migrated store \(migratedStoreBytes / 1_048_576) MB.")
        notes.append("migrate: DeviceStore.migrate(at:) in a child process, \(formatFixed(m.seconds, 2)) s = backup (VACUUM INTO) \(formatFixed(backup, 2)) s + format steps \(formatPath) \(formatFixed(formatSteps, 3)) s + projection rebuild through upcasters (DeviceStore.open; rebuild and its closing digest) \(formatFixed(projection, 2)) s; baseline rebuild() of the migrated store (same log, same schema) in its own child process \(formatFixed(r.seconds, 2)) s (of which the transaction \(formatFixed(r.transactionSeconds ?? .nan, 2)) s); without the backup the migration is \(ratioText((m.seconds - backup) / r.seconds)) the rebuild. Peak RSS before the work: migrate \(m.startKilobytes / 1024) MB, rebuild \(r.startKilobytes / 1024) MB. Ops set aside as unreadable: \(m.unreadable); confirmed ops after: \(formatCount(Double(m.confirmedOps))).")
        json.append(("migrate", .object([
            ("ops", .int(Int64(ops))), ("build_seconds", .number(buildSeconds)), ("v1_store_bytes", .int(v1StoreBytes)),
            ("backup_bytes", .int(backupBytes)), ("migrated_store_bytes", .int(migratedStoreBytes)),
            ("v1_schema_fingerprint", .string(fixtureFingerprint)), ("v1_projection_empty", .bool(true)),
            ("migrate", .object([("seconds", .number(m.seconds)), ("peak_rss_mb", .number(peak)), ("start_rss_mb", .number(Double(m.startKilobytes) / 1024)),
                                 ("steps", .object(m.steps.map { ($0.0, .number($0.1)) })), ("unreadable_ops", .int(Int64(m.unreadable))),
                                 ("confirmed_ops", .int(m.confirmedOps))])),
            ("rebuild", .object([("seconds", .number(r.seconds)), ("transaction_seconds", r.transactionSeconds.map(JSON.number) ?? .null),
                                 ("peak_rss_mb", .number(basePeak)), ("start_rss_mb", .number(Double(r.startKilobytes) / 1024))])),
            ("ratio", .number(ratio)), ("digest_matches_rebuild", .bool(digestMatches)),
            ("targets", .object([("ratio_max", .number(1.5))])), ("pass", .bool(pass && digestMatches && countsPass)),
        ])))
        return pass && digestMatches && countsPass
    }
}
