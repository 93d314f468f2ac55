import ChronicleCore
import ChronicleServer
import ChronicleStore
import ChronicleSync
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// How a push-only burst reaches the server.
enum BurstKind: String, CaseIterable {
    /// Each device's own `HTTPTransport` (one URLSession per device), as the engine pushes.
    case transport = "http-transport"
    /// One URLSession shared by every device, posting the same bodies with the same headers.
    case sharedSession = "http-shared-session"
    /// One thread per device with a blocking socket: connect, send the request, read the answer to EOF.
    /// The same bytes on the wire, without URLSession and libcurl.
    case rawSocket = "http-raw-socket"
    /// `SyncService.pushNow` called in process on a concurrent queue, as the server's routes do: no HTTP.
    case inProcess = "in-process"

    /// `transport` always; every kind with `CHRONICLE_BENCH_SYNC_DIAG=1`.
    static var selected: [BurstKind] {
        ProcessInfo.processInfo.environment["CHRONICLE_BENCH_SYNC_DIAG"] == "1" ? allCases : [.transport]
    }
}

struct BurstResult {
    var kind: BurstKind
    var seconds: Double
    /// Each push's duration as its caller saw it.
    var requests: Samples
    /// From the caller's call to `pushNow` starting, and from `pushNow` ending (the server's log)
    /// to the caller seeing the answer; empty in process.
    var beforePushNow: Samples
    var afterPushNow: Samples
    var failures: Int
}

extension SyncBenchmark {
    /// Diagnostic beside the timed round: a fresh fleet whose devices only push (one request
    /// each: the engine's first batch) all at once, so no device is busy folding pulled ops
    /// while others wait for their answers; `kind` says how the pushes travel.
    func pushBurst(_ kind: BurstKind, rig: SyncRig, root: String, name: String? = nil, salt: UInt64? = nil) throws -> BurstResult {
        let number = BurstKind.allCases.firstIndex(of: kind)!
        let (_, all) = try fleet(rig: rig, root: root, name: name ?? "burst\(number)x", salt: salt ?? 0xB0057 ^ UInt64(number))
        let devices = all.map(\.device)
        let batchOps = engineDefaults.pushBatchOpsMax
        let segments = try devices.map { try Segment(libraryID: $0.store.libraryID, ops: $0.store.unacknowledgedOps(limit: batchOps)) }
        let calls = Locked<[Int: (start: UInt64, end: UInt64, failed: Bool)]>([:])
        let service = rig.service
        let url = rig.server.url
        progress("sync scale: the push-only burst starts…")
        let t0 = nowNanoseconds()
        switch kind {
        case .transport, .sharedSession:
            let shared: URLSession? = kind == .sharedSession ? {
                let configuration = URLSessionConfiguration.ephemeral
                configuration.httpMaximumConnectionsPerHost = devices.count
                configuration.urlCache = nil
                return URLSession(configuration: configuration)
            }() : nil
            defer { shared?.finishTasksAndInvalidate() }
            try runBlocking {
                await withTaskGroup(of: Void.self) { group in
                    for (index, (device, segment)) in zip(devices, segments).enumerated() {
                        group.addTask {
                            let start = nowNanoseconds()
                            var failed = false
                            if let shared {
                                var request = URLRequest(url: url.appendingPathComponent("v1/libraries/\(segment.libraryID.lowercased)/ops"))
                                request.httpMethod = "POST"
                                request.setValue(SegmentCodec.mediaType, forHTTPHeaderField: "Content-Type")
                                request.setValue("Bearer \(device.token)", forHTTPHeaderField: "Authorization")
                                request.httpBody = Data(SegmentCodec.encode(segment))
                                let status = try? await shared.data(for: request).1 as? HTTPURLResponse
                                failed = status?.statusCode != 200
                            } else {
                                failed = (try? await device.transport.push(segment)) == nil
                            }
                            let end = nowNanoseconds()
                            calls.withLock { $0[index] = (start, end, failed) }
                        }
                    }
                }
            }
        case .rawSocket:
            let port = rig.server.port
            let group = DispatchGroup()
            for (index, (device, segment)) in zip(devices, segments).enumerated() {
                group.enter()
                let thread = Thread {
                    let start = nowNanoseconds()
                    let status = rawPost(port: port, path: "/v1/libraries/\(segment.libraryID.lowercased)/ops", token: device.token,
                                         body: SegmentCodec.encode(segment))
                    let end = nowNanoseconds()
                    calls.withLock { $0[index] = (start, end, status != 200) }
                    group.leave()
                }
                thread.start()
            }
            group.wait()
        case .inProcess:
            let queue = DispatchQueue(label: "chronicle-bench.burst", attributes: .concurrent)
            let group = DispatchGroup()
            for (index, (device, segment)) in zip(devices, segments).enumerated() {
                let start = nowNanoseconds()   // submitted: waiting for a thread counts, as it does behind HTTP
                queue.async(group: group) {
                    let failed = (try? service.pushNow(segment, token: device.token)) == nil
                    let end = nowNanoseconds()
                    calls.withLock { $0[index] = (start, end, failed) }
                }
            }
            group.wait()
        }
        let seconds = Double(nowNanoseconds() - t0) / 1e9
        let recorded = calls.withLock { $0 }
        var requests = Samples()
        var failures = 0
        var cut: [(UUID, TimingTransport.Call)] = []
        for (index, call) in recorded.sorted(by: { $0.key < $1.key }) {
            if call.failed { failures += 1; continue }
            requests.add(call.end - call.start)
            cut.append((devices[index].store.deviceID, TimingTransport.Call(start: call.start, end: call.end, ops: segments[index].ops.count, failed: false)))
        }
        if failures > 0 { syncFailure("scale: \(failures) pushes of the \(kind.rawValue) burst failed") }
        let (before, after) = kind == .inProcess ? (Samples(), Samples()) : Self.cutAtServer(cut, rig: rig)
        return BurstResult(kind: kind, seconds: seconds, requests: requests, beforePushNow: before, afterPushNow: after, failures: failures)
    }

    /// Diagnostic (`CHRONICLE_BENCH_SYNC_PARTS=bursts`): the push-only burst five times in a
    /// row in process (`BurstKind.inProcess`: no HTTP, no device work) and five times over HTTP
    /// (`BurstKind.transport`), each with a fresh fleet against one server; each burst's figures
    /// on standard error. For comparing builds of the server's push path without the scale part.
    func measureBursts(count: Int = 5) throws {
        let shm = FileManager.default.fileExists(atPath: "/dev/shm")
        let root = shm ? "/dev/shm/chronicle-bench-bursts-\(getpid())" : directory + "/sync-bursts-devices"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        defer { if !keep { try? FileManager.default.removeItem(atPath: root) } }
        let rig = try SyncRig(directory: directory + "/sync-bursts-server", logged: true)
        defer { rig.stop() }
        for kind in [BurstKind.inProcess, .transport] {
            for index in 0..<count {
                let salt = 0xB0B5 ^ UInt64(index << 8) ^ UInt64(BurstKind.allCases.firstIndex(of: kind)! << 16)
                let burst = try pushBurst(kind, rig: rig, root: root, name: "bursts\(kind.rawValue)\(index)x", salt: salt)
                var requests = burst.requests
                progress("sync bursts: \(kind.rawValue) \(index + 1): \(requests.count) pushes in \(formatFixed(burst.seconds * 1e3, 1)) ms, p50 \(millisecondsText(requests.percentileMilliseconds(0.5))), p99 \(millisecondsText(requests.percentileMilliseconds(0.99))), \(burst.failures) failed")
            }
        }
    }

    /// Pushes cut at the server's log line for each (ms resolution): from the caller's call
    /// to `pushNow` starting, and from `pushNow` ending to the caller seeing the answer.
    static func cutAtServer(_ calls: [(device: UUID, call: TimingTransport.Call)], rig: SyncRig) -> (before: Samples, after: Samples) {
        var before = Samples(), after = Samples()
        let wall = WallClockOffset()
        let serverPushes = Dictionary(rig.logLines().filter { $0.event == "push" }.compactMap { line in line.device.map { ($0, line) } },
                                      uniquingKeysWith: { first, _ in first })
        for (device, call) in calls where !call.failed {
            guard let line = serverPushes[device.lowercased] else { continue }
            let entered = line.timestampMilliseconds - line.milliseconds
            before.add(UInt64(max(0, entered - wall.wall(call.start)) * 1e6))
            after.add(UInt64(max(0, wall.wall(call.end) - line.timestampMilliseconds) * 1e6))
        }
        return (before, after)
    }
}

/// A minimal HTTP/1.1 POST over a blocking loopback socket (`Connection: close`); the status, or 0.
private func rawPost(port: UInt16, path: String, token: String, body: [UInt8]) -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return 0 }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard connected == 0 else { return 0 }
    let head = "POST \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nAuthorization: Bearer \(token)\r\n"
        + "Content-Type: \(SegmentCodec.mediaType)\r\nContent-Length: \(body.count)\r\nConnection: close\r\n\r\n"
    let request = Array(head.utf8) + body
    var sent = 0
    while sent < request.count {
        let n = request[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        guard n > 0 else { return 0 }
        sent += n
    }
    var answer: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 16_384)
    while true {
        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n <= 0 { break }
        answer += buffer[0..<n]
    }
    // "HTTP/1.1 200 OK"
    guard answer.count >= 12, let status = Int(String(decoding: answer[9..<12], as: UTF8.self)) else { return 0 }
    return status
}
