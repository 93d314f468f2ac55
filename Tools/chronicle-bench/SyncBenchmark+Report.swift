import Foundation
import ChronicleServerStore

/// Where the sync phase's figures go: the shared table, notes and JSON object.
struct SyncReportSink {
    var rows: [TableRow] = []
    var notes: [String] = []
    var json: [(String, JSON)] = []
    var pass = true
}

extension SyncBenchmark.Result {
    /// The sync phase's table rows, JSON object and notes; returns whether every target was met.
    func report(rows: inout [TableRow], json: inout [(String, JSON)], notes: inout [String]) -> Bool {
        var sink = SyncReportSink()
        sink.notes.append("sync rows: a real SyncServer (libmicrohttpd, embedded SQLite store, default configuration) on loopback HTTP and SyncEngine with its default configuration; the 'raw sqlite' column holds each row's own baseline, named in the row (base: ...), measured in the same run.")
        if let pull { Self.report(pull, into: &sink) }
        if var push { Self.report(&push, into: &sink) }
        if var latency { Self.report(&latency, into: &sink) }
        if var scale { Self.report(&scale, into: &sink) }
        if var latencyAcross {
            let p50 = latencyAcross.samples.percentileMilliseconds(0.5), p99 = latencyAcross.samples.percentileMilliseconds(0.99)
            sink.rows.append(TableRow(measurement: "sync latency across two servers sharing PostgreSQL: p50 / p99 (base: one server, above)",
                                      chronicle: millisecondsText(p50) + " / " + millisecondsText(p99),
                                      baseline: latency.map { var l = $0; return millisecondsText(l.samples.percentileMilliseconds(0.5)) } ?? "",
                                      ratio: "", target: "", verdict: latencyAcross.failures.isEmpty ? "" : "FAILED"))
            sink.notes.append("sync latency across servers: \(latencyAcross.samples.count) samples; A pushes to one SyncServer, B long-polls another, both ordering the library in PostgreSQL (NOTIFY wakes B's parked pull, which catches its replica up); medians: write \(millisecondsText(latencyAcross.write.percentileMilliseconds(0.5))), delivery \(millisecondsText(latencyAcross.delivery.percentileMilliseconds(0.5))), apply \(millisecondsText(latencyAcross.apply.percentileMilliseconds(0.5))); \(latencyAcross.viaLongPoll) of \(latencyAcross.write.count) by a parked long-poll; \(latencyAcross.failures.count) failures.")
            sink.json.append(("latency_across_postgres", .object([
                ("samples", .int(Int64(latencyAcross.samples.count))), ("p50_ms", .number(p50)), ("p99_ms", .number(p99)),
                ("via_long_poll", .int(Int64(latencyAcross.viaLongPoll))), ("failures", .array(latencyAcross.failures.map(JSON.string))),
            ])))
        }
        if let blobs {
            let mb = { (seconds: Double) in formatFixed(blobs.mbPerSecond(seconds), 1) + " MB/s" }
            let size = "\(blobs.bytes >> 20) MiB"
            sink.rows.append(TableRow(measurement: "files: a \(size) file uploaded over HTTP in 4 MiB chunks (base: the same SQL, no HTTP)",
                                      chronicle: mb(blobs.uploadSeconds), baseline: mb(blobs.baselineUploadSeconds),
                                      ratio: ratioText(blobs.baselineUploadSeconds / blobs.uploadSeconds), target: "no target",
                                      verdict: blobs.matches ? "" : "FAILED"))
            sink.rows.append(TableRow(measurement: "files: that file fetched by another device in 4 MiB ranges (base: the same SQL, no HTTP)",
                                      chronicle: mb(blobs.fetchSeconds), baseline: mb(blobs.baselineFetchSeconds),
                                      ratio: ratioText(blobs.baselineFetchSeconds / blobs.fetchSeconds), target: "no target",
                                      verdict: blobs.matches ? "" : "FAILED"))
            sink.notes.append("files: a \(size) file of random bytes; adding it to the store (addBlob(file:): read twice, hashed, kept in 1 MiB chunks) took \(formatFixed(blobs.addSeconds, 2)) s (\(mb(blobs.addSeconds))). The upload is A's syncOnce(): a status request, then one PUT per 4 MiB, each a server transaction with FULL sync (kept as four 1 MiB rows), the last checked against the address; the fetch is B's fetchBlob(): one ranged GET per 4 MiB, each a transaction on B. The baseline moves 4 MiB per transaction too. The baseline runs the same SQL through the C API with no HTTP and no engine. Inside the HTTP server (its log): the PUTs \(formatFixed(blobs.serverPutSeconds, 2)) s of the upload's \(formatFixed(blobs.uploadSeconds, 2)), the GETs \(formatFixed(blobs.serverGetSeconds, 2)) s of the fetch's \(formatFixed(blobs.fetchSeconds, 2)). Bytes arrived intact: \(blobs.matches ? "yes" : "NO").")
            sink.json.append(("blobs", .object([
                ("bytes", .int(Int64(blobs.bytes))), ("add_seconds", .number(blobs.addSeconds)),
                ("upload_seconds", .number(blobs.uploadSeconds)), ("baseline_upload_seconds", .number(blobs.baselineUploadSeconds)),
                ("fetch_seconds", .number(blobs.fetchSeconds)), ("baseline_fetch_seconds", .number(blobs.baselineFetchSeconds)),
                ("upload_mb_per_s", .number(blobs.mbPerSecond(blobs.uploadSeconds))), ("fetch_mb_per_s", .number(blobs.mbPerSecond(blobs.fetchSeconds))),
                ("matches", .bool(blobs.matches)),
            ])))
            if !blobs.matches { sink.pass = false }
        }
        rows += sink.rows
        notes += sink.notes
        json.append(("sync", .object(sink.json + [("pass", .bool(sink.pass))])))
        return sink.pass
    }

    static func wireJSON(_ wire: WireSizes) -> JSON {
        .object([("ops", .int(Int64(wire.ops))), ("segment_bytes", .int(Int64(wire.segmentBytes))), ("json_bytes", .int(Int64(wire.jsonBytes))),
                 ("segment_bytes_per_op", .number(wire.segmentBytesPerOp)), ("json_bytes_per_op", .number(wire.jsonBytesPerOp)),
                 ("ratio", .number(wire.ratio)), ("pass", .bool(wire.ratio <= 0.4))])
    }

    static func wireRow(_ name: String, _ wire: WireSizes) -> TableRow {
        TableRow(measurement: "wire: \(name) of \(formatCount(Double(wire.ops))) ops, B/op (base: JSON)",
                 chronicle: formatFixed(wire.segmentBytesPerOp, 1) + " B", baseline: formatFixed(wire.jsonBytesPerOp, 1) + " B",
                 ratio: ratioText(wire.ratio), target: "<= 0.40x JSON", verdict: verdict(wire.ratio <= 0.4))
    }

    // MARK: - 1. Pull

    static func report(_ pull: SyncBenchmark.PullResult, into sink: inout SyncReportSink) {
        sink.rows.append(TableRow(measurement: "sync pull: \(formatCount(Double(pull.ops))) ops, HTTP (base: bulk apply)",
                                  chronicle: formatCount(pull.opsPerSecond) + " ops/s", baseline: formatCount(pull.baselineOpsPerSecond) + " ops/s",
                                  ratio: ratioText(pull.ratio), target: ">= 100,000 ops/s and >= 0.7x bulk", verdict: verdict(pull.opsPerSecond >= 100_000 && pull.ratio >= 0.7)))
        sink.rows.append(TableRow(measurement: "sync pull: digest = server", chronicle: pull.digestMatches ? "yes" : "NO",
                                  baseline: pull.baselineDigestMatches ? "yes" : "NO", ratio: "", target: "same state",
                                  verdict: verdict(pull.digestMatches && pull.pulled == pull.ops)))
        let pipeline = pull.serverReadSeconds + pull.encodeSeconds + pull.decodeSeconds + pull.baselineSeconds
        sink.notes.append("sync pull: \(formatCount(Double(pull.ops))) ops in \(formatFixed(pull.seconds, 1)) s over \(pull.pages) HTTP pages of up to \(formatCount(Double(pull.pageOps))) ops (bulk catch-up); the same work single-threaded in process: server log read \(formatFixed(pull.serverReadSeconds, 1)) s + segment encode \(formatFixed(pull.encodeSeconds, 1)) s + decode \(formatFixed(pull.decodeSeconds, 1)) s + bulk apply \(formatFixed(pull.baselineSeconds, 1)) s = \(formatFixed(pipeline, 1)) s; the HTTP pull calls took \(formatFixed(pull.pullCallSeconds, 1)) s in all (overlapping the apply). Library built with pushNow in process at \(formatCount(Double(pull.ops) / pull.uploadSeconds)) ops/s (\(pull.convertedParsed) article.parsed ops pushed as notes, library.plan dropped); server file \(pull.serverBytes / 1_048_576) MB; the pulled device: database \(pull.storeBytes / 1_048_576) MB + WAL \(pull.storeWALBytes / 1_048_576) MB.")
        if let large = pull.largePage {
            let rate = Double(pull.ops) / large.seconds
            sink.rows.append(TableRow(measurement: "sync pull: bulk apply, \(formatCount(Double(large.ops)))-op pages (diag.)", chronicle: formatCount(rate) + " ops/s",
                                      baseline: formatCount(pull.baselineOpsPerSecond) + " ops/s", ratio: ratioText(rate / pull.baselineOpsPerSecond),
                                      target: "", verdict: ""))
            sink.notes.append("sync pull, diagnostic: applyConfirmedInBulk of the same ops in \(formatCount(Double(large.ops)))-op pages took \(formatFixed(large.seconds, 1)) s (\(formatCount(rate)) ops/s, \(ratioText(rate / pull.baselineOpsPerSecond)) the \(formatCount(Double(pull.pageOps)))-op pages' rate) and left a \(large.walBytes / 1_048_576) MB WAL (\(formatCount(Double(pull.pageOps)))-op pages: \(pull.baselineWALBytes / 1_048_576) MB).")
        }
        sink.rows.append(TableRow(measurement: "files collection: read of a \(formatCount(Double(pull.ops)))-op library's projection (base: raw SQLite)",
                                  chronicle: formatFixed(pull.namesSeconds * 1000, 1) + " ms", baseline: formatFixed(pull.namesRawSeconds * 1000, 1) + " ms",
                                  ratio: ratioText(pull.namesRawSeconds / pull.namesSeconds), target: "(none)", verdict: ""))
        sink.rows.append(wireRow("pull page", pull.wire))
        sink.json.append(("pull", .object([
            ("ops", .int(Int64(pull.ops))), ("pulled", .int(Int64(pull.pulled))), ("outcome", .string(pull.outcome)),
            ("seconds", .number(pull.seconds)), ("ops_per_second", .number(pull.opsPerSecond)), ("pages", .int(Int64(pull.pages))),
            ("bulk_apply_seconds", .number(pull.baselineSeconds)), ("bulk_apply_ops_per_second", .number(pull.baselineOpsPerSecond)),
            ("ratio", .number(pull.ratio)), ("digest_matches_server", .bool(pull.digestMatches)),
            ("baseline_digest_matches_server", .bool(pull.baselineDigestMatches)),
            ("server_read_seconds", .number(pull.serverReadSeconds)), ("segment_encode_seconds", .number(pull.encodeSeconds)),
            ("segment_decode_seconds", .number(pull.decodeSeconds)), ("http_pull_call_seconds", .number(pull.pullCallSeconds)),
            ("library_build_seconds", .number(pull.uploadSeconds)), ("parsed_as_notes", .int(Int64(pull.convertedParsed))),
            ("page_ops", .int(Int64(pull.pageOps))), ("device_store_bytes", .int(pull.storeBytes)),
            ("device_wal_bytes", .int(pull.storeWALBytes)), ("baseline_wal_bytes", .int(pull.baselineWALBytes)),
            ("server_bytes", .int(pull.serverBytes)),
            ("files_collection_read_seconds", .number(pull.namesSeconds)), ("files_collection_read_raw_seconds", .number(pull.namesRawSeconds)),
            ("large_page_bulk_apply", pull.largePage.map { large in
                .object([("page_ops", .int(Int64(large.ops))), ("seconds", .number(large.seconds)),
                         ("ops_per_second", .number(Double(pull.ops) / large.seconds)), ("wal_bytes", .int(large.walBytes))])
            } ?? .null),
            ("wire_pull_page", wireJSON(pull.wire)),
            ("targets", .object([("ops_per_second_min", .number(100_000)), ("ratio_min", .number(0.7)), ("wire_ratio_max", .number(0.4))])),
            ("pass", .bool(pull.pass && pull.wire.ratio <= 0.4)),
        ])))
        sink.pass = sink.pass && pull.pass && pull.wire.ratio <= 0.4
    }

    // MARK: - 2. Push

    static func report(_ push: inout SyncBenchmark.PushResult, into sink: inout SyncReportSink) {
        sink.rows.append(TableRow(measurement: "sync push: \(formatCount(Double(push.ops))) queued ops, HTTP (base: pushNow)",
                                  chronicle: formatCount(push.opsPerSecond) + " ops/s", baseline: formatCount(push.baselineOpsPerSecond) + " ops/s",
                                  ratio: ratioText(push.ratio), target: ">= 20,000 ops/s", verdict: verdict(push.pass)))
        sink.notes.append("sync push: timed from syncOnce() to the last push answered (\(push.requests.count) requests of up to 500 ops: p50 \(millisecondsText(push.requests.percentileMilliseconds(0.5))), p99 \(millisecondsText(push.requests.percentileMilliseconds(0.99)))); the same round then pulled the ops back as confirmed in \(formatFixed(push.pullBackSeconds, 1)) s; \(push.pushed) accepted, \(push.rejected) rejected, device digest = server: \(push.digestMatches ? "yes" : "NO"). Server side, per request: in the HTTP server p50 \(millisecondsText(push.serverRequests.percentileMilliseconds(0.5))), of which pushNow p50 \(millisecondsText(push.serverPushNow.percentileMilliseconds(0.5))); all requests \(formatFixed(Double(push.serverRequests.nanoseconds.reduce(0, +)) / 1e9, 2)) s of the \(formatFixed(push.seconds, 2)) s push (the rest: the device's outbox reads, acknowledgement commits, segment coding, URLSession). Writing them locally took \(formatFixed(push.writeSeconds, 1)) s (\(formatCount(Double(push.ops) / push.writeSeconds)) writes/s); the device afterwards: database \(push.storeBytes / 1_048_576) MB + WAL \(push.storeWALBytes / 1_048_576) MB.")
        sink.rows.append(TableRow(measurement: "sync push: the same outbox, one request in flight at a time (base: two, above)",
                                  chronicle: formatCount(push.oneInFlightOpsPerSecond) + " ops/s", baseline: formatCount(push.opsPerSecond) + " ops/s",
                                  ratio: ratioText(push.oneInFlightOpsPerSecond / push.opsPerSecond), target: "", verdict: ""))
        for (run, what) in zip(push.compacting, ["a snapshot at every seal", "a snapshot every 50,000 ops"]) {
            let opsPerSecond = Double(push.ops) / run.seconds
            sink.rows.append(TableRow(measurement: "sync push: pushNow while the server compacts on its own, \(what) (base: pushNow)",
                                      chronicle: formatCount(opsPerSecond) + " ops/s", baseline: formatCount(push.baselineOpsPerSecond) + " ops/s",
                                      ratio: ratioText(opsPerSecond / push.baselineOpsPerSecond), target: "", verdict: ""))
            sink.notes.append("sync push, compacting with \(what): the same batches into a SyncService whose maintenance thread looked at the library every 0.2 s (keep 10,000 ops hot, seal whole segments of 10,000): \(run.compactions) compactions sealed \(formatCount(Double(run.compactedOps))) ops while the pushes ran, taking \(formatFixed(run.compactionSeconds, 2)) s of the maintenance thread in all (snapshots built on a read connection; the newest at the end at seq \(run.newestSnapshot.map { formatCount(Double($0)) } ?? "none")); pushNow in all \(formatFixed(run.seconds, 2)) s against \(formatFixed(push.baselineSeconds, 2)) s without.")
        }
        if let seconds = push.postgresSeconds {
            let opsPerSecond = Double(push.ops) / seconds
            sink.rows.append(TableRow(measurement: "sync push: pushNow with the order in PostgreSQL (base: pushNow, embedded SQLite)",
                                      chronicle: formatCount(opsPerSecond) + " ops/s", baseline: formatCount(push.baselineOpsPerSecond) + " ops/s",
                                      ratio: ratioText(opsPerSecond / push.baselineOpsPerSecond), target: "", verdict: ""))
        }
        if let seconds = push.postgresMoveSeconds, let pushSeconds = push.postgresSeconds {
            sink.rows.append(TableRow(measurement: "PostgreSQL: a lone server's library file moved in (server move-to-postgres; base: the same ops pushed, order in PostgreSQL)",
                                      chronicle: formatCount(Double(push.ops) / seconds) + " ops/s", baseline: formatCount(Double(push.ops) / pushSeconds) + " ops/s",
                                      ratio: ratioText(pushSeconds / seconds), target: "", verdict: ""))
        }
        if let sealing = push.postgresSealing {
            sink.rows.append(TableRow(measurement: "PostgreSQL: a new server's replica made from sealed segments (base: from log rows, before sealing)",
                                      chronicle: formatFixed(sealing.replicaFromSegmentsSeconds, 2) + " s",
                                      baseline: formatFixed(sealing.replicaFromRowsSeconds, 2) + " s",
                                      ratio: ratioText(sealing.replicaFromRowsSeconds / sealing.replicaFromSegmentsSeconds), target: "",
                                      verdict: sealing.digestsMatch ? "" : "digests differ"))
            sink.rows.append(TableRow(measurement: "PostgreSQL: a replica's compaction handing its segments over (base: the same compaction, segments there already)",
                                      chronicle: formatFixed(sealing.compactWithHandoverSeconds, 2) + " s",
                                      baseline: formatFixed(sealing.compactSeconds, 2) + " s",
                                      ratio: ratioText(sealing.compactSeconds / sealing.compactWithHandoverSeconds), target: "", verdict: ""))
            var alone = sealing.pushesAlone, during = sealing.pushesDuringHandover
            sink.rows.append(TableRow(measurement: "PostgreSQL: another device's pushes of \(PostgresSealing.pushBatchOps) ops during that handover, p99 / max (base: the same pushes alone)",
                                      chronicle: formatFixed(during.percentileMilliseconds(0.99), 1) + " / " + formatFixed(during.percentileMilliseconds(1), 1) + " ms",
                                      baseline: formatFixed(alone.percentileMilliseconds(0.99), 1) + " / " + formatFixed(alone.percentileMilliseconds(1), 1) + " ms",
                                      ratio: ratioText(alone.percentileMilliseconds(1) / during.percentileMilliseconds(1)), target: "", verdict: ""))
            sink.notes.append("PostgreSQL pushes beside the handover: \(during.count) pushes during it (p50 \(formatFixed(during.percentileMilliseconds(0.5), 1)) ms), \(alone.count) alone before it (p50 \(formatFixed(alone.percentileMilliseconds(0.5), 1)) ms), one after another from one thread into the same service.")
            sink.notes.append("PostgreSQL sealing: of \(formatCount(Double(sealing.ops))) ops pushed, \(formatCount(Double(sealing.opsSealed))) were sealed (10,000 kept hot); the library's history took \(formatFixed(Double(sealing.bytesBefore) / 1e6, 1)) MB in PostgreSQL as log rows and \(formatFixed(Double(sealing.bytesAfter) / 1e6, 1)) MB as segments and the rows after them (pg_column_size), \(formatFixed(Double(sealing.bytesBefore) / Double(max(1, sealing.bytesAfter)), 1))x smaller; the three replicas' digests \(sealing.digestsMatch ? "match" : "DIFFER").")
            if !sealing.digestsMatch { syncFailure("PostgreSQL sealing: the replicas' digests differ") }
        }
        sink.rows.append(wireRow("push batch", push.wire))
        sink.json.append(("push", .object([
            ("ops", .int(Int64(push.ops))), ("pushed", .int(Int64(push.pushed))), ("rejected", .int(Int64(push.rejected))),
            ("outcome", .string(push.outcome)), ("seconds", .number(push.seconds)), ("ops_per_second", .number(push.opsPerSecond)),
            ("one_in_flight_seconds", .number(push.oneInFlightSeconds)), ("one_in_flight_ops_per_second", .number(push.oneInFlightOpsPerSecond)),
            ("push_now_seconds", .number(push.baselineSeconds)), ("push_now_ops_per_second", .number(push.baselineOpsPerSecond)),
            ("push_now_postgres_seconds", push.postgresSeconds.map(JSON.number) ?? .null),
            ("push_now_compacting", .array(zip(push.compacting, ["every_seal", "every_50000_ops"]).map { run, snapshots in
                .object([("snapshots", .string(snapshots)), ("seconds", .number(run.seconds)), ("compactions", .int(Int64(run.compactions))),
                         ("compacted_ops", .int(Int64(run.compactedOps))), ("compaction_seconds", .number(run.compactionSeconds)),
                         ("newest_snapshot_seq", run.newestSnapshot.map { .int($0) } ?? .null)])
            })),
            ("ratio", .number(push.ratio)), ("requests", .int(Int64(push.requests.count))),
            ("request_p50_ms", .number(push.requests.percentileMilliseconds(0.5))), ("request_p99_ms", .number(push.requests.percentileMilliseconds(0.99))),
            ("pull_back_seconds", .number(push.pullBackSeconds)), ("local_write_seconds", .number(push.writeSeconds)),
            ("server_request_p50_ms", .number(push.serverRequests.percentileMilliseconds(0.5))),
            ("server_push_now_p50_ms", .number(push.serverPushNow.percentileMilliseconds(0.5))),
            ("device_store_bytes", .int(push.storeBytes)), ("device_wal_bytes", .int(push.storeWALBytes)),
            ("digest_matches_server", .bool(push.digestMatches)),
            ("op_types", .object(push.typeCounts.sorted { $0.key < $1.key }.map { ($0.key, .int(Int64($0.value))) })),
            ("wire_push_batch", wireJSON(push.wire)),
            ("targets", .object([("ops_per_second_min", .number(20_000)), ("wire_ratio_max", .number(0.4))])),
            ("pass", .bool(push.pass && push.wire.ratio <= 0.4)),
        ])))
        sink.pass = sink.pass && push.pass && push.wire.ratio <= 0.4
    }

    // MARK: - 4. Latency

    static func report(_ latency: inout SyncBenchmark.LatencyResult, into sink: inout SyncReportSink) {
        let p50 = latency.samples.percentileMilliseconds(0.5), p99 = latency.samples.percentileMilliseconds(0.99)
        sink.rows.append(TableRow(measurement: "sync latency A write -> B sees it: p50", chronicle: millisecondsText(p50), baseline: "", ratio: "",
                                  target: "<= 20 ms", verdict: verdict(p50 <= 20 && latency.failures.isEmpty)))
        sink.rows.append(TableRow(measurement: "sync latency A write -> B sees it: p99", chronicle: millisecondsText(p99), baseline: "", ratio: "",
                                  target: "", verdict: ""))
        sink.notes.append("sync latency: \(latency.samples.count) samples, B long-polling through SyncEngine.run(), B's cursor polled every \(latency.pollMicroseconds) µs; medians of the parts: A's local write until its push request leaves \(millisecondsText(latency.write.percentileMilliseconds(0.5))), push + server commit + wake + B's long-poll answer \(millisecondsText(latency.delivery.percentileMilliseconds(0.5))), B folds the op in (+ polling) \(millisecondsText(latency.apply.percentileMilliseconds(0.5))); \(latency.viaLongPoll) of \(latency.write.count) delivered by a parked long-poll; \(latency.failures.count) failures.")
        sink.json.append(("latency", .object([
            ("samples", .int(Int64(latency.samples.count))), ("p50_ms", .number(p50)), ("p99_ms", .number(p99)),
            ("max_ms", .number(latency.samples.percentileMilliseconds(1))),
            ("write_p50_ms", .number(latency.write.percentileMilliseconds(0.5))),
            ("delivery_p50_ms", .number(latency.delivery.percentileMilliseconds(0.5))),
            ("apply_p50_ms", .number(latency.apply.percentileMilliseconds(0.5))),
            ("via_long_poll", .int(Int64(latency.viaLongPoll))), ("failures", .array(latency.failures.map(JSON.string))),
            ("targets", .object([("p50_ms_max", .number(20))])), ("pass", .bool(latency.pass)),
        ])))
        sink.pass = sink.pass && latency.pass
    }

    // MARK: - 5. Scale

    static func report(_ scale: inout SyncBenchmark.ScaleResult, into sink: inout SyncReportSink) {
        let scaleP99 = scale.requests.percentileMilliseconds(0.99)
        sink.rows.append(TableRow(measurement: "sync \(scale.devices) devices at once with a backlog (herd): throughput", chronicle: formatCount(scale.opsPerSecond) + " ops/s",
                                  baseline: "", ratio: "", target: "", verdict: ""))
        sink.rows.append(TableRow(measurement: "sync \(scale.devices) devices at once with a backlog (herd): push p99", chronicle: millisecondsText(scaleP99),
                                  baseline: "", ratio: "", target: "<= 50 ms", verdict: verdict(scaleP99 <= 50)))
        if var floor = scale.floor, var stripped = scale.strippedFloor {
            let p99 = floor.latencies.percentileMilliseconds(0.99), strippedP99 = stripped.latencies.percentileMilliseconds(0.99)
            sink.rows.append(TableRow(measurement: "sync herd's floor: raw SQLite, the server's statements for the same pushes: p99",
                                      chronicle: "", baseline: millisecondsText(p99), ratio: "", target: "<= 50 ms", verdict: p99 <= 50 ? "below target" : "above target"))
            sink.rows.append(TableRow(measurement: "sync herd's floor, stripped (keys only, no triggers, a transaction a library): p99",
                                      chronicle: "", baseline: millisecondsText(strippedP99), ratio: "", target: "<= 50 ms",
                                      verdict: ""))
            sink.notes.append("sync scale, the herd's floor stripped further than the server could go: the same statements with every index but the tables' keys and every trigger dropped, and each library's pushes in one transaction (commits still durable): all committed in \(formatFixed(stripped.seconds * 1e3, 1)) ms, p50 \(millisecondsText(stripped.latencies.percentileMilliseconds(0.5))), p99 \(millisecondsText(strippedP99)).")
            sink.notes.append("sync scale, the herd's floor: raw SQLite (the C API, statements prepared before the clock) running the statements the server's push runs for the same \(floor.pushes) first pushes (\(formatCount(Double(floor.ops))) ops, \(formatCount(Double(floor.statements))) statements: the batch's sequence, log-end and op-id checks; per op the checks that its row and the rows it names exist, its log row and its materializer steps; the device's new sequence), in fresh library files made by ServerLibrary.openOrCreate (the same tables, indexes and triggers), one transaction per push (synchronous FULL, automatic checkpoints off), all arriving at once and taken in the devices' order by \(floor.threads) threads (one per core), one writer per library: all committed in \(formatFixed(floor.seconds * 1e3, 1)) ms, p50 \(millisecondsText(floor.latencies.percentileMilliseconds(0.5))), p99 \(millisecondsText(p99)). No HTTP, token checks, decoding, validation, answers or simulated devices: no server that runs these statements answers the herd's 99th push sooner on this machine.")
            sink.json.append(("scale_floor", .object([
                ("pushes", .int(Int64(floor.pushes))), ("ops", .int(Int64(floor.ops))), ("statements", .int(Int64(floor.statements))),
                ("threads", .int(Int64(floor.threads))), ("seconds", .number(floor.seconds)),
                ("p50_ms", .number(floor.latencies.percentileMilliseconds(0.5))), ("p99_ms", .number(p99)),
                ("stripped_seconds", .number(stripped.seconds)), ("stripped_p99_ms", .number(strippedP99)),
            ])))
        }
        sink.rows.append(TableRow(measurement: "sync \(scale.devices) devices: lost/dup/digest", chronicle: "\(scale.lost)/\(scale.duplicated)/\(scale.digestMismatches)",
                                  baseline: "", ratio: "", target: "0/0/0, gap-free", verdict: verdict(scale.clean)))
        sink.notes.append("sync scale: \(scale.devices) devices (stores on \(FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm" : "disk")) over \(scale.libraries) libraries, \(scale.opsPerDevice) queued ops each; the timed round (push + pull) took \(formatFixed(scale.seconds, 2)) s wall clock, pushes spanned \(formatFixed(scale.pushWindowSeconds, 2)) s (\(formatCount(Double(scale.pushed) / scale.pushWindowSeconds)) ops/s); \(scale.requests.count) push requests p50 \(millisecondsText(scale.requests.percentileMilliseconds(0.5))), p99 \(millisecondsText(scaleP99)), max \(millisecondsText(scale.requests.percentileMilliseconds(1))); server side: in the HTTP server p50 \(millisecondsText(scale.serverRequests.percentileMilliseconds(0.5))), p99 \(millisecondsText(scale.serverRequests.percentileMilliseconds(0.99))), in pushNow (incl. the library's writer lock) p50 \(millisecondsText(scale.serverPushNow.percentileMilliseconds(0.5))), p99 \(millisecondsText(scale.serverPushNow.percentileMilliseconds(0.99))); client call start -> pushNow entered p50 \(millisecondsText(scale.beforePushNow.percentileMilliseconds(0.5))), p99 \(millisecondsText(scale.beforePushNow.percentileMilliseconds(0.99))); pushNow done -> client call returned p50 \(millisecondsText(scale.afterPushNow.percentileMilliseconds(0.5))), p99 \(millisecondsText(scale.afterPushNow.percentileMilliseconds(0.99))); \(scale.failedRequests) failed requests, \(scale.retries) retries; audit: lost \(scale.lost), duplicated \(scale.duplicated), unexpected \(scale.unexpected), libraries with seq gaps \(scale.librariesWithGaps), digest mismatches \(scale.digestMismatches), devices with ops left \(scale.devicesWithPending); setup \(formatFixed(scale.setupSeconds, 1)) s, catch-up round \(formatFixed(scale.catchUpSeconds, 2)) s.")

        if var live = scale.sustained {
            let p99 = live.requests.percentileMilliseconds(0.99)
            sink.rows.append(TableRow(measurement: "sync \(live.devices) devices live at once: throughput", chronicle: formatCount(live.opsPerSecond) + " ops/s",
                                      baseline: "", ratio: "", target: "", verdict: ""))
            sink.rows.append(TableRow(measurement: "sync \(live.devices) devices live at once: push p99", chronicle: millisecondsText(p99),
                                      baseline: "", ratio: "", target: "<= 50 ms", verdict: verdict(live.pass)))
            sink.notes.append("sync scale, live fleet: \(live.devices) devices over \(live.libraries) libraries, all live for \(formatFixed(live.seconds, 1)) s, each writing 1-3 ops, running syncOnce() (push, pull, fold) and pausing 0.5-1.5 s: \(live.rounds) rounds, \(live.pushed) ops pushed (\(formatCount(live.opsPerSecond)) ops/s); \(live.requests.count) push requests p50 \(millisecondsText(live.requests.percentileMilliseconds(0.5))), p99 \(millisecondsText(p99)), max \(millisecondsText(live.requests.percentileMilliseconds(1))); whole rounds p50 \(millisecondsText(live.roundTimes.percentileMilliseconds(0.5))), p99 \(millisecondsText(live.roundTimes.percentileMilliseconds(0.99))); server side (its log, the same window): in the HTTP server p50 \(millisecondsText(live.serverRequests.percentileMilliseconds(0.5))), p99 \(millisecondsText(live.serverRequests.percentileMilliseconds(0.99))), in pushNow (incl. the library's writer lock) p50 \(millisecondsText(live.serverPushNow.percentileMilliseconds(0.5))), p99 \(millisecondsText(live.serverPushNow.percentileMilliseconds(0.99))); \(live.failedRequests) failed requests; audit after a catch-up round: lost \(live.audit.lost), duplicated \(live.audit.duplicated), unexpected \(live.audit.unexpected), libraries with seq gaps \(live.audit.librariesWithGaps), digest mismatches \(live.audit.digestMismatches), devices with ops left \(live.audit.devicesWithPending).")
            if let probe = live.disk {
                var disk = probe.syncs
                sink.notes.append("sync scale, live fleet: the disk alone in the same window (a 4 KiB write in place and its fdatasync every 20 ms beside the server's files; a push is answered only once its commit is on the disk): \(disk.count) syncs, p50 \(millisecondsText(disk.percentileMilliseconds(0.5))), p99 \(millisecondsText(disk.percentileMilliseconds(0.99))), max \(millisecondsText(disk.percentileMilliseconds(1))); \(probe.stalls) took 50 ms or more.")
            }
            sink.json.append(("scale_live", .object([
                ("devices", .int(Int64(live.devices))), ("libraries", .int(Int64(live.libraries))), ("seconds", .number(live.seconds)),
                ("rounds", .int(Int64(live.rounds))), ("pushed", .int(Int64(live.pushed))), ("ops_per_second", .number(live.opsPerSecond)),
                ("push_requests", .int(Int64(live.requests.count))), ("push_p50_ms", .number(live.requests.percentileMilliseconds(0.5))),
                ("push_p99_ms", .number(p99)), ("push_max_ms", .number(live.requests.percentileMilliseconds(1))),
                ("server_request_p99_ms", .number(live.serverRequests.percentileMilliseconds(0.99))),
                ("server_push_now_p99_ms", .number(live.serverPushNow.percentileMilliseconds(0.99))),
                ("disk_sync_p99_ms", live.disk.map { var d = $0.syncs; return .number(d.percentileMilliseconds(0.99)) } ?? .null),
                ("disk_sync_max_ms", live.disk.map { var d = $0.syncs; return .number(d.percentileMilliseconds(1)) } ?? .null),
                ("disk_stalls_50ms", live.disk.map { .int(Int64($0.stalls)) } ?? .null),
                ("round_p50_ms", .number(live.roundTimes.percentileMilliseconds(0.5))), ("round_p99_ms", .number(live.roundTimes.percentileMilliseconds(0.99))),
                ("failed_requests", .int(Int64(live.failedRequests))), ("lost", .int(Int64(live.audit.lost))),
                ("duplicated", .int(Int64(live.audit.duplicated))), ("unexpected", .int(Int64(live.audit.unexpected))),
                ("digest_mismatches", .int(Int64(live.audit.digestMismatches))), ("failures", .array(live.audit.failures.prefix(50).map(JSON.string))),
                ("targets", .object([("push_p99_ms_max", .number(50))])), ("pass", .bool(live.pass)),
            ])))
            sink.pass = sink.pass && live.pass
        }
        for burst in scale.bursts {
            var requests = burst.requests, before = burst.beforePushNow, after = burst.afterPushNow
            sink.rows.append(TableRow(measurement: "sync \(scale.devices) devices push only, \(burst.kind.rawValue) (diag.): p99",
                                      chronicle: millisecondsText(requests.percentileMilliseconds(0.99)), baseline: "", ratio: "", target: "", verdict: ""))
            sink.notes.append("sync scale, diagnostic (\(burst.kind.rawValue)): a fresh fleet of \(scale.devices) devices each sent its first push batch at once, no pulls or applies competing: done in \(formatFixed(burst.seconds, 2)) s, push p50 \(millisecondsText(requests.percentileMilliseconds(0.5))), p99 \(millisecondsText(requests.percentileMilliseconds(0.99)))\(after.count > 0 ? "; call start -> pushNow entered p50 \(millisecondsText(before.percentileMilliseconds(0.5))), p99 \(millisecondsText(before.percentileMilliseconds(0.99))); pushNow done -> caller saw the answer p50 \(millisecondsText(after.percentileMilliseconds(0.5))), p99 \(millisecondsText(after.percentileMilliseconds(0.99)))" : " (latency from submission to the concurrent queue)"); \(burst.failures) failures.")
        }
        sink.json.append(("scale", .object([
            ("push_only_bursts", .array(scale.bursts.map { burst in
                var requests = burst.requests, before = burst.beforePushNow, after = burst.afterPushNow
                return .object([("kind", .string(burst.kind.rawValue)), ("seconds", .number(burst.seconds)),
                                ("requests", .int(Int64(requests.count))), ("failures", .int(Int64(burst.failures))),
                                ("p50_ms", .number(requests.percentileMilliseconds(0.5))), ("p99_ms", .number(requests.percentileMilliseconds(0.99))),
                                ("before_push_now_p50_ms", .number(before.percentileMilliseconds(0.5))),
                                ("before_push_now_p99_ms", .number(before.percentileMilliseconds(0.99))),
                                ("after_push_now_p50_ms", .number(after.percentileMilliseconds(0.5))),
                                ("after_push_now_p99_ms", .number(after.percentileMilliseconds(0.99)))])
            })),
            ("devices", .int(Int64(scale.devices))), ("libraries", .int(Int64(scale.libraries))), ("ops_per_device", .int(Int64(scale.opsPerDevice))),
            ("seconds", .number(scale.seconds)), ("ops_per_second", .number(scale.opsPerSecond)), ("push_window_seconds", .number(scale.pushWindowSeconds)),
            ("push_requests", .int(Int64(scale.requests.count))), ("push_p50_ms", .number(scale.requests.percentileMilliseconds(0.5))),
            ("push_p99_ms", .number(scaleP99)), ("push_max_ms", .number(scale.requests.percentileMilliseconds(1))),
            ("server_request_p50_ms", .number(scale.serverRequests.percentileMilliseconds(0.5))),
            ("server_request_p99_ms", .number(scale.serverRequests.percentileMilliseconds(0.99))),
            ("server_push_now_p50_ms", .number(scale.serverPushNow.percentileMilliseconds(0.5))),
            ("server_push_now_p99_ms", .number(scale.serverPushNow.percentileMilliseconds(0.99))),
            ("before_push_now_p50_ms", .number(scale.beforePushNow.percentileMilliseconds(0.5))),
            ("before_push_now_p99_ms", .number(scale.beforePushNow.percentileMilliseconds(0.99))),
            ("after_push_now_p50_ms", .number(scale.afterPushNow.percentileMilliseconds(0.5))),
            ("after_push_now_p99_ms", .number(scale.afterPushNow.percentileMilliseconds(0.99))),
            ("failed_requests", .int(Int64(scale.failedRequests))), ("retries", .int(Int64(scale.retries))),
            ("lost", .int(Int64(scale.lost))), ("duplicated", .int(Int64(scale.duplicated))), ("unexpected", .int(Int64(scale.unexpected))),
            ("libraries_with_gaps", .int(Int64(scale.librariesWithGaps))), ("digest_mismatches", .int(Int64(scale.digestMismatches))),
            ("devices_with_pending", .int(Int64(scale.devicesWithPending))), ("failures", .array(scale.failures.prefix(50).map(JSON.string))),
            ("targets", .object([("push_p99_ms_max", .number(50))])), ("pass", .bool(scale.pass)),
        ])))
        sink.pass = sink.pass && scale.pass
    }
}
