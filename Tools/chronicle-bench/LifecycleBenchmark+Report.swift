import Foundation
import ChronicleServerStore

extension LifecycleBenchmark.Result {
    /// The lifecycle phase's table rows, JSON object and notes; returns whether every target was met.
    func report(rows: inout [TableRow], json: inout [(String, JSON)], notes: inout [String]) -> Bool {
        let c = compaction, b = bootstrap, r = c.report, s = c.snapshot
        var a = c.audits
        func mb(_ bytes: Int64) -> String { formatFixed(Double(bytes) / 1_048_576, 1) + " MB" }
        func times(_ value: Double) -> String { formatFixed(value, 2) + "x" }

        // Compaction of the device store.
        let sealPass = c.sealRatio >= 0.5
        rows.append(TableRow(measurement: "lifecycle: seal \(formatCount(Double(r.opsSealed))) ops, MB/s of bodies (base: lz4 -1 CLI)",
                             chronicle: formatFixed(c.sealMBPerSecond, 1) + " MB/s", baseline: formatFixed(c.lz4ToolMBPerSecond, 1) + " MB/s",
                             ratio: ratioText(c.sealRatio), target: ">= 0.5x lz4", verdict: verdict(sealPass)))
        for (name, floor) in [("the same store, raw SQLite", c.sealingFloor), ("an ideal row log, raw SQLite", c.idealLogFloor),
                              ("a log in blocks of \(LifecycleBenchmark.blockLogOps) ops, a segment a commit", c.blockLogFloor),
                              ("a log in blocks of \(LifecycleBenchmark.blockLogOps) ops, ten segments a commit", c.blockLogGroupedFloor)] {
            let ratio = c.mbPerSecond(floor) / c.lz4ToolMBPerSecond
            rows.append(TableRow(measurement: "lifecycle: sealing's floor, \(name), two cores (base: lz4 -1 CLI)",
                                 chronicle: formatFixed(c.mbPerSecond(floor), 1) + " MB/s", baseline: formatFixed(c.lz4ToolMBPerSecond, 1) + " MB/s",
                                 ratio: ratioText(ratio), target: ">= 0.5x lz4", verdict: ratio >= 0.5 ? "below target" : "above target"))
        }
        let grew = c.defaultFileBytesAfter > r.fileBytesBefore
        rows.append(TableRow(measurement: "lifecycle: store file after a device's compaction (base: before)", chronicle: mb(c.defaultFileBytesAfter),
                             baseline: mb(r.fileBytesBefore), ratio: ratioText(Double(c.defaultFileBytesAfter) / Double(r.fileBytesBefore)),
                             target: "<= before", verdict: grew ? "MISSED" : "ok"))
        rows.append(TableRow(measurement: "lifecycle: store file after compaction, snapshot kept as asked (base: before)", chronicle: mb(c.fileBytesAfter),
                             baseline: mb(c.fileBytesBefore), ratio: ratioText(Double(c.fileBytesAfter) / Double(c.fileBytesBefore)),
                             target: "", verdict: ""))
        let toolSegmentRatio = Double(c.bodyBytes) / Double(c.lz4ToolOutputBytes)
        let segmentRatio = Double(r.segmentBodyBytes) / Double(r.segmentFrameBytes)
        rows.append(TableRow(measurement: "lifecycle: segments, log bytes / frame bytes", chronicle: times(r.compressionRatio), baseline: "",
                             ratio: "", target: "", verdict: ""))
        rows.append(TableRow(measurement: "lifecycle: segments, body / frame bytes (base: lz4 -1 CLI)", chronicle: times(segmentRatio),
                             baseline: times(toolSegmentRatio), ratio: ratioText(segmentRatio / toolSegmentRatio), target: "", verdict: ""))
        let snapshotRatio = Double(s.bodyBytes) / Double(s.frameBytes), toolSnapshotRatio = Double(s.bodyBytes) / Double(s.lz4ToolBytes)
        rows.append(TableRow(measurement: "lifecycle: snapshot, body / frame bytes (base: lz4 -1 CLI)", chronicle: times(snapshotRatio),
                             baseline: times(toolSnapshotRatio), ratio: ratioText(snapshotRatio / toolSnapshotRatio), target: "", verdict: ""))

        // Audits.
        let p50 = a.after.percentileMilliseconds(0.5), p99 = a.after.percentileMilliseconds(0.99)
        let b50 = a.before.percentileMilliseconds(0.5), b99 = a.before.percentileMilliseconds(0.99)
        rows.append(TableRow(measurement: "lifecycle: audit of one article, p50 (base: before compaction)", chronicle: millisecondsText(p50),
                             baseline: millisecondsText(b50), ratio: ratioText(p50 / b50), target: "", verdict: ""))
        rows.append(TableRow(measurement: "lifecycle: audit of one article, p99 (base: before compaction)", chronicle: millisecondsText(p99),
                             baseline: millisecondsText(b99), ratio: ratioText(p99 / b99), target: "", verdict: ""))
        rows.append(TableRow(measurement: "lifecycle: audit after = before (entries, state)", chronicle: a.mismatches == 0 ? "yes" : "NO (\(a.mismatches))",
                             baseline: "", ratio: "", target: "same history", verdict: verdict(a.mismatches == 0)))

        // Bootstrap.
        let f = b.fromSnapshot, g = b.fullLog, e = b.fromFrame
        let timeRatio = f.seconds / g.seconds
        let bootstrapPass = f.seconds <= 5 && b.speedup >= 10
        let peak = Double(f.peakKilobytes) / 1024, basePeak = Double(g.peakKilobytes) / 1024
        let memoryPass = peak <= 150
        let digestPass = f.digest == b.serverDigest && g.digest == b.serverDigest && e.digest == b.serverDigest
            && f.bootstrappedAt == b.snapshotSeq && e.bootstrappedAt == b.snapshotSeq && f.startedFromImage && !e.startedFromImage
        rows.append(TableRow(measurement: "lifecycle: new device, \(formatCount(Double(b.ops)))-op library from snapshot (its start image), HTTP (base: full log)",
                             chronicle: formatFixed(f.seconds, 2) + " s", baseline: formatFixed(g.seconds, 2) + " s", ratio: ratioText(timeRatio),
                             target: "<= 5 s and <= 0.1x (10x faster)", verdict: verdict(bootstrapPass)))
        rows.append(TableRow(measurement: "lifecycle: new device, the same from the snapshot's frame (start images off) (base: full log)",
                             chronicle: formatFixed(e.seconds, 2) + " s", baseline: formatFixed(g.seconds, 2) + " s", ratio: ratioText(e.seconds / g.seconds),
                             target: "", verdict: ""))
        rows.append(TableRow(measurement: "lifecycle: start image, LZ4 frame / store file (base: snapshot frame)",
                             chronicle: mb(b.image.imageBytes) + " / " + mb(b.image.storeBytes), baseline: mb(b.snapshotFrameBytes),
                             ratio: ratioText(Double(b.image.imageBytes) / Double(b.snapshotFrameBytes)), target: "", verdict: ""))
        let budget = g.seconds / 10, fl = b.floor, download = e.snapshotCallSeconds
        for (name, seconds) in [("its pages written (VACUUM INTO) + the download", fl.pageWriteSeconds + download),
                                ("its rows copied, index rows included + the download", fl.copySeconds + download),
                                ("FTS5 rebuild of its word indexes, two cores", fl.rebuildSeconds)] {
            rows.append(TableRow(measurement: "lifecycle: snapshot start's floor, raw SQLite: \(name) (base: full log / 10)",
                                 chronicle: formatFixed(seconds, 2) + " s", baseline: formatFixed(budget, 2) + " s", ratio: ratioText(seconds / budget),
                                 target: "<= 1x", verdict: seconds <= budget ? "below target" : "above target"))
        }
        rows.append(TableRow(measurement: "lifecycle: new device, peak RSS (VmHWM) (base: full log)", chronicle: formatFixed(peak, 1) + " MB",
                             baseline: formatFixed(basePeak, 1) + " MB", ratio: ratioText(peak / basePeak), target: "<= 150 MB", verdict: verdict(memoryPass)))
        let d = b.downloads
        rows.append(TableRow(measurement: "lifecycle: \(d.clients) clients download the snapshot at once, server RSS above before",
                             chronicle: formatFixed(Double(d.peak - d.rssBefore) / 1024, 1) + " MB",
                             baseline: formatFixed(Double(b.snapshotFrameBytes) / 1_048_576, 1) + " MB frame", ratio: "", target: "",
                             verdict: d.allWhole ? "" : "FAILED"))
        rows.append(TableRow(measurement: "lifecycle: new device, digest = server", chronicle: f.digest == b.serverDigest ? "yes" : "NO",
                             baseline: g.digest == b.serverDigest ? "yes" : "NO", ratio: "", target: "same state", verdict: verdict(digestPass)))

        notes.append("lifecycle snapshot downloads: \(d.clients) curl processes fetch GET /v1/libraries/{id}/snapshot at once, each limited to 20 MB/s so that all are in flight together (a phone is slower still), from the server in this process: \(formatFixed(d.seconds, 2)) s for all; the process's resident memory peaked \(formatFixed(Double(d.peak - d.rssBefore) / 1024, 1)) MB above the \(d.rssBefore / 1024) MB before them (VmHWM reset first); the frame is \(formatFixed(Double(b.snapshotFrameBytes) / 1_048_576, 1)) MB; every download whole: \(d.allWhole ? "yes" : "NO").")
        notes.append("lifecycle: the 'raw sqlite' column holds each row's own baseline, named in the row (base: ...), measured in the same run; MB = 10^6 bytes in MB/s, 2^20 bytes in sizes.")
        notes.append("lifecycle compaction: a \(formatCount(Double(c.ops)))-op device store (built with applyConfirmedInBulk in \(formatFixed(c.buildSeconds, 1)) s, then closed) compacted with keepOps \(formatCount(Double(LifecycleBenchmark.keepOps))), \(formatCount(Double(r.plan.segmentsToWrite))) segments of up to 10,000 ops: sealing \(formatFixed(c.sealSeconds, 2)) s (first progress call to the last segment's commit; \(formatFixed(Double(r.segmentBodyBytes) / 1e6, 1)) MB of bodies, \(formatFixed(Double(r.segmentFrameBytes) / 1e6, 1)) MB of frames, \(formatFixed(Double(r.logBytesSealed) / 1e6, 1)) MB of the log's blocks), snapshot at seq \(formatCount(Double(s.seq))) \(formatFixed(c.snapshotSeconds, 2)) s, VACUUM \(formatFixed(c.vacuumSeconds, 2)) s; compact() in all \(formatFixed(c.totalSeconds, 2)) s. The same bodies in process, each step alone: SegmentCodec.encodeBody \(formatFixed(c.encodeSeconds, 2)) s (\(formatFixed(Double(c.bodyBytes) / 1e6 / c.encodeSeconds, 0)) MB/s), LZ4Frame.compress \(formatFixed(c.compressSeconds, 2)) s (\(formatFixed(Double(c.bodyBytes) / 1e6 / c.compressSeconds, 0)) MB/s); sealing reads each segment on a read connection (a block of the log, store format 9, whose body is the segment's), compresses and digests it, while the writer stores the one before (the frame and the block's filter, deleting the block, a commit that does not wait for the disk, no checkpoint until the last): the writer's part is the rest of its time. Per segment: the first ten took \(formatFixed(c.firstSegmentsMilliseconds, 0)) ms each, the last ten \(formatFixed(c.lastSegmentsMilliseconds, 0)) ms each.")
        notes.append("lifecycle device compaction: with the default policy the snapshot \(c.defaultSnapshotLeftOut.map { "(\(mb($0)) frame) was left out: keeping it would have made the store larger than before; the store went \(mb(r.fileBytesBefore)) -> \(mb(c.defaultFileBytesAfter)) (CompactionReport, WAL included). A second compaction with keepsSnapshotThatGrowsFile wrote it (nothing left to seal) for the snapshot's figures below" } ?? "was kept: it left the store no larger than before").")
        notes.append("lifecycle store size: the database file with the store closed and its WAL checkpointed (TRUNCATE) once the store's background checkpoint let go of it: \(mb(c.fileBytesBefore)) before, \(mb(c.fileBytesAfter)) after. CompactionReport says \(mb(r.fileBytesBefore)) -> \(mb(r.fileBytesAfter)): its 'after' counts the WAL, which right after compact's VACUUM held \(mb(c.reportedWALBytesAfterVacuum)) (in WAL mode VACUUM writes the new copy of the database into the WAL; it shrinks at the next checkpoint).")
        notes.append("lifecycle floors (LifecycleBenchmark+Floors.swift), raw SQLite through the C API with statements prepared once, in this run; each sealing floor counts its reading side (select, concatenate, compress with liblz4) and its writing side (store the frame, delete the rows, commit; for the same store also the block's filter, through the store's own guard triggers, its commits not waiting for the disk, as the engine's seals) apart, and takes the larger, as if two cores overlapped them perfectly. The same store (a copy sealed up to the same seq, block by block, each block's body compressed and digested as it is): reading \(formatFixed(c.sealingFloor.readSeconds, 2)) s, writing \(formatFixed(c.sealingFloor.writeSeconds, 2)) s over \(c.sealingFloor.segments) segments. An ideal row log (\(formatCount(Double(r.opsSealed))) rows, each a slice of the sealed bodies and nothing else, no index or trigger): reading \(formatFixed(c.idealLogFloor.readSeconds, 2)) s, writing \(formatFixed(c.idealLogFloor.writeSeconds, 2)) s. A log kept in blocks (the same bodies in rows of \(LifecycleBenchmark.blockLogOps) records each; its reading side also digests each body with SHA-256, as the chain needs): a segment a commit, reading \(formatFixed(c.blockLogFloor.readSeconds, 2)) s, writing \(formatFixed(c.blockLogFloor.writeSeconds, 2)) s; ten segments a commit, reading \(formatFixed(c.blockLogGroupedFloor.readSeconds, 2)) s, writing \(formatFixed(c.blockLogGroupedFloor.writeSeconds, 2)) s. The snapshot start's store, copied into a new file with the same tables (\(formatCount(Double(b.floor.copiedRows))) rows: the projection, its read indexes built after, the word indexes' FTS5 tables; not the snapshot's frame nor the phrase indexes): \(formatFixed(b.floor.copySeconds, 2)) s; FTS5 'rebuild' of each word index on the copy: \(b.floor.rebuilds.map { "\($0.index) \(formatFixed($0.seconds, 2)) s" }.joined(separator: ", ")), \(formatFixed(b.floor.rebuildSeconds, 2)) s shared by two cores; the copy's pages written to a new file (VACUUM INTO, \(mb(b.floor.pageBytes))): \(formatFixed(b.floor.pageWriteSeconds, 2)) s. A start that builds the indexes takes at least the rebuilds; one that carries them as rows, at least the copy and its download; one that carries the database's pages, at least their writing and its download (the run's snapshot took \(formatFixed(b.fromFrame.snapshotCallSeconds, 2)) s to download, and either would carry more).")
        notes.append("lifecycle lz4 tool: `lz4 -1 -c -q` on the \(c.segments) sealed bodies concatenated (\(formatFixed(Double(c.bodyBytes) / 1e6, 1)) MB, one file in the page cache, output to /dev/null), fastest of \(c.lz4ToolSeconds.count) runs \(formatFixed(c.lz4ToolBestSeconds, 3)) s (runs: \(c.lz4ToolSeconds.map { formatFixed($0, 3) }.joined(separator: ", ")) s, process start included).")
        notes.append("lifecycle snapshot: \(formatCount(Double(s.rows))) rows; body \(mb(s.bodyBytes)) (LZ4-decompressed; decoded and re-encoded: \(s.reencodedBytes == s.bodyBytes ? "same size" : "\(mb(s.reencodedBytes)) — DIFFERENT")), frame \(mb(s.frameBytes)), lz4 -1 CLI \(mb(s.lz4ToolBytes)).")
        notes.append("lifecycle audit: \(a.after.count) articles with >= 5 ops (of \(formatCount(Double(a.candidates))) such; median \(a.medianOps) ops each) picked by the seed, audited with DeviceStore.audit before and after compaction (p50/p99 over the same articles)\(a.budgetHit ? "; the audits after compaction stopped at their \(formatFixed(a.budgetSeconds, 0)) s budget, so fewer were taken" : "").")
        notes.append("lifecycle bootstrap: the server's library filled with importConfirmed in \(formatFixed(b.importSeconds, 1)) s (\(formatCount(Double(b.ops) / b.importSeconds)) ops/s) and compacted with ServerLibrary.compact in \(formatFixed(b.server.seconds, 1)) s (\(b.server.segmentsWritten) segments; the snapshot step \(formatFixed(b.serverSnapshotSeconds, 2)) s, read from the server's projection at its head, the process's RSS peaking \((b.serverSnapshotPeak - b.serverSnapshotRSSBefore) / 1024) MB above the \(b.serverSnapshotRSSBefore / 1024) MB before it; snapshot at seq \(formatCount(Double(b.snapshotSeq))), \(mb(b.snapshotFrameBytes)) frame). Each device in its own child process, fresh store, SyncEngine default configuration (base: snapshotStartOpsMin = Int64.max), one syncOnce over loopback HTTP. From the start image (built by the server after compacting in \(formatFixed(b.image.buildSeconds, 2)) s: \(mb(b.image.storeBytes)) of store in a \(mb(b.image.imageBytes)) LZ4 frame): \(formatFixed(f.seconds, 2)) s = first pull page \(formatFixed(f.firstPullSeconds, 2)) s + the image's download, decompressed beside the store as it arrives (SyncTransport.startImage), \(formatFixed(f.imageCallSeconds, 2)) s + DeviceStore.adoptStartImage (checked, this device's id written, synced, renamed over the store's file) and the tail's pulls \(formatFixed(f.seconds - f.firstPullSeconds - f.imageCallSeconds, 2)) s; peak \(f.peakKilobytes / 1024) MB; store \(mb(f.storeBytes)). From the snapshot's frame (start images off): \(formatFixed(e.seconds, 2)) s = first pull page from seq 0, dropped when it advertises the snapshot, \(formatFixed(e.firstPullSeconds, 2)) s + snapshot download into a temporary file (SyncTransport.snapshot) \(formatFixed(e.snapshotCallSeconds, 2)) s + the tail's \(e.tailPulls) pull call\(e.tailPulls == 1 ? "" : "s") \(formatFixed(e.tailPullSeconds, 2)) s + DeviceStore.bootstrap(from:tail:) \(formatFixed(e.storeBootstrapSeconds, 2)) s + the rest \(formatFixed(e.seconds - e.firstPullSeconds - e.snapshotCallSeconds - e.tailPullSeconds - e.storeBootstrapSeconds, 2)) s (\(e.pulls - 1 - e.tailPulls) more pull call\(e.pulls - 1 - e.tailPulls == 1 ? "" : "s"); \(formatCount(Double(e.pulled))) ops of tail in all); peak \(e.peakKilobytes / 1024) MB (\(e.startKilobytes / 1024) MB before syncOnce; peak \(e.snapshotHWMBefore / 1024) MB before the snapshot call, \(e.snapshotHWMAfter / 1024) MB after it with \(e.snapshotRSSAfter / 1024) MB resident, the rest of the peak in DeviceStore.bootstrap, which reads the frame as it goes); store \(mb(e.storeBytes)). Full log: \(formatCount(Double(g.pulled))) ops in \(g.pulls) pulls, \(formatFixed(g.seconds, 2)) s (\(formatCount(Double(g.pulled) / g.seconds)) ops/s), store \(mb(g.storeBytes)); \(formatFixed(b.speedup, 1))x slower than from the start image, \(formatFixed(g.seconds / e.seconds, 1))x slower than from the frame.")

        json.append(("lifecycle", .object([
            ("compaction", .object([
                ("ops", .int(Int64(c.ops))), ("keep_ops", .int(LifecycleBenchmark.keepOps)), ("segments", .int(Int64(r.segmentsWritten))),
                ("ops_sealed", .int(r.opsSealed)), ("log_bytes_sealed", .int(r.logBytesSealed)),
                ("segment_body_bytes", .int(r.segmentBodyBytes)), ("segment_frame_bytes", .int(r.segmentFrameBytes)),
                ("seal_seconds", .number(c.sealSeconds)), ("seal_mb_per_second", .number(c.sealMBPerSecond)),
                ("first_segments_ms", .number(c.firstSegmentsMilliseconds)), ("last_segments_ms", .number(c.lastSegmentsMilliseconds)),
                ("snapshot_step_seconds", .number(c.snapshotSeconds)), ("vacuum_seconds", .number(c.vacuumSeconds)),
                ("compact_seconds", .number(c.totalSeconds)), ("encode_seconds", .number(c.encodeSeconds)), ("compress_seconds", .number(c.compressSeconds)),
                ("lz4_tool_seconds", .array(c.lz4ToolSeconds.map(JSON.number))), ("lz4_tool_mb_per_second", .number(c.lz4ToolMBPerSecond)),
                ("lz4_tool_output_bytes", .int(c.lz4ToolOutputBytes)), ("seal_ratio", .number(c.sealRatio)),
                ("file_bytes_before", .int(c.fileBytesBefore)), ("file_bytes_after", .int(c.fileBytesAfter)),
                ("default_file_bytes_after", .int(c.defaultFileBytesAfter)), ("default_snapshot_left_out_bytes", c.defaultSnapshotLeftOut.map { .int($0) } ?? .null),
                ("report_file_bytes_before", .int(r.fileBytesBefore)), ("report_file_bytes_after", .int(r.fileBytesAfter)),
                ("wal_bytes_after_vacuum", .int(c.reportedWALBytesAfterVacuum)),
                ("log_to_frame_ratio", .number(r.compressionRatio)), ("body_to_frame_ratio", .number(segmentRatio)),
                ("snapshot", .object([("seq", .int(s.seq)), ("rows", .int(Int64(s.rows))), ("body_bytes", .int(s.bodyBytes)),
                                      ("frame_bytes", .int(s.frameBytes)), ("reencoded_bytes", .int(s.reencodedBytes)),
                                      ("lz4_tool_bytes", .int(s.lz4ToolBytes))])),
                ("floors", .object([("same_store_read_seconds", .number(c.sealingFloor.readSeconds)),
                                    ("same_store_write_seconds", .number(c.sealingFloor.writeSeconds)),
                                    ("same_store_mb_per_second", .number(c.mbPerSecond(c.sealingFloor))),
                                    ("ideal_log_read_seconds", .number(c.idealLogFloor.readSeconds)),
                                    ("ideal_log_write_seconds", .number(c.idealLogFloor.writeSeconds)),
                                    ("ideal_log_mb_per_second", .number(c.mbPerSecond(c.idealLogFloor))),
                                    ("block_log_ops", .int(LifecycleBenchmark.blockLogOps)),
                                    ("block_log_read_seconds", .number(c.blockLogFloor.readSeconds)),
                                    ("block_log_write_seconds", .number(c.blockLogFloor.writeSeconds)),
                                    ("block_log_mb_per_second", .number(c.mbPerSecond(c.blockLogFloor))),
                                    ("block_log_grouped_read_seconds", .number(c.blockLogGroupedFloor.readSeconds)),
                                    ("block_log_grouped_write_seconds", .number(c.blockLogGroupedFloor.writeSeconds)),
                                    ("block_log_grouped_mb_per_second", .number(c.mbPerSecond(c.blockLogGroupedFloor)))])),
                ("targets", .object([("seal_ratio_min", .number(0.5))])), ("pass", .bool(sealPass)),
            ])),
            ("audit", .object([("samples", .int(Int64(a.after.count))), ("candidates", .int(Int64(a.candidates))),
                               ("median_ops", .int(Int64(a.medianOps))), ("before_p50_ms", .number(b50)), ("before_p99_ms", .number(b99)),
                               ("after_p50_ms", .number(p50)), ("after_p99_ms", .number(p99)), ("mismatches", .int(Int64(a.mismatches))),
                               ("budget_hit", .bool(a.budgetHit))])),
            ("bootstrap", .object([
                ("ops", .int(Int64(b.ops))), ("import_seconds", .number(b.importSeconds)), ("server_compact_seconds", .number(b.server.seconds)),
                ("server_snapshot_seconds", .number(b.serverSnapshotSeconds)),
                ("server_snapshot_rss_before_kb", .int(Int64(b.serverSnapshotRSSBefore))),
                ("snapshot_downloads", .object([("clients", .int(Int64(b.downloads.clients))), ("seconds", .number(b.downloads.seconds)),
                                                ("rss_before_kb", .int(Int64(b.downloads.rssBefore))), ("peak_kb", .int(Int64(b.downloads.peak))),
                                                ("all_whole", .bool(b.downloads.allWhole))])),
                ("server_snapshot_peak_kb", .int(Int64(b.serverSnapshotPeak))),
                ("snapshot_seq", .int(b.snapshotSeq)), ("snapshot_frame_bytes", .int(b.snapshotFrameBytes)),
                ("from_snapshot", Self.json(f, serverDigest: b.serverDigest)), ("from_frame", Self.json(e, serverDigest: b.serverDigest)),
                ("full_log", Self.json(g, serverDigest: b.serverDigest)),
                ("start_image", .object([("seq", .int(b.image.seq)), ("image_bytes", .int(b.image.imageBytes)), ("store_bytes", .int(b.image.storeBytes)),
                                         ("build_seconds", .number(b.image.buildSeconds))])),
                ("speedup", .number(b.speedup)),
                ("floors", .object([("copy_seconds", .number(b.floor.copySeconds)), ("copied_rows", .int(b.floor.copiedRows)),
                                    ("rebuild_seconds_two_cores", .number(b.floor.rebuildSeconds)),
                                    ("rebuilds", .object(b.floor.rebuilds.map { ($0.index, JSON.number($0.seconds)) })),
                                    ("page_write_seconds", .number(b.floor.pageWriteSeconds)), ("page_bytes", .int(b.floor.pageBytes))])),
                ("targets", .object([("seconds_max", .number(5)), ("speedup_min", .number(10)), ("peak_rss_mb_max", .number(150))])),
                ("pass", .bool(bootstrapPass && memoryPass && digestPass)),
            ])),
            ("pass", .bool(sealPass && a.mismatches == 0 && bootstrapPass && memoryPass && digestPass)),
        ])))
        return sealPass && a.mismatches == 0 && bootstrapPass && memoryPass && digestPass
    }

    static func json(_ run: LifecycleBenchmark.DeviceRun, serverDigest: String) -> JSON {
        .object([("seconds", .number(run.seconds)), ("peak_rss_mb", .number(Double(run.peakKilobytes) / 1024)),
                 ("start_rss_mb", .number(Double(run.startKilobytes) / 1024)), ("pulled", .int(Int64(run.pulled))),
                 ("outcome", .string(run.outcome)), ("bootstrapped_at", run.bootstrappedAt.map(JSON.int) ?? .null),
                 ("snapshot_call_seconds", .number(run.snapshotCallSeconds)), ("store_bootstrap_seconds", .number(run.storeBootstrapSeconds)), ("tail_pulls", .int(Int64(run.tailPulls))), ("tail_pull_seconds", .number(run.tailPullSeconds)),
                 ("pulls", .int(Int64(run.pulls))), ("pull_call_seconds", .number(run.pullCallSeconds)),
                 ("first_pull_seconds", .number(run.firstPullSeconds)),
                 ("snapshot_hwm_before_mb", .number(Double(run.snapshotHWMBefore) / 1024)),
                 ("snapshot_hwm_after_mb", .number(Double(run.snapshotHWMAfter) / 1024)),
                 ("snapshot_rss_after_mb", .number(Double(run.snapshotRSSAfter) / 1024)),
                 ("store_bytes", .int(run.storeBytes)), ("digest_matches_server", .bool(run.digest == serverDigest)),
                 ("started_from_image", .bool(run.startedFromImage)), ("image_call_seconds", .number(run.imageCallSeconds))])
    }
}
