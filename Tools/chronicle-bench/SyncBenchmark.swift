import ChronicleCore
import ChroniclePostgres
import ChronicleServer
import ChronicleStore
import ChronicleSync
import Foundation
import ChronicleServerStore

/// The sync measurements (issue 3), each against a real `SyncServer` on loopback
/// HTTP with its default configuration, and each beside a baseline from the same run:
///
/// 1. pull of an N-op library onto an empty device (`SyncEngine.syncOnce`, bulk
///    catch-up) vs `DeviceStore.applyConfirmedInBulk` of the same ops;
/// 2. push of a device's queued ops vs the same pushes straight into `SyncService.pushNow`;
/// 3. bytes per op on the wire, segment vs JSON, for a pull page and a push batch;
/// 4. write-to-other-device latency with long-poll (`SyncBenchmark+Latency.swift`);
/// 5. many devices syncing at once, with a lost/duplicated-op audit (`SyncBenchmark+Scale.swift`);
/// 6. a file uploaded and fetched, in chunks (`SyncBenchmark+Blobs.swift`).
struct SyncBenchmark {
    struct Sizes {
        var pullOps: Int
        var pushOps: Int
        var latencySamples: Int
        var devices: Int
        var opsPerDevice: Int
        var libraries: Int

        static func of(ops: Int, quick: Bool) -> Sizes {
            quick ? Sizes(pullOps: ops, pushOps: 20_000, latencySamples: 50, devices: 50, opsPerDevice: 20, libraries: 20)
                : Sizes(pullOps: ops, pushOps: 100_000, latencySamples: 200, devices: 200, opsPerDevice: 50, libraries: 20)
        }
    }

    /// nil for a part left out with `CHRONICLE_BENCH_SYNC_PARTS`.
    struct Result {
        var pull: PullResult?
        var push: PushResult?
        var latency: LatencyResult?
        var scale: ScaleResult?
        /// The latency with A and B on two servers sharing PostgreSQL (`CHRONICLE_BENCH_POSTGRES`).
        var latencyAcross: LatencyResult?
        /// A file uploaded and fetched (`SyncBenchmark+Blobs.swift`).
        var blobs: BlobResult?
    }

    let directory: String
    let sizes: Sizes
    let seed: UInt64
    let vocabulary: Vocabulary
    let keep: Bool
    /// The engine's defaults, which every measurement uses.
    let engineDefaults = SyncEngine.Configuration()

    /// Diagnostic: `CHRONICLE_BENCH_SYNC_PULL_PAGE=N` sets the pull measurement's page size
    /// (the engine's `pullPageOpsMax` and `bulkPullPageOpsMax`, and the baseline's batch) instead of the defaults.
    var pullPageOverride: Int? {
        ProcessInfo.processInfo.environment["CHRONICLE_BENCH_SYNC_PULL_PAGE"].flatMap(Int.init)
    }

    /// Diagnostic: `CHRONICLE_BENCH_SYNC_PARTS=pull,push,latency,scale,blobs` runs only those parts;
    /// `bursts` (never run by default) runs only push-only bursts, several in a row (`measureBursts`).
    static var parts: Set<String> {
        let all: Set<String> = ["pull", "push", "latency", "scale", "blobs"]
        guard let text = ProcessInfo.processInfo.environment["CHRONICLE_BENCH_SYNC_PARTS"] else { return all }
        return all.union(["bursts"]).intersection(text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) })
    }

    func run() throws -> Result {
        let parts = Self.parts
        let pull = parts.contains("pull") ? try measurePull() : nil
        let push = parts.contains("push") ? try measurePush() : nil
        let latency = parts.contains("latency") ? try measureLatency() : nil
        let scale = parts.contains("scale") ? try measureScale() : nil
        let blobs = parts.contains("blobs") ? try measureBlobs() : nil
        if parts.contains("bursts") { try measureBursts() }
        var across: LatencyResult?
        if parts.contains("latency"), let conninfo = ProcessInfo.processInfo.environment["CHRONICLE_BENCH_POSTGRES"], !conninfo.isEmpty {
            progress("sync latency: again with A and B on two servers sharing PostgreSQL…")
            let stores = try ["1", "2"].map {
                try PostgresServerStore(conninfo: conninfo, cacheDirectory: directory + "/sync-latency-postgres-replicas-\($0)", schema: .readItLater)
            }
            var ids = SplitMix64(seed: seed ^ 0x9041)
            _ = try stores[0].deleteLibrary(ids.uuid())   // left by an earlier run
            across = try measureLatency(across: (stores[0], stores[1]))
            var again = SplitMix64(seed: seed ^ 0x9041)
            _ = try stores[0].deleteLibrary(again.uuid())
        }
        return Result(pull: pull, push: push, latency: latency, scale: scale, latencyAcross: across, blobs: blobs)
    }

    func remove(_ paths: String...) {
        guard !keep else { return }
        for path in paths {
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        }
    }

    // MARK: - 1. Pull onto an empty device

    struct PullResult {
        var ops: Int
        var seconds: Double
        var baselineSeconds: Double
        var pulled: Int
        var outcome: String
        var digestMatches: Bool
        var baselineDigestMatches: Bool
        var uploadSeconds: Double
        var convertedParsed: Int
        var pages: Int
        /// Baseline feed, untimed for the baseline: the server's reads of the log, and the segment codec on them.
        var serverReadSeconds: Double
        var encodeSeconds: Double
        var decodeSeconds: Double
        /// Sum of the HTTP pull calls' durations (they overlap the engine's apply).
        var pullCallSeconds: Double
        var wire: WireSizes
        var pageOps: Int
        /// The pulled device's database file and its WAL, after the pull.
        var storeBytes: Int64
        var storeWALBytes: Int64
        var baselineWALBytes: Int64
        var serverBytes: Int64
        /// Diagnostic (`CHRONICLE_BENCH_SYNC_DIAG=1`): the baseline again with the server's largest pages.
        var largePage: (ops: Int, seconds: Double, walBytes: Int64)?
        /// The files collection's read of the library's projection (`ServerLibrary.blobNames`), and
        /// the same statements on a raw read-only connection (the faster of two runs each).
        var namesSeconds: Double
        var namesRawSeconds: Double

        var opsPerSecond: Double { Double(ops) / seconds }
        var baselineOpsPerSecond: Double { Double(ops) / baselineSeconds }
        var ratio: Double { opsPerSecond / baselineOpsPerSecond }
        var pass: Bool { opsPerSecond >= 100_000 && ratio >= 0.7 && digestMatches && pulled == ops }
    }

    /// The baseline's batches: the server library read back page by page (and each
    /// page through the segment codec, as the wire would), all untimed.
    final class ServerLogFeed: Sequence, IteratorProtocol {
        let library: ServerLibrary
        let pageOps: Int
        var cursor: Int64 = 0
        var failure: Error?
        var readNanoseconds: UInt64 = 0
        var encodeNanoseconds: UInt64 = 0
        var decodeNanoseconds: UInt64 = 0
        var excluded: UInt64 = 0

        init(library: ServerLibrary, pageOps: Int) {
            self.library = library
            self.pageOps = pageOps
        }

        func next() -> [Op]? {
            let t0 = nowNanoseconds()
            defer { excluded += nowNanoseconds() - t0 }
            guard failure == nil else { return nil }
            do {
                let ops = try library.pull(after: cursor, limit: pageOps).ops
                let t1 = nowNanoseconds()
                guard let last = ops.last?.serverSeq else { return nil }
                let bytes = SegmentCodec.encode(try Segment(libraryID: library.libraryID, ops: ops))
                let t2 = nowNanoseconds()
                let decoded = try SegmentCodec.decode(bytes).ops
                let t3 = nowNanoseconds()
                readNanoseconds += t1 - t0
                encodeNanoseconds += t2 - t1
                decodeNanoseconds += t3 - t2
                cursor = last
                return decoded
            } catch {
                failure = error
                return nil
            }
        }
    }

    func measurePull() throws -> PullResult {
        let n = sizes.pullOps
        // Without the server's own compaction, which starts a minute after the first push: once the
        // library's build took about that long (12-03), it sealed 900,000 ops during the pull, on
        // one of the two cores the pull uses. The push part measures pushes beside it.
        let rig = try SyncRig(directory: directory + "/sync-pull-server", maintenance: .off)
        defer { rig.stop() }
        var ids = SplitMix64(seed: seed ^ 0x9011)
        let libraryID = try rig.addLibrary("reader", libraryID: ids.uuid())
        let uploaderID = ids.uuid()
        let uploadToken = try rig.token(user: "reader", deviceID: uploaderID)

        // The server library: the workload pushed in process, 1,000 ops a request.
        progress("sync pull: building a \(formatCount(Double(n)))-op library on the server (pushNow, 1,000 ops a batch)…")
        var feed = PushableLibrary(seed: seed, total: n, libraryID: libraryID, deviceID: uploaderID, vocabulary: vocabulary)
        var uploadNanoseconds: UInt64 = 0
        var throttle = Throttle()
        while !feed.isDone {
            let batch = feed.nextBatch(1_000)
            guard !batch.isEmpty else { break }
            let segment = try Segment(libraryID: libraryID, ops: batch)
            let t0 = nowNanoseconds()
            let response = try rig.service.pushNow(segment, token: uploadToken)
            uploadNanoseconds += nowNanoseconds() - t0
            for (result, op) in zip(response.results, batch) {
                guard case .accepted = result.outcome else {
                    throw BenchError("sync pull: the server did not accept op \(op.deviceSeq) (\(op.type)): \(result.outcome)")
                }
            }
            if throttle.ready() {
                progress("sync pull: \(formatCount(Double(feed.produced)))/\(formatCount(Double(n))) ops on the server, \(formatCount(Double(feed.produced) / (Double(uploadNanoseconds) / 1e9))) ops/s (pushNow in process)")
            }
        }
        let library = try rig.service.library(libraryID)
        guard feed.produced == n, library.head == Int64(n) else {
            throw BenchError("sync pull: the server library holds \(library.head) ops; expected \(n)")
        }
        let serverDigest = try library.digest()

        // The daily files collection reads the projection for the addresses its rows name.
        progress("sync pull: the files collection's read of the projection (ServerLibrary.blobNames), and raw SQLite's…")
        var (namesSeconds, namesRawSeconds) = (Double.infinity, Double.infinity)
        let raw = try RawDatabase(path: library.path, readOnly: true)
        // A server's projection has no shadow tables for the entities only the server writes.
        let queries = try BlobNames.queries(ProjectionSchema(schema: .readItLater), deletedBefore: nil).filter { query in
            try raw.scalarInt("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = '\(query.table)'") == 1
        }
        for _ in 0..<2 {
            let r0 = nowNanoseconds()
            for query in queries { _ = try raw.rows(query.sql) }
            namesRawSeconds = min(namesRawSeconds, Double(nowNanoseconds() - r0) / 1e9)
            let n0 = nowNanoseconds()
            _ = try library.blobNames(deletedBefore: nil)
            namesSeconds = min(namesSeconds, Double(nowNanoseconds() - n0) / 1e9)
        }

        // Wire sizes of a mature 10,000-op page.
        let page = try library.pull(after: Int64(n / 2), limit: min(10_000, n - n / 2)).ops
        let wire = WireSizes(try Segment(libraryID: libraryID, ops: page))

        // The measurement: a fresh device pulls everything over HTTP.
        let pullProgress = Locked(Throttle())
        var configuration = engineDefaults
        // The whole log, never a snapshot (the lifecycle part measures that start).
        configuration.snapshotStartOpsMin = .max
        if let page = pullPageOverride {
            configuration.pullPageOpsMax = page
            configuration.bulkPullPageOpsMax = page
        }
        let device = try rig.device(user: "reader", libraryID: libraryID, path: directory + "/sync-pulled.chronicle",
                                    deviceID: ids.uuid(), seed: seed ^ 0x9012, configuration: configuration) { page in
            if pullProgress.withLock({ $0.ready() }) {
                progress("sync pull: \(formatCount(Double(page.nextCursor)))/\(formatCount(Double(page.head))) ops fetched over HTTP")
            }
        }
        progress("sync pull: a fresh device pulls \(formatCount(Double(n))) ops over HTTP (SyncEngine.syncOnce)…")
        let engine = device.engine
        let t0 = nowNanoseconds()
        let report = try runBlocking { await engine.syncOnce() }
        let seconds = Double(nowNanoseconds() - t0) / 1e9
        progress("sync pull: \(formatCount(Double(report.pulled) / seconds)) ops/s end to end; comparing digests…")
        // The device fills its phrase indexes in the background after the catch-up: done before anything else is timed.
        try completePhraseIndexes(device.store, label: "sync pull")
        let deviceDigest = try device.store.digest()
        if deviceDigest != serverDigest { syncFailure("the pulled device's digest \(deviceDigest) differs from the server's \(serverDigest)") }
        if report.outcome != .synced || report.pulled != n { syncFailure("the pull ended \(report.outcome) after \(report.pulled) of \(n) ops") }
        let pulls = device.transport.pulls

        // Baseline: the same ops, read back from the server, into a fresh store through bulk apply,
        // in the pages the engine's bulk catch-up asked for (one transaction each, as the engine's).
        let basePage = configuration.bulkPullPageOpsMax
        progress("sync pull: baseline, applyConfirmedInBulk of the same ops in pages of \(formatCount(Double(basePage)))…")
        let basePath = directory + "/sync-pull-baseline.chronicle"
        let baseStore = try DeviceStore.create(at: basePath, schema: .readItLater, libraryID: libraryID, deviceID: ids.uuid(),
                                               clock: SystemClock(), ids: SeededV7IDGenerator(seed: seed ^ 0x9013, clock: SystemClock()))
        let logFeed = ServerLogFeed(library: library, pageOps: basePage)
        let b0 = nowNanoseconds()
        try baseStore.applyConfirmedInBulk(logFeed)
        let baseNanoseconds = nowNanoseconds() - b0 - logFeed.excluded
        if let failure = logFeed.failure { throw failure }
        try completePhraseIndexes(baseStore, label: "sync pull baseline")
        let baseDigest = try baseStore.digest()
        let baseWALBytes = fileBytes(basePath + "-wal")
        remove(basePath)

        // Diagnostic: the same baseline folding the server's largest page per transaction.
        var largePage: (ops: Int, seconds: Double, walBytes: Int64)? = nil
        if ProcessInfo.processInfo.environment["CHRONICLE_BENCH_SYNC_DIAG"] == "1" {
            let pageOps = ServiceLimits().pullOpsMax
            progress("sync pull: diagnostic, applyConfirmedInBulk of the same ops in pages of \(formatCount(Double(pageOps)))…")
            let path = directory + "/sync-pull-large-pages.chronicle"
            let store = try DeviceStore.create(at: path, schema: .readItLater, libraryID: libraryID, deviceID: ids.uuid(),
                                               clock: SystemClock(), ids: SeededV7IDGenerator(seed: seed ^ 0x9014, clock: SystemClock()))
            let feed = ServerLogFeed(library: library, pageOps: pageOps)
            let l0 = nowNanoseconds()
            try store.applyConfirmedInBulk(feed)
            try completePhraseIndexes(store, label: "sync pull diagnostic")
            let nanoseconds = nowNanoseconds() - l0 - feed.excluded
            if let failure = feed.failure { throw failure }
            if try store.digest() != serverDigest { syncFailure("the large-page baseline's digest differs from the server's") }
            largePage = (pageOps, Double(nanoseconds) / 1e9, fileBytes(path + "-wal"))
            remove(path)
        }

        let result = PullResult(
            ops: n, seconds: seconds, baselineSeconds: Double(baseNanoseconds) / 1e9, pulled: report.pulled,
            outcome: "\(report.outcome)", digestMatches: deviceDigest == serverDigest, baselineDigestMatches: baseDigest == serverDigest,
            uploadSeconds: Double(uploadNanoseconds) / 1e9, convertedParsed: feed.convertedParsed, pages: pulls.count,
            serverReadSeconds: Double(logFeed.readNanoseconds) / 1e9, encodeSeconds: Double(logFeed.encodeNanoseconds) / 1e9,
            decodeSeconds: Double(logFeed.decodeNanoseconds) / 1e9,
            pullCallSeconds: Double(pulls.reduce(0) { $0 + $1.nanoseconds }) / 1e9, wire: wire,
            pageOps: basePage, storeBytes: fileBytes(device.store.path), storeWALBytes: fileBytes(device.store.path + "-wal"),
            baselineWALBytes: baseWALBytes, serverBytes: databaseBytes(library.path), largePage: largePage,
            namesSeconds: namesSeconds, namesRawSeconds: namesRawSeconds)
        progress("sync pull: chronicle \(formatCount(result.opsPerSecond)) ops/s, bulk apply \(formatCount(result.baselineOpsPerSecond)) ops/s (\(ratioText(result.ratio)))")
        remove(device.store.path)
        return result
    }
}
