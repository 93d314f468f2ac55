import ChronicleCore
import ChronicleServer
@testable import ChronicleStore
@testable import ChronicleSync
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
import ChronicleTesting

/// The engine reads (and, with two pushes in flight, sends) a device's next batch while the
/// one before waits for its answer, and commits a batch's acknowledgement while the next is
/// on its way. These tests drive the push loop through the paths where what was read or sent
/// ahead must be thrown away (a batch too large for the server, acknowledgements ahead of the
/// server, a failed push, a lost answer) and check that every op still reaches the server
/// once, in order; and the server's side, which holds a batch that overtakes the one ahead.
@Suite("Pushing a long outbox in batches")
struct PushPipelineTests {
    /// The in-memory transport with a script: batches above `opsMax` are refused with 413,
    /// a chosen push fails before reaching the server, and `during` runs while a push is in flight.
    final class ScriptedPushes: SyncTransport, @unchecked Sendable {
        struct Script {
            var opsMax = Int.max
            var failPush: Int?
            var during: [Int: @Sendable () throws -> Void] = [:]
            /// Every push made, refused ones included: its ops' deviceSeqs.
            var pushes: [[Int64]] = []
            /// The pushes the server answered.
            var answered: [[Int64]] = []
            /// Milliseconds a push (by its number) waits before it reaches the server.
            var delays: [Int: Int] = [:]
            /// Pushes (by number) held on their way until the next push has been sent (at most 10 s),
            /// then for their delay: the next one is in flight beside them however slow the machine.
            var heldForNext: Set<Int> = []
            /// Pushes on their way now, and the most there ever were.
            var inFlight = 0
            var inFlightMost = 0
        }
        let inner: InMemoryTransport
        let script: Locked<Script>

        init(_ inner: InMemoryTransport, _ script: Script) {
            self.inner = inner
            self.script = Locked(script)
        }

        func push(_ segment: Segment) async throws(SyncError) -> PushResponse {
            let seqs = segment.ops.map(\.deviceSeq)
            let (index, opsMax, fail, during, delay, held) = script.withLock { s in
                s.pushes.append(seqs)
                s.inFlight += 1
                s.inFlightMost = max(s.inFlightMost, s.inFlight)
                return (s.pushes.count, s.opsMax, s.failPush, s.during[s.pushes.count], s.delays[s.pushes.count],
                        s.heldForNext.contains(s.pushes.count))
            }
            defer { script.withLock { $0.inFlight -= 1 } }
            if held {
                let deadline = DispatchTime.now().uptimeNanoseconds + 10_000_000_000
                while script.withLock({ $0.pushes.count <= index }), DispatchTime.now().uptimeNanoseconds < deadline {
                    try? await Task.sleep(nanoseconds: 1_000_000)
                }
            }
            if let delay { try? await Task.sleep(nanoseconds: UInt64(delay) * 1_000_000) }
            if seqs.count > opsMax {
                throw .terminal(ProtocolError(413, .tooManyOps, "At most \(opsMax) ops a push."))
            }
            if fail == index { throw .transient(reason: "The connection was reset (scripted).", retryAfterSeconds: nil) }
            do { try during?() } catch { throw .transient(reason: "\(error)", retryAfterSeconds: nil) }
            let response = try await inner.push(segment)
            script.withLock { $0.answered.append(seqs) }
            return response
        }

        func pull(after cursor: Int64, limit: Int, waitMilliseconds: Int) async throws(SyncError) -> PullPage {
            try await inner.pull(after: cursor, limit: limit, waitMilliseconds: waitMilliseconds)
        }

        func verdict(for entity: UUID) async throws(SyncError) -> Verdict { try await inner.verdict(for: entity) }
    }

    /// A device with its own engine over `ScriptedPushes`.
    /// `inFlight` 1 (one push at a time) makes the order of requests exact, for the tests that check it.
    func device(_ harness: SyncHarness, _ script: ScriptedPushes.Script, batch: Int, inFlight: Int = 1) throws -> (TestDevice, ScriptedPushes, SyncEngine) {
        let device = try harness.device("d")
        let transport = ScriptedPushes(device.memory!, script)
        var configuration = SyncEngine.Configuration()
        configuration.pushBatchOpsMax = batch
        configuration.pushRequestsInFlightMax = inFlight
        configuration.backoffBaseMilliseconds = 1
        configuration.backoffMaxMilliseconds = 5
        return (device, transport, SyncEngine(store: device.store, transport: transport, configuration: configuration, random: { 0.5 }))
    }

    /// The server's log holds each of the device's deviceSeqs 1...count once, in order.
    func expectServerHasEach(_ harness: SyncHarness, _ device: TestDevice, count: Int64,
                             sourceLocation: SourceLocation = #_sourceLocation) throws {
        let seqs = try harness.library.allOps().filter { $0.deviceID == device.store.deviceID }.map(\.deviceSeq)
        #expect(seqs == Array(1...count), sourceLocation: sourceLocation)
        #expect(try device.store.unacknowledgedOps(limit: 1).isEmpty, sourceLocation: sourceLocation)
    }

    @Test("Batches too large for the server are halved; ops written while a batch is in flight go in the same round")
    func halvesAndPicksUpWritesMadeDuringAPush() async throws {
        let harness = try SyncHarness(.inMemory)
        var script = ScriptedPushes.Script()
        script.opsMax = 20
        let (device, transport, engine) = try device(harness, script, batch: 50)
        for i in 0..<230 { try device.save("queued \(i)") }
        // While the fourth push is in flight (batches of 12 by then), five more are written.
        transport.script.withLock { s in
            s.during[4] = { for i in 0..<5 { _ = try device.store.write("article.save", payload: ["url": .text("https://example.com/late/\(i)"), "title": .text("late \(i)")]) } }
        }
        let report = await engine.syncOnce()
        #expect(report.outcome == .synced)
        #expect(report.pushed == 235)
        let s = transport.script.withLock { $0 }
        // 50 refused, then 25 refused, then batches of 12: the read-ahead of the refused sizes was dropped.
        #expect(s.pushes.prefix(2).map(\.count) == [50, 25])
        #expect(s.answered.allSatisfy { $0.count <= 12 })
        #expect(s.answered.flatMap { $0 } == Array(1...235), "each op sent once, in order, once the server took it")
        try expectServerHasEach(harness, device, count: 235)
        try harness.expectConverged()
    }

    @Test("Acknowledgements ahead of the server: the engine starts again from the outbox head")
    func acknowledgementsAheadOfTheServerAreReset() async throws {
        let harness = try SyncHarness(.inMemory)
        let (device, transport, engine) = try device(harness, ScriptedPushes.Script(), batch: 10)
        for i in 0..<45 { try device.save("queued \(i)") }
        // The store believes the server answered the first 20 (it has none of them).
        try device.store.recordAcknowledged(through: 20)
        let report = await engine.syncOnce()
        #expect(report.outcome == .synced)
        let s = transport.script.withLock { $0 }
        #expect(s.pushes.first?.first == 21, "the first push starts after the acknowledgement")
        #expect(s.answered.flatMap { $0 } == Array(1...45))
        try expectServerHasEach(harness, device, count: 45)
        try harness.expectConverged()
    }

    @Test("A push that fails mid-way is retried from the last answered batch; a lost answer is answered again")
    func aFailedPushIsRetriedFromTheLastAnsweredBatch() async throws {
        let harness = try SyncHarness(.inMemory)
        var script = ScriptedPushes.Script()
        script.failPush = 3
        let (device, transport, engine) = try device(harness, script, batch: 10)
        for i in 0..<64 { try device.save("queued \(i)") }
        // The sixth push reaches the server, which orders its ops, but its answer is lost.
        transport.script.withLock { s in s.during[6] = { device.memory!.dropResponsesNext(1) } }
        let report = await engine.syncOnce()
        #expect(report.outcome == .synced)
        #expect(report.retries == 2)
        let s = transport.script.withLock { $0 }
        // Push 3 failed before the server: push 4 sends the same batch (21...30).
        #expect(s.pushes[2] == Array(21...30) && s.pushes[3] == Array(21...30))
        // Push 6 (41...50) was ordered but unanswered: push 7 sends it again, answered as duplicates.
        #expect(s.pushes[5] == Array(41...50) && s.pushes[6] == Array(41...50))
        #expect(report.pushed == 64, "each op counted once: the batch whose answer was lost counts when answered again")
        try expectServerHasEach(harness, device, count: 64)
        try harness.expectConverged()
    }

    @Test("Two pushes in flight: the next batch goes out before the one ahead is answered, and the server takes a batch that overtakes it in order")
    func twoPushesInFlightKeepTheOrder() async throws {
        // A wait long enough that a loaded test machine never runs it out.
        var limits = ServiceLimits()
        limits.pushGapWaitMilliseconds = 60_000
        let harness = try SyncHarness(.inMemory, limits: limits)
        var script = ScriptedPushes.Script()
        // Every other push is held on its way until the one behind it has been sent, then 20 ms
        // more, so the one behind overtakes it: the server holds each overtaking batch until the
        // one ahead lands. (Held for the next, not for a time: a loaded machine may take longer
        // than any fixed delay to send it.)
        for index in 2...40 { script.delays[index] = index % 2 == 0 ? 20 : 0 }
        script.heldForNext = Set(stride(from: 2, to: 20, by: 2))
        let (device, transport, engine) = try device(harness, script, batch: 10, inFlight: 2)
        for i in 0..<200 { try device.save("queued \(i)") }
        let report = await engine.syncOnce()
        #expect(report.outcome == .synced)
        #expect(report.pushed == 200)
        #expect(report.retries == 0)
        let s = transport.script.withLock { $0 }
        #expect(s.inFlightMost == 2, "the next batch was sent while the one ahead waited for its answer, and never a third")
        #expect(s.pushes.count == 20, "each batch sent once: none refused for a gap and sent again")
        #expect(s.pushes.flatMap { $0 } == Array(1...200))
        try expectServerHasEach(harness, device, count: 200)
        try harness.expectConverged()
    }

    @Test("Two pushes in flight through a refused batch, a failed push and a lost answer: each op reaches the server once, in order",
          arguments: [1, 2])
    func twoPushesInFlightThroughFailures(scenario: Int) async throws {
        let harness = try SyncHarness(.inMemory)
        var script = ScriptedPushes.Script()
        if scenario == 1 {
            script.opsMax = 20              // batches of 50, then 25, are refused; 12 go through
        } else {
            script.failPush = 3             // a push fails before the server
        }
        for index in 1...60 { script.delays[index] = 2 }
        let (device, transport, engine) = try device(harness, script, batch: 50, inFlight: 2)
        for i in 0..<230 { try device.save("queued \(i)") }
        // The sixth push reaches the server, which orders its ops, but its answer is lost.
        if scenario == 2 { transport.script.withLock { s in s.during[6] = { device.memory!.dropResponsesNext(1) } } }
        let report = await engine.syncOnce()
        #expect(report.outcome == .synced)
        #expect(report.pushed == 230)
        let s = transport.script.withLock { $0 }
        // Two at a time, and a third only while a push dropped behind a failed one is still on its way.
        #expect(s.inFlightMost >= 2)
        if scenario == 1 {
            #expect(s.pushes.first?.count == 50)
            #expect(s.answered.allSatisfy { $0.count <= 12 })
        } else {
            #expect(report.retries == 2)
        }
        try expectServerHasEach(harness, device, count: 230)
        try harness.expectConverged()
    }

    /// Over real HTTP, where the server's worker threads wait for the push ahead: a batch that
    /// reaches the server before the one ahead of it is held (the metrics show it) and taken
    /// after it; without the wait (0 ms) it is refused at once with `device_seq_gap`, and with
    /// too short a one, once the wait is up. Nothing of a refused push is written.
    @Test("Over HTTP, a push that overtakes the one ahead waits for it; with no wait, or too short a one, it is refused for the gap",
          arguments: [300_000, 0, 50])
    func anOvertakingPushWaitsOverHTTP(gapWaitMilliseconds: Int) async throws {
        var limits = ServiceLimits()
        limits.pushGapWaitMilliseconds = gapWaitMilliseconds
        let harness = try SyncHarness(.http, limits: limits)
        let server = try #require(harness.http)
        let device = try harness.device("d")
        for i in 0..<20 { try device.save("queued \(i)") }
        let ops = try device.store.unacknowledgedOps(limit: 20)
        let aheadSegment = try Segment(libraryID: device.store.libraryID, ops: Array(ops.prefix(10)))
        let behind = try Segment(libraryID: device.store.libraryID, ops: Array(ops.suffix(10)))
        // Both pushes go out from threads of their own, on URLSession's threads, and so does the
        // wait for the server to hold the one behind: while the whole suite runs, a task of the
        // shared pool could wait long for a thread (it once waited past the server's 300 s).
        @Sendable func post(_ segment: Segment) -> (status: Int, body: [UInt8]) {
            var request = URLRequest(url: server.url.appendingPathComponent("v1/libraries/\(device.store.libraryID.lowercased)/ops"))
            request.httpMethod = "POST"
            request.setValue(SegmentCodec.mediaType, forHTTPHeaderField: "Content-Type")
            request.setValue("Bearer \(device.token)", forHTTPHeaderField: "Authorization")
            request.httpBody = Data(SegmentCodec.encode(segment))
            request.timeoutInterval = 400   // held on the server up to its wait; URLSession's default is 60 s
            let answer = Locked<(status: Int, body: [UInt8])?>(nil)
            let done = DispatchSemaphore(value: 0)
            URLSession.shared.dataTask(with: request) { data, response, _ in
                answer.withLock { $0 = ((response as? HTTPURLResponse)?.statusCode ?? 0, [UInt8](data ?? Data())) }
                done.signal()
            }.resume()
            _ = done.wait(timeout: .now() + 450)
            return answer.withLock { $0 } ?? (0, [])
        }
        let metrics = server.service.metrics
        let overtaking = OwnThread { post(behind) }
        let ahead: @Sendable () -> (status: Int, body: [UInt8], heldBeforeIt: Int) = {
            if gapWaitMilliseconds == 300_000 {
                // The batch ahead goes out once the server holds the one behind it (or answered it).
                let start = DispatchTime.now().uptimeNanoseconds
                while metrics.pushesHeldForGap == 0, !overtaking.finished, DispatchTime.now().uptimeNanoseconds - start < 200_000_000_000 {
                    usleep(2_000)
                }
            }
            let heldBeforeIt = metrics.pushesHeldForGap
            let answer = post(aheadSegment)
            return (answer.status, answer.body, heldBeforeIt)
        }
        let firstAnswer: (status: Int, body: [UInt8], heldBeforeIt: Int)
        let second: (status: Int, body: [UInt8])
        if gapWaitMilliseconds == 300_000 {
            let first = OwnThread(ahead)
            firstAnswer = await first.value()
            second = await overtaking.value()
            #expect(firstAnswer.heldBeforeIt == 1)
        } else {
            second = await overtaking.value()
            firstAnswer = await OwnThread(ahead).value()
        }
        #expect(firstAnswer.status == 200, "\(String(decoding: firstAnswer.body, as: UTF8.self))")
        let first = try ProtocolJSON.decodePushResponse(firstAnswer.body)
        #expect(server.service.metrics.pushesHeldForGap == 0)
        #expect(first.results.map(\.outcome) == (1...10).map { PushOutcome.accepted(serverSeq: Int64($0)) })
        let rendered = metrics.render()
        if gapWaitMilliseconds == 300_000 {
            #expect(second.status == 200, "\(String(decoding: second.body, as: UTF8.self))")
            let response = try ProtocolJSON.decodePushResponse(second.body)
            #expect(response.results.map(\.outcome) == (11...20).map { PushOutcome.accepted(serverSeq: Int64($0)) })
            #expect(try harness.library.allOps().map(\.deviceSeq) == Array(1...20))
            #expect(rendered.contains("chronicle_push_gap_waits_total{result=\"filled\"} 1"))
        } else {
            #expect(second.status == 409)
            #expect(String(decoding: second.body, as: UTF8.self).contains("device_seq_gap"))
            #expect(try harness.library.allOps().map(\.deviceSeq) == Array(1...10), "nothing of the refused push was written")
            #expect(rendered.contains("chronicle_push_gap_waits_total{result=\"refused\"} \(gapWaitMilliseconds == 0 ? 0 : 1)"))
        }
    }

    /// Rows the device still keeps a confirmed copy of (rows under queued ops).
    func shadowedRows(_ device: TestDevice) throws -> Int64 {
        try device.store.read { db in try db.scalarInt("SELECT count(*) FROM chronicle_shadowed") ?? -1 }
    }

    @Test("A device confirming its own pushes page by page ends with the server's state, each row once, no shadows left",
          arguments: [false, true])
    func confirmingOwnPushesInPages(anotherDeviceWritesFirst: Bool) async throws {
        let harness = try SyncHarness(.inMemory)
        var configuration = SyncEngine.Configuration()
        configuration.pushBatchOpsMax = 37
        configuration.pullPageOpsMax = 23
        configuration.bulkPullPageOpsMax = 29
        configuration.bulkCatchUpOpsMin = 200   // the second round's pull runs in bulk mode
        configuration.backoffBaseMilliseconds = 1
        let device = try harness.device("d", configuration: configuration)
        let other = try harness.device("o")
        try Workload(seed: 7).run(120, on: device)
        await device.sync()
        await other.sync()
        // Ops on rows of the first round and new ones, counters, sets, deletes and restores,
        // merge-or-ask notes: rows whose queued ops straddle the pages they come back in.
        try Workload(seed: 8).run(320, on: device)
        #expect(try shadowedRows(device) > 0)
        if anotherDeviceWritesFirst {
            // The pages then mix another device's ops with this one's: rebased as usual.
            try Workload(seed: 9).run(40, on: other)
            await other.sync()
        }
        let report = await device.sync()
        #expect(report.pushed == 320)
        #expect(try shadowedRows(device) == 0)
        #expect(try device.store.verify().passed)
        await other.sync()
        try harness.expectConverged()
    }

    /// Over real HTTP: a push body of 1 MiB or more asks `Expect: 100-continue`. Under the
    /// server's body cap the server answers 100 and takes it; far over the cap it refuses it on
    /// the head (413, nothing read), and the engine halves the batch until a push fits, where a
    /// body sent without waiting could have met a reset connection and been retried as it was.
    @Test("A push body far over the server's cap is refused on its head and halved until it fits; under the cap it goes in whole",
          arguments: [nil, 256 << 10] as [Int?])
    func largePushBodiesOverHTTP(maxBodyBytes: Int?) async throws {
        var http = HTTPServer.Configuration()
        if let maxBodyBytes { http.maxBodyBytes = maxBodyBytes }
        let logPath = NSTemporaryDirectory() + "chronicle-push-log-\(UUID().lowercased).jsonl"
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        defer { try? FileManager.default.removeItem(atPath: logPath) }
        let logFile = try #require(FileHandle(forWritingAtPath: logPath))
        let harness = try SyncHarness(.http, httpConfiguration: http, log: ServerLog(to: logFile))
        let device = try harness.device("d")
        let article = try device.store.write("article.save", payload: ["url": .text("https://example.com/long-notes")])
        // 60 notes of 90,000 random letters: about 5.4 MB that LZ4 cannot shrink, in one batch.
        var generator = SplitMix64(seed: 17)
        for _ in 0..<60 {
            let letters = (0..<90_000).map { _ in UInt8(97 + generator.next() % 26) }
            try device.store.write("note.create", payload: ["article_id": .text(article.entityID.lowercased),
                                                            "body": .text(String(decoding: letters, as: UTF8.self))])
        }
        let report = await device.sync()
        #expect(report.outcome == .synced)
        #expect(report.pushed == 61)
        try harness.expectConverged()

        harness.http?.stop()
        try logFile.close()
        let pushes = try String(contentsOfFile: logPath, encoding: .utf8).split(separator: "\n")
            .compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            .filter { $0["event"] as? String == "request" && $0["method"] as? String == "POST" && ($0["path"] as? String)?.hasSuffix("/ops") == true }
        let refused = pushes.filter { $0["status"] as? Int == 413 }
        if maxBodyBytes == nil {
            // One push of the whole batch, its body read after the server's 100 Continue.
            #expect(pushes.count == 1)
            #expect(pushes.first?["status"] as? Int == 200)
            #expect((pushes.first?["in_bytes"] as? Int ?? 0) > 5_000_000)
        } else {
            #expect(refused.count >= 3)
            // Those of 1 MiB or more were refused on their heads: none of their bytes was read.
            #expect(refused.contains { $0["in_bytes"] as? Int == 0 })
            #expect(pushes.filter { $0["status"] as? Int == 200 }.allSatisfy { ($0["in_bytes"] as? Int ?? .max) <= 256 << 10 })
        }
    }
}

/// Work started on a thread of its own the moment it is made, not on the shared pool of tasks;
/// `value()` waits for its result.
final class OwnThread<T: Sendable>: Sendable {
    private let result = Locked<T?>(nil)
    private let done = DispatchSemaphore(value: 0)

    init(_ work: @escaping @Sendable () -> T) {
        Thread { [result, done] in
            let value = work()
            result.withLock { $0 = value }
            done.signal()
        }.start()
    }

    var finished: Bool { result.withLock { $0 != nil } }

    func value() async -> T {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async { [result, done] in
                done.wait()
                done.signal()
                continuation.resume(returning: result.withLock { $0! })
            }
        }
    }
}
