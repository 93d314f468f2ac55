import ChronicleCore
import ChronicleStore
import Foundation


/// The client sync engine: pushes the outbox strictly in order, pulls the
/// confirmed log and folds it in with pending ops rebased on top.
///
/// Transient failures keep every op and retry from the same position with capped
/// exponential backoff and jitter; a terminal answer for one op drops that op,
/// fetches the server's verdict for its row, folds it in and leaves a notice, so
/// one doomed op never wedges the queue. An op leaves the outbox only when the
/// confirmed log reaches it.
///
/// ```swift
/// let engine = SyncEngine(store: store, transport: HTTPTransport(baseURL: url, library: store.libraryID, token: token))
/// let report = await engine.syncOnce()
/// Task { await engine.run() }          // keep syncing; long-polls for changes
/// engine.trigger(.foreground)          // the app came back: sync now
/// ```
public actor SyncEngine {
    /// The engine's limits and timings: batch sizes, long-poll wait, backoff, snapshots, compaction.
    public struct Configuration: Sendable {
        /// Ops per push request.
        public var pushBatchOpsMax = 500
        /// Push requests on their way at once. With 2, the next batch is sent while the one
        /// ahead of it waits for its answer, so the server starts on it as soon as it has
        /// answered, instead of a round trip and the device's turn later. The server takes a
        /// device's ops in order: a batch that arrives first waits there for the one ahead
        /// (`ServiceLimits.pushGapWaitMilliseconds`). Answers are read in order, and when a
        /// batch fails the one behind it is dropped and sent again. 1: one at a time.
        public var pushRequestsInFlightMax = 2
        /// Ops per pull page.
        public var pullPageOpsMax = 2_000
        /// Ops per pull page during a bulk catch-up (each page is one transaction: fewer, larger
        /// ones went 1.4x faster over 1,000,000 ops). The server caps pages at 10,000 by default.
        public var bulkPullPageOpsMax = 10_000
        /// When at least this many ops are waiting on the server, fold them with bulk apply
        /// (search indexes rebuilt once at the end) instead of batch by batch.
        public var bulkCatchUpOpsMin = 20_000
        /// During a bulk catch-up, pages of at least this many ops (all but the last) are kept
        /// as sealed segments rather than log blocks (`DeviceStore.prepareBatch`).
        public var sealOnArrivalOpsMin = DeviceStore.sealOnArrivalOpsMin
        /// Called after each chunk of a file (blob) the server took: the file, the bytes it holds
        /// of it, and its length (a progress bar for a large upload).
        public var blobUploadProgress: (@Sendable (BlobRef, Int64, Int64) -> Void)?
        /// How long `run()` asks the server to hold a pull open.
        public var longPollMilliseconds = 25_000
        public var backoffBaseMilliseconds = 200
        public var backoffMaxMilliseconds = 60_000
        /// Transient failures in a row (without any op getting through) that one `syncOnce`
        /// retries before reporting offline.
        public var retriesPerRoundMax = 6
        /// `run()` syncs at least this often even without triggers.
        public var scheduleSeconds = 300.0
        /// A new device (cursor 0) starts from the server's snapshot instead of replaying
        /// every op when the snapshot holds at least this many ops.
        public var snapshotStartOpsMin: Int64 = 10_000
        /// A store that has never held anything, starting from the server's snapshot, first asks
        /// for the server's start image of it (the snapshot as a device store, indexes built)
        /// and takes it whole (`DeviceStore.adoptStartImage`); where there is none, or it cannot be
        /// taken, it starts from the snapshot itself.
        public var startImages = true
        /// After a round that synced, compact the store when the policy has whole segments to
        /// seal (or history past its horizon to drop): the log stays bounded without the app
        /// scheduling it. Each step is its own transaction, so the app's writes go on between
        /// them. Nil (the default): the app compacts when it chooses (`DeviceStore.compact`).
        /// A compaction that fails (a full disk) leaves the store whole and is tried again after
        /// the next round.
        public var compaction: CompactionPolicy?
        public init() {}
    }

    /// Why the app asks for a sync now. Each one cuts a backoff wait short.
    public enum Trigger: Sendable {
        case started, foreground, networkChanged, schedule, localChange
    }

    public nonisolated let store: DeviceStore
    public nonisolated let transport: any SyncTransport
    /// The engine runs on its own serial queue rather than Swift's shared cooperative pool:
    /// its store work (folding a page of pulled ops, recording answers) is synchronous SQLite,
    /// and blocking the pool's few threads with it delays every other task in the process,
    /// an app's own and other engines' network answers included.
    nonisolated let executor: QueueExecutor
    public nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
    public nonisolated let configuration: Configuration
    nonisolated let random: @Sendable () -> Double
    nonisolated let signal = TriggerSignal()
    var lastReport: SyncReport?
    /// Ops folded in by pulls in the current round (kept outside `pullAll` so a failure mid-pull still counts them).
    var pulledInRound = 0
    var roundBootstrap: Int64?
    var roundStartedFromImage = false
    /// Set when this round went back to the server's head (`cursor_ahead`).
    var roundRewind: RewindReport?
    /// A rewind this round moved the cursor back (one that found the two agreeing up to it did not).
    var roundRewindMoved = false
    /// The store's upkeep (`DeviceStore.performUpkeep`) is done: the first round does it.
    var upkeepDone = false

    /// - Parameters:
    ///   - store: the device store it syncs.
    ///   - transport: how it reaches the server (``HTTPTransport``).
    ///   - configuration: batch sizes, long-poll wait, backoff, snapshots, compaction.
    ///   - random: uniform in [0, 1), for backoff jitter (inject a seeded one in tests).
    public init(store: DeviceStore, transport: any SyncTransport, configuration: Configuration = Configuration(),
                random: @escaping @Sendable () -> Double = SystemRandom.unit) {
        self.store = store
        self.transport = transport
        self.configuration = configuration
        self.random = random
        executor = QueueExecutor(label: "chronicle.sync-engine.\(store.deviceID.lowercased)")
    }

    /// Asks for a sync now: wakes `run()` from a backoff wait or a long-poll.
    public nonisolated func trigger(_ trigger: Trigger) { signal.fire() }

    /// The delay before retry number `attempt` (1-based): exponential, capped, with
    /// "equal jitter" (half fixed, half random) so many devices coming back at once
    /// do not retry in lockstep; never shorter than the server's Retry-After.
    nonisolated func backoffMilliseconds(attempt: Int, retryAfterSeconds: Double?) -> Int {
        let exponent = min(attempt - 1, 20)
        let capped = min(Double(configuration.backoffMaxMilliseconds), Double(configuration.backoffBaseMilliseconds) * pow(2, Double(exponent)))
        let jittered = capped / 2 + capped / 2 * random()
        // A Retry-After is at most a day once read (`HTTPTransport.retryAfterSeconds`); bounded here
        // again, since an Int made from a Double past its range traps.
        let floor = min(max(0, retryAfterSeconds ?? 0), 86_400) * 1000
        return Int(max(jittered, floor))
    }

    /// Keeps syncing until the task is cancelled: a round, then a long-poll for
    /// other devices' changes (cut short by `trigger`), or after a failure a backoff
    /// wait (also cut short by `trigger`, e.g. when the network comes back).
    public func run(onRound: (@Sendable (SyncReport) -> Void)? = nil) async {
        var failures = 0
        while !Task.isCancelled {
            let report = await syncOnce()
            onRound?(report)
            switch report.outcome {
            case .synced:
                failures = 0
                // Wait for other devices' ops, or for a trigger (a local change to push).
                await raceSignal(Int(configuration.scheduleSeconds * 1000)) { [self] in
                    try await self.pullAll(waitMilliseconds: self.configuration.longPollMilliseconds).head
                }
                // Whatever ended the wait (ops arrived, a trigger, the schedule, or a failed long-poll),
                // the next round decides: it pushes, pulls, and backs off itself if the server is away.
            case .offline:
                failures += 1
                await signal.wait(milliseconds: backoffMilliseconds(attempt: failures, retryAfterSeconds: nil))
            case .blocked:
                await signal.wait(milliseconds: Int(configuration.scheduleSeconds * 1000))
            }
        }
    }

    enum RaceResult { case finished, signalled, failed }

    /// Runs `body` until it finishes, a trigger fires, or `timeoutMilliseconds` passes.
    @discardableResult
    func raceSignal(_ timeoutMilliseconds: Int, _ body: @escaping @Sendable () async throws -> Int64) async -> RaceResult {
        await withTaskGroup(of: RaceResult.self) { group in
            group.addTask {
                do { _ = try await body(); return .finished } catch { return Task.isCancelled ? .signalled : .failed }
            }
            group.addTask { [signal] in
                await signal.wait(milliseconds: timeoutMilliseconds)
                return .signalled
            }
            let first = await group.next() ?? .finished
            group.cancelAll()
            return first
        }
    }
}
