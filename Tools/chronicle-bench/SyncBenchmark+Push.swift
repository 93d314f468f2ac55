import ChronicleCore
import ChroniclePostgres
import ChronicleServer
import ChronicleStore
import ChronicleSync
import Foundation
import ChronicleServerStore

extension SyncBenchmark {
    // MARK: - 2. Push of queued ops

    struct PushResult {
        var ops: Int
        var writeSeconds: Double
        /// From `syncOnce()` starting to the last push answered.
        var seconds: Double
        var baselineSeconds: Double
        /// The same pushNow calls into a service whose maintenance thread compacts the library
        /// meanwhile: with a snapshot at every seal, then with one every 50,000 ops.
        var compacting: [CompactingRun]
        /// The rest of that `syncOnce()`: pulling the pushed ops back as confirmed.
        var pullBackSeconds: Double
        var requests: Samples
        var pushed: Int
        var rejected: Int
        var outcome: String
        var digestMatches: Bool
        var wire: WireSizes
        var typeCounts: [String: Int]
        /// From the server's log: time in `pushNow`, and time inside the HTTP server, per request.
        var serverPushNow: Samples
        var serverRequests: Samples
        /// The pushing device's database file and its WAL, after the round.
        var storeBytes: Int64
        var storeWALBytes: Int64
        /// The same outbox (a copy of the store made before the push) pushed by an engine
        /// with one request in flight at a time, into a server of its own: seconds to the last answer.
        var oneInFlightSeconds: Double
        /// The same pushNow calls into a service whose libraries are ordered in PostgreSQL
        /// (`CHRONICLE_BENCH_POSTGRES`); nil when not set.
        var postgresSeconds: Double?
        /// What sealing that library in PostgreSQL did, after those pushes.
        var postgresSealing: PostgresSealing?
        /// The baseline's library file (all its ops in the log) moved into PostgreSQL (`importLibrary`).
        var postgresMoveSeconds: Double?

        var oneInFlightOpsPerSecond: Double { Double(ops) / oneInFlightSeconds }

        var opsPerSecond: Double { Double(ops) / seconds }
        var baselineOpsPerSecond: Double { Double(ops) / baselineSeconds }
        var ratio: Double { opsPerSecond / baselineOpsPerSecond }
        var pass: Bool { opsPerSecond >= 20_000 && pushed == ops && rejected == 0 && digestMatches }
    }

    /// pushNow into a service compacting on its own meanwhile.
    struct CompactingRun {
        var seconds: Double
        var compactions: UInt64
        var compactedOps: UInt64
        /// The maintenance thread's time in those compactions, all told.
        var compactionSeconds: Double
        /// The seq of the library's newest snapshot at the end.
        var newestSnapshot: Int64?
    }

    func measurePush() throws -> PushResult {
        let n = sizes.pushOps
        let batchOps = engineDefaults.pushBatchOpsMax
        let rig = try SyncRig(directory: directory + "/sync-push-server", logged: true)
        defer { rig.stop() }
        var ids = SplitMix64(seed: seed ^ 0x9021)
        let libraryID = try rig.addLibrary("writer", libraryID: ids.uuid())
        let device = try rig.device(user: "writer", libraryID: libraryID, path: directory + "/sync-push.chronicle",
                                    deviceID: ids.uuid(), seed: seed ^ 0x9022)

        progress("sync push: writing \(formatCount(Double(n))) local ops (DeviceStore.write, one durable transaction each)…")
        var writer = LocalWriter(seed: seed ^ 0x9023, vocabulary: vocabulary)
        let w0 = nowNanoseconds()
        try writer.write(n, to: device.store, progressLabel: "sync push")
        let writeSeconds = Double(nowNanoseconds() - w0) / 1e9
        let queued = try device.store.unacknowledgedOps(limit: n + 1)
        guard queued.count == n else { throw BenchError("sync push: \(queued.count) ops queued; expected \(n)") }
        let wire = WireSizes(try Segment(libraryID: libraryID, ops: Array(queued.prefix(batchOps))))
        // A copy of the device as it stands, for the same push with one request in flight.
        let copyPath = directory + "/sync-push-one-in-flight.chronicle"
        remove(copyPath)
        try Database(path: device.store.path).execute("VACUUM INTO ?1", [.text(copyPath)])

        // Baseline: the same segments straight into a second, in-process service (no HTTP).
        progress("sync push: baseline, the same \(formatCount(Double(n / batchOps))) batches of \(batchOps) straight into SyncService.pushNow…")
        let baseService = try SyncService(dataDirectory: directory + "/sync-push-baseline")
        _ = try baseService.accounts.addUser("writer", password: SyncRig.password, schema: .readItLater, libraryID: libraryID)
        let baseToken = try baseService.accounts.registerDevice(user: "writer", password: SyncRig.password, deviceID: device.store.deviceID).token
        /// The queued ops in batches straight into `service.pushNow`: nanoseconds inside the calls.
        func pushAll(into service: SyncService, token: String) throws -> UInt64 {
            var nanoseconds: UInt64 = 0
            for chunk in queued.chunked(batchOps) {
                let segment = try Segment(libraryID: libraryID, ops: Array(chunk))
                let t0 = nowNanoseconds()
                let response = try service.pushNow(segment, token: token)
                nanoseconds += nowNanoseconds() - t0
                guard response.results.allSatisfy({ if case .accepted = $0.outcome { true } else { false } }) else {
                    throw BenchError("sync push: the in-process server refused ops: \(response.results.filter { if case .accepted = $0.outcome { false } else { true } }.prefix(3))")
                }
            }
            return nanoseconds
        }
        let baseNanoseconds = try pushAll(into: baseService, token: baseToken)

        // With CHRONICLE_BENCH_POSTGRES (a libpq connection string): the same batches into a service
        // whose libraries are ordered in that PostgreSQL database (`serve --postgres`), in process.
        var postgresSeconds: Double?
        var postgresSealing: PostgresSealing?
        var postgresMoveSeconds: Double?
        if let conninfo = ProcessInfo.processInfo.environment["CHRONICLE_BENCH_POSTGRES"], !conninfo.isEmpty {
            progress("sync push: the same batches into SyncService.pushNow with the order in PostgreSQL…")
            let store = try PostgresServerStore(conninfo: conninfo, cacheDirectory: directory + "/sync-push-postgres-replicas", schema: .readItLater)
            _ = try store.deleteLibrary(libraryID)   // left by an earlier run
            let service = try SyncService(dataDirectory: directory + "/sync-push-postgres", shared: store)
            _ = try service.accounts.addUser("writer", password: SyncRig.password, schema: .readItLater, libraryID: libraryID)
            let token = try service.accounts.registerDevice(user: "writer", password: SyncRig.password, deviceID: device.store.deviceID).token
            postgresSeconds = Double(try pushAll(into: service, token: token)) / 1e9
            if try store.head(libraryID) != Int64(n) { syncFailure("PostgreSQL holds \(try store.head(libraryID)) ops after the push; expected \(n)") }
            postgresSealing = try measurePostgresSealing(conninfo, service: service, libraryID: libraryID)
            _ = try store.deleteLibrary(libraryID)
            // The baseline's library file (the same ops, every one in its log) moved into PostgreSQL
            // as `server move-to-postgres` moves it, then read back into a fresh replica.
            progress("sync push: the baseline's library file moved into PostgreSQL (importLibrary)…")
            let file = try baseService.library(libraryID)
            let m0 = nowNanoseconds()
            _ = try store.importLibrary(file)
            let moveSeconds = Double(nowNanoseconds() - m0) / 1e9
            let readBack = try PostgresServerStore(conninfo: conninfo, cacheDirectory: directory + "/sync-push-postgres-moved", schema: .readItLater)
            if try readBack.library(libraryID).digest() != file.digest() { syncFailure("the library moved into PostgreSQL reads back with another digest") }
            postgresMoveSeconds = moveSeconds
            _ = try store.deleteLibrary(libraryID)
            try? FileManager.default.removeItem(atPath: directory + "/sync-push-postgres-moved")
        }

        // The same again into a service that compacts the library on its own meanwhile (keep 10,000 hot,
        // seal whole segments of 10,000, look every 0.2 s): what the running server's maintenance costs pushes.
        // Twice: a snapshot at every seal (before 12-02's cadence), then one once 50,000 ops lie past the last.
        func pushWhileCompacting(snapshotEveryOps: Int64?, name: String) throws -> CompactingRun {
            progress("sync push: the same batches into SyncService.pushNow while its maintenance thread compacts (\(name))…")
            var maintenance = MaintenancePolicy()
            maintenance.compaction?.keepOps = 10_000
            maintenance.compaction?.snapshotEveryOps = snapshotEveryOps
            maintenance.checkIntervalSeconds = 0.2
            let service = try SyncService(dataDirectory: directory + "/sync-push-compacting-\(name)", maintenance: maintenance)
            _ = try service.accounts.addUser("writer", password: SyncRig.password, schema: .readItLater, libraryID: libraryID)
            let token = try service.accounts.registerDevice(user: "writer", password: SyncRig.password, deviceID: device.store.deviceID).token
            service.startMaintenance()
            let nanoseconds = try pushAll(into: service, token: token)
            service.stopMaintenance()
            let counts = service.metrics.compactionCounts
            let newest = try service.library(libraryID).latestSnapshotSeq()
            return CompactingRun(seconds: Double(nanoseconds) / 1e9, compactions: counts.compactions, compactedOps: counts.opsSealed,
                                 compactionSeconds: counts.seconds, newestSnapshot: newest)
        }
        let everySeal = try pushWhileCompacting(snapshotEveryOps: nil, name: "every-seal")
        let cadence = try pushWhileCompacting(snapshotEveryOps: 50_000, name: "cadence")

        // The measurement: the engine pushes the outbox over HTTP; the push part of syncOnce is timed.
        progress("sync push: the device pushes \(formatCount(Double(n))) ops over HTTP (SyncEngine.syncOnce)…")
        let engine = device.engine
        let t0 = nowNanoseconds()
        let report = try runBlocking { await engine.syncOnce() }
        let t1 = nowNanoseconds()
        let pushes = device.transport.pushes
        guard let lastPush = pushes.last else { throw BenchError("sync push: the engine pushed nothing") }
        var requests = Samples(capacity: pushes.count)
        for call in pushes { requests.add(call.nanoseconds) }
        if report.outcome != .synced || report.pushed != n || report.rejected != 0 {
            syncFailure("the push ended \(report.outcome) with \(report.pushed) pushed and \(report.rejected) rejected of \(n)")
        }
        if pushes.contains(where: \.failed) { syncFailure("\(pushes.filter(\.failed).count) push requests failed and were retried") }
        let library = try rig.service.library(libraryID)
        let serverDigest = try library.digest(), deviceDigest = try device.store.digest()
        if serverDigest != deviceDigest { syncFailure("after the push the device's digest differs from the server's") }
        if library.head != Int64(n) { syncFailure("the server holds \(library.head) ops after the push; expected \(n)") }
        let logged = rig.loggedPushTimes()
        var result = PushResult(ops: n, writeSeconds: writeSeconds, seconds: Double(lastPush.end - t0) / 1e9,
                                baselineSeconds: Double(baseNanoseconds) / 1e9, compacting: [everySeal, cadence], pullBackSeconds: Double(t1 - lastPush.end) / 1e9,
                                requests: requests, pushed: report.pushed, rejected: report.rejected, outcome: "\(report.outcome)",
                                digestMatches: serverDigest == deviceDigest && library.head == Int64(n), wire: wire,
                                typeCounts: writer.typeCounts, serverPushNow: logged.pushNow, serverRequests: logged.request,
                                storeBytes: fileBytes(device.store.path), storeWALBytes: fileBytes(device.store.path + "-wal"),
                                oneInFlightSeconds: 0, postgresSeconds: postgresSeconds, postgresSealing: postgresSealing,
                                postgresMoveSeconds: postgresMoveSeconds)
        progress("sync push: chronicle \(formatCount(result.opsPerSecond)) ops/s over HTTP, pushNow in process \(formatCount(result.baselineOpsPerSecond)) ops/s (\(ratioText(result.ratio)))")
        remove(device.store.path)

        // The comparison: the copied outbox, one push request in flight at a time, into a fresh server.
        progress("sync push: the same outbox with one push request in flight at a time…")
        let single = try SyncRig(directory: directory + "/sync-push-one-in-flight-server")
        defer { single.stop() }
        _ = try single.addLibrary("writer", libraryID: libraryID)
        var oneAtATime = engineDefaults
        oneAtATime.pushRequestsInFlightMax = 1
        let copy = try single.device(user: "writer", libraryID: libraryID, path: copyPath, deviceID: device.store.deviceID,
                                     seed: seed ^ 0x9024, configuration: oneAtATime, existing: true)
        let c0 = nowNanoseconds()
        let copyReport = try runBlocking { await copy.engine.syncOnce() }
        guard let copyLast = copy.transport.pushes.last, copyReport.outcome == .synced, copyReport.pushed == n,
              try single.service.library(libraryID).head == Int64(n) else {
            throw BenchError("sync push: one in flight ended \(copyReport.outcome) with \(copyReport.pushed) of \(n) pushed")
        }
        result.oneInFlightSeconds = Double(copyLast.end - c0) / 1e9
        progress("sync push: one request in flight \(formatCount(result.oneInFlightOpsPerSecond)) ops/s")
        remove(copyPath)
        return result
    }
}

/// Sealing a library whose order is in PostgreSQL (`serve --postgres`): the bytes its history
/// takes there before and after, a replica's compaction with and without the handover of its
/// segments, and a replica made anew from the log rows against one made from the segments.
struct PostgresSealing {
    var ops: Int
    var opsSealed: Int64
    /// `pg_column_size` of the library's log rows, then of its log rows and segments.
    var bytesBefore: Int64
    var bytesAfter: Int64
    /// A replica's compaction that sealed and handed the segments over, and the same compaction
    /// of another replica afterwards, which found them there.
    var compactWithHandoverSeconds: Double
    var compactSeconds: Double
    /// A new server's replica of the library, made from PostgreSQL: before sealing (every op a
    /// row) and after (segments, kept sealed, then the rows after them).
    var replicaFromRowsSeconds: Double
    var replicaFromSegmentsSeconds: Double
    var digestsMatch: Bool
    /// Another device's small pushes (`pushBatchOps` ops each, one after another, into the
    /// service): first with nothing else running, then while the handover above ran.
    var pushesAlone: Samples
    var pushesDuringHandover: Samples
    static let pushBatchOps = 5
}

extension SyncBenchmark {
    func measurePostgresSealing(_ conninfo: String, service: SyncService, libraryID: UUID) throws -> PostgresSealing {
        let key = libraryID.lowercased
        let pg = try PostgresConnection(conninfo)
        func bytes() throws -> Int64 {
            try pg.execute("SELECT coalesce(sum(pg_column_size(l.*)), 0) FROM chronicle_log l WHERE library_id = $1", [key]).int(0, 0)
                + pg.execute("SELECT coalesce(sum(pg_column_size(s.*)), 0) FROM chronicle_segments s WHERE library_id = $1", [key]).int(0, 0)
        }
        var stores: [PostgresServerStore] = []
        func freshReplica(_ name: String) throws -> (seconds: Double, library: ServerLibrary) {
            let store = try PostgresServerStore(conninfo: conninfo, cacheDirectory: directory + "/sync-push-postgres-\(name)", schema: .readItLater)
            stores.append(store)
            let t0 = nowNanoseconds()
            let library = try store.library(libraryID)
            return (Double(nowNanoseconds() - t0) / 1e9, library)
        }
        var policy = CompactionPolicy()
        policy.keepOps = 10_000
        policy.wholeSegmentsOnly = true
        policy.givesSpaceBack = false
        let before = try bytes()
        progress("sync push, PostgreSQL: a replica made anew from \(formatCount(Double(sizes.pushOps))) log rows…")
        let fromRows = try freshReplica("rows")

        // Another device's ops, pushed a few at a time alone, then while the handover runs.
        let pusherPath = directory + "/sync-push-postgres-pusher.chronicle"
        remove(pusherPath)
        defer { remove(pusherPath) }
        var ids = SplitMix64(seed: seed ^ 0x9025)
        let pusher = try DeviceStore.create(at: pusherPath, schema: .readItLater, libraryID: libraryID, deviceID: ids.uuid(),
                                            clock: SystemClock(), ids: SeededV7IDGenerator(seed: seed ^ 0x9026, clock: SystemClock()))
        var writer = LocalWriter(seed: seed ^ 0x9027, vocabulary: vocabulary)
        try writer.write(4_000, to: pusher)
        let pusherOps = try pusher.unacknowledgedOps(limit: 4_001)
        let token = try service.accounts.registerDevice(user: "writer", password: SyncRig.password, deviceID: pusher.deviceID).token
        let batches = try pusherOps.chunked(PostgresSealing.pushBatchOps).map { try Segment(libraryID: libraryID, ops: Array($0)) }
        let aloneCount = 100
        /// Pushes `batches[range]` one after another until `stop` is set: each push's nanoseconds.
        @Sendable func push(_ range: Range<Int>, stop: Locked<Bool>) throws -> Samples {
            var samples = Samples(capacity: range.count)
            for index in range where !stop.withLock({ $0 }) {
                let t0 = nowNanoseconds()
                let response = try service.pushNow(batches[index], token: token)
                samples.add(nowNanoseconds() - t0)
                guard response.results.allSatisfy({ if case .accepted = $0.outcome { true } else { false } }) else {
                    throw BenchError("sync push, PostgreSQL: a push beside the handover was refused: \(response.results.prefix(3))")
                }
            }
            return samples
        }
        progress("sync push, PostgreSQL: \(aloneCount) pushes of \(PostgresSealing.pushBatchOps) ops by another device, alone…")
        let alone = try push(0..<aloneCount, stop: Locked(false))
        progress("sync push, PostgreSQL: that replica compacted, its segments handed over, while the other device pushes…")
        let stop = Locked(false)
        let during = Locked<Swift.Result<Samples, any Error>?>(nil)
        let pushing = Thread {
            let result = Swift.Result { try push(aloneCount..<batches.count, stop: stop) }
            during.withLock { $0 = result }
        }
        pushing.start()
        var t0 = nowNanoseconds()
        let sealed: CompactionReport
        do {
            defer { stop.withLock { $0 = true } }
            sealed = try fromRows.library.compact(policy)
        }
        let withHandover = Double(nowNanoseconds() - t0) / 1e9
        while during.withLock({ $0 == nil }) { usleep(1_000) }
        let duringHandover = try during.withLock { $0! }.get()
        progress("sync push, PostgreSQL: the service's replica compacted, its segments there already…")
        t0 = nowNanoseconds()
        _ = try service.compact(library: libraryID, policy: policy)
        let without = Double(nowNanoseconds() - t0) / 1e9
        let after = try bytes()
        progress("sync push, PostgreSQL: a replica made anew from the segments and the rows after them…")
        let fromSegments = try freshReplica("segments")
        try fromRows.library.catchUp()   // the other device's pushes
        let digests = try [fromRows.library, fromSegments.library, service.library(libraryID)].map { try $0.digest() }
        for name in ["rows", "segments"] { try? FileManager.default.removeItem(atPath: directory + "/sync-push-postgres-\(name)") }
        return PostgresSealing(ops: sizes.pushOps, opsSealed: sealed.opsSealed, bytesBefore: before, bytesAfter: after,
                               compactWithHandoverSeconds: withHandover, compactSeconds: without,
                               replicaFromRowsSeconds: fromRows.seconds, replicaFromSegmentsSeconds: fromSegments.seconds,
                               digestsMatch: Set(digests).count == 1, pushesAlone: alone, pushesDuringHandover: duringHandover)
    }
}
