import ChronicleCore
import ChronicleServer
import ChronicleStore
import ChronicleSync
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
import ChronicleServerStore
#endif

// MARK: - Async work from the benchmark's synchronous main thread

/// Async work started from synchronous code; `wait()` blocks the calling thread
/// (never a cooperative-pool thread: the benchmark calls it from the main thread).
final class Launched<T: Sendable>: Sendable {
    private let outcome = Locked<Result<T, any Error>?>(nil)
    private let done = DispatchSemaphore(value: 0)
    private let task: Task<Void, Never>

    init(_ body: @escaping @Sendable () async throws -> T) {
        task = Task.detached { [outcome, done] in
            let result: Result<T, any Error>
            do { result = .success(try await body()) } catch { result = .failure(error) }
            outcome.withLock { $0 = result }
            done.signal()
        }
    }

    func cancel() { task.cancel() }

    func wait() throws -> T {
        done.wait()
        done.signal()   // later waits return at once
        return try outcome.withLock { $0! }.get()
    }
}

/// Runs `body` and blocks the calling (main) thread until it ends.
func runBlocking<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
    try Launched(body).wait()
}

// MARK: - A transport that times what passes through it

/// Wraps a transport and records when each push and pull started and ended,
/// so a benchmark can time the push part of `syncOnce`, or find when a long-poll
/// delivered. Recording is a lock and an append: negligible next to a request.
final class TimingTransport: SyncTransport {
    struct Call: Sendable {
        var start: UInt64
        var end: UInt64
        var ops: Int
        var failed: Bool
        /// For pulls: the long-poll wait asked for.
        var waitMilliseconds = 0
        var nanoseconds: UInt64 { end - start }
    }

    let inner: any SyncTransport
    private let calls = Locked<(pushes: [Call], pulls: [Call])>(([], []))
    /// Called after each successful pull (e.g. for progress lines).
    private let onPull: (@Sendable (PullPage) -> Void)?

    init(_ inner: any SyncTransport, onPull: (@Sendable (PullPage) -> Void)? = nil) {
        self.inner = inner
        self.onPull = onPull
    }

    var pushes: [Call] { calls.withLock { $0.pushes } }
    var pulls: [Call] { calls.withLock { $0.pulls } }
    func reset() { calls.withLock { $0 = ([], []) } }

    func push(_ segment: Segment) async throws(SyncError) -> PushResponse {
        let start = nowNanoseconds()
        do {
            let response = try await inner.push(segment)
            let end = nowNanoseconds()
            calls.withLock { $0.pushes.append(Call(start: start, end: end, ops: segment.ops.count, failed: false)) }
            return response
        } catch {
            let end = nowNanoseconds()
            calls.withLock { $0.pushes.append(Call(start: start, end: end, ops: segment.ops.count, failed: true)) }
            throw error
        }
    }

    func pull(after cursor: Int64, limit: Int, waitMilliseconds: Int) async throws(SyncError) -> PullPage {
        let start = nowNanoseconds()
        do {
            let page = try await inner.pull(after: cursor, limit: limit, waitMilliseconds: waitMilliseconds)
            let end = nowNanoseconds()
            calls.withLock {
                $0.pulls.append(Call(start: start, end: end, ops: page.segment.ops.count, failed: false, waitMilliseconds: waitMilliseconds))
            }
            onPull?(page)
            return page
        } catch {
            let end = nowNanoseconds()
            calls.withLock { $0.pulls.append(Call(start: start, end: end, ops: 0, failed: true, waitMilliseconds: waitMilliseconds)) }
            throw error
        }
    }

    func verdict(for entity: UUID) async throws(SyncError) -> Verdict {
        try await inner.verdict(for: entity)
    }

    func blobStatus(_ blob: BlobRef) async throws(SyncError) -> BlobStatus { try await inner.blobStatus(blob) }

    func putBlob(_ blob: BlobRef, length: Int64, offset: Int64, bytes: [UInt8]) async throws(SyncError) -> BlobStatus {
        try await inner.putBlob(blob, length: length, offset: offset, bytes: bytes)
    }

    func blobRange(_ blob: BlobRef, offset: Int64, count: Int) async throws(SyncError) -> BlobRange {
        try await inner.blobRange(blob, offset: offset, count: count)
    }

    func snapshot() async throws(SyncError) -> SnapshotFrame {
        try await inner.snapshot()
    }
}

// MARK: - A server with accounts

/// A real sync server (libmicrohttpd + the embedded SQLite store) on a free
/// loopback port, with helpers to add libraries and sign devices in.
final class SyncRig: Sendable {
    static let password = "correct horse battery staple"
    let directory: String
    let server: SyncServer
    /// The server's structured log (one JSON object a line), when asked for.
    let logPath: String?

    /// `maintenance`: the server's own compaction (on by default, as `chronicle serve` runs it).
    /// `shared`: the libraries ordered in a database several servers share (two rigs on one
    /// directory then share its accounts).
    init(directory: String, logged: Bool = false, maintenance: MaintenancePolicy = MaintenancePolicy(),
         shared: (any SharedLibraryStore)? = nil) throws {
        self.directory = directory
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var log = ServerLog(to: nil)
        logPath = logged ? directory + "/server.log" : nil
        if let logPath {
            _ = FileManager.default.createFile(atPath: logPath, contents: nil)
            log = ServerLog(to: FileHandle(forWritingAtPath: logPath))
        }
        server = try SyncServer(dataDirectory: directory, maintenance: maintenance, log: log, shared: shared)
    }

    var service: SyncService { server.service }

    /// One line of the server's log that the benchmark reads.
    struct LogLine {
        var event: String
        /// Wall clock (ms) when the line was written: just after the work it times.
        var timestampMilliseconds: Double
        var milliseconds: Double
        var method: String?
        var path: String?
        var device: String?
    }

    func logLines() -> [LogLine] {
        guard let logPath, let text = try? String(contentsOfFile: logPath, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { line in
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                  let event = object["event"] as? String, let ms = (object["ms"] as? NSNumber)?.doubleValue,
                  let ts = (object["ts"] as? NSNumber)?.doubleValue else { return nil }
            return LogLine(event: event, timestampMilliseconds: ts, milliseconds: ms, method: object["method"] as? String,
                           path: object["path"] as? String, device: object["device"] as? String)
        }
    }

    /// Server-side durations from the log: each push's time in `SyncService.pushNow`
    /// (library writer lock, ordering, commit), and each `POST …/ops` request's time
    /// inside the HTTP server (body upload and decode, the push, the answer's encoding and send).
    /// `since`: only lines written at or after this wall-clock time (ms), so one measurement's
    /// requests are told from an earlier one's on the same server.
    func loggedPushTimes(since: Double = 0) -> (pushNow: Samples, request: Samples) {
        var pushNow = Samples(), request = Samples()
        for line in logLines() where line.timestampMilliseconds >= since {
            let nanoseconds = UInt64(max(0, line.milliseconds) * 1e6)
            if line.event == "push" { pushNow.add(nanoseconds) }
            if line.event == "request", line.method == "POST", line.path?.hasSuffix("/ops") == true { request.add(nanoseconds) }
        }
        return (pushNow, request)
    }

    /// A new user with its own (read-it-later) library.
    func addLibrary(_ user: String, libraryID: UUID = UUID()) throws -> UUID {
        try service.accounts.addUser(user, password: Self.password, schema: .readItLater, libraryID: libraryID).libraryID
    }

    /// Registers `deviceID` for `user` and returns its bearer token.
    func token(user: String, deviceID: UUID) throws -> String {
        do {
            return try service.accounts.registerDevice(user: user, password: Self.password, deviceID: deviceID).token
        } catch {
            throw BenchError("cannot register device \(deviceID.lowercased) for \(user): \(error)")
        }
    }

    /// A fresh device store for `user`'s library, signed in, with its engine over
    /// HTTP (wrapped in a `TimingTransport`), by default with the engine's default configuration.
    /// `existing`: open the store already at `path` (a copy of another device's) instead.
    func device(user: String, libraryID: UUID, path: String, deviceID: UUID = UUID(), seed: UInt64,
                configuration: SyncEngine.Configuration = SyncEngine.Configuration(), existing: Bool = false,
                onPull: (@Sendable (PullPage) -> Void)? = nil) throws -> SyncDevice {
        let ids = SeededV7IDGenerator(seed: seed, clock: SystemClock())
        let store = existing ? try DeviceStore.open(at: path, clock: SystemClock(), ids: ids)
            : try DeviceStore.create(at: path, schema: .readItLater, libraryID: libraryID, deviceID: deviceID, clock: SystemClock(), ids: ids)
        let token = try token(user: user, deviceID: deviceID)
        let http = HTTPTransport(baseURL: server.url, library: libraryID, token: token, session: Self.sharedSession)
        // Its access token (`POST /v1/session`) is got here, untimed, as a running app holds one:
        // the measurements time pushes and pulls, not the one request an app makes as it starts.
        try runBlocking { try await http.startSession() }
        let transport = TimingTransport(http, onPull: onPull)
        return SyncDevice(store: store, transport: transport, engine: SyncEngine(store: store, transport: transport, configuration: configuration),
                          token: token)
    }

    func stop() { server.stop() }

    /// Diagnostic: `CHRONICLE_BENCH_SHARED_SESSION=N` gives every simulated device one URLSession
    /// with N connections to the server, instead of a session each.
    static let sharedSession: URLSession? = ProcessInfo.processInfo.environment["CHRONICLE_BENCH_SHARED_SESSION"]
        .flatMap(Int.init).map { URLSession(configuration: HTTPTransport.sessionConfiguration(connectionsPerHost: $0)) }
}

/// One device of a sync measurement.
struct SyncDevice: Sendable {
    let store: DeviceStore
    let transport: TimingTransport
    let engine: SyncEngine
    let token: String
}

/// Segment and JSON sizes of the same ops.
struct WireSizes: Sendable {
    var ops: Int
    var segmentBytes: Int
    var jsonBytes: Int

    init(_ segment: Segment) {
        ops = segment.ops.count
        segmentBytes = SegmentCodec.encode(segment).count
        jsonBytes = WireJSON.encode(segment).count
    }

    var segmentBytesPerOp: Double { Double(segmentBytes) / Double(ops) }
    var jsonBytesPerOp: Double { Double(jsonBytes) / Double(ops) }
    var ratio: Double { Double(segmentBytes) / Double(jsonBytes) }
}

/// Converts `nowNanoseconds()` readings to the wall clock the server logs in (ms since 1970).
struct WallClockOffset {
    let milliseconds: Double

    init() {
        let uptime = nowNanoseconds()
        milliseconds = Double(SystemClock().nowMilliseconds()) - Double(uptime) / 1e6
    }

    func wall(_ nanoseconds: UInt64) -> Double { Double(nanoseconds) / 1e6 + milliseconds }
}

/// Size of one file (0 when missing).
func fileBytes(_ path: String) -> Int64 {
    ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.int64Value ?? 0
}

/// A failure of a sync check, said on stderr the moment it is found.
func syncFailure(_ message: String) {
    progress("sync: FAILED: " + message)
}

extension Array {
    /// Consecutive slices of at most `size` elements.
    func chunked(_ size: Int) -> [ArraySlice<Element>] {
        stride(from: 0, to: count, by: size).map { self[$0..<Swift.min($0 + size, count)] }
    }
}
