import ChronicleCore
import ChronicleServer
import ChronicleServerStore
import ChronicleStore
import ChronicleSync
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing

/// The generic server's extension point (`ServerExtension`) over real HTTP: an extension hears of
/// exactly the ops each push accepted, of the libraries opened, adds its lines to `/metrics` and
/// its summary to the startup log, writes ops of its own that wake parked pulls, and is stopped
/// with the server.
@Suite(.serialized) struct ServerExtensionTests {
    /// Writes down every hook the server calls.
    final class Recorder: ServerExtension, @unchecked Sendable {
        struct State {
            var attached: [ObjectIdentifier] = []
            var accepted: [(library: UUID, ops: [Op])] = []
            var opened: [UUID] = []
            var stopped = 0
        }
        let state = Locked(State())

        var summary: String { "recorder" }
        func attach(to service: SyncService) { state.withLock { $0.attached.append(ObjectIdentifier(service)) } }
        func accepted(_ ops: [Op], library: UUID) { state.withLock { $0.accepted.append((library, ops)) } }
        func opened(library: UUID) { state.withLock { $0.opened.append(library) } }
        func metricsText() -> String {
            let ops = state.withLock { $0.accepted.map(\.ops.count).reduce(0, +) }
            return "# TYPE chronicle_test_recorded_ops_total counter\nchronicle_test_recorded_ops_total \(ops)\n"
        }
        func stop() { state.withLock { $0.stopped += 1 } }
    }

    /// A server with `extensions` on a fresh directory, logging to a file; a device signed in to
    /// a read-it-later library whose cap holds two articles (so a push can be partly refused).
    final class Rig: @unchecked Sendable {
        let directory: String
        let logPath: String
        let server: SyncServer
        let user: UserRecord
        let store: DeviceStore
        let transport: HTTPTransport

        init(extensions: [any ServerExtension]) throws {
            let root = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm" : NSTemporaryDirectory()
            directory = "\(root)/chronicle-extension-\(UUID().lowercased)"
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            logPath = directory + "/server.log"
            _ = FileManager.default.createFile(atPath: logPath, contents: nil)
            let log = try #require(FileHandle(forWritingAtPath: logPath))
            var limits = ServiceLimits()
            limits.freeTierCaps = [FreeTierCap(entity: "article", maximum: 2)]
            server = try SyncServer(dataDirectory: directory + "/server", limits: limits, maintenance: .off, log: ServerLog(to: log),
                                    extensions: extensions)
            user = try server.service.accounts.addUser("ada", password: "correct horse battery staple", schema: .readItLater)
            store = try DeviceStore.create(at: directory + "/a.chronicle", schema: .readItLater, libraryID: user.libraryID, deviceID: UUID())
            let (token, _) = try server.service.accounts.registerDevice(user: "ada", password: "correct horse battery staple",
                                                                        deviceID: store.deviceID)
            transport = HTTPTransport(baseURL: server.url, library: user.libraryID, token: token, requestTimeoutSeconds: 10)
        }

        deinit {
            server.stop()
            try? FileManager.default.removeItem(atPath: directory)
        }

        /// The log's lines of one event.
        func logged(_ event: String) throws -> [[String: Any]] {
            try String(contentsOfFile: logPath, encoding: .utf8).split(separator: "\n").compactMap { line in
                (try JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
            }.filter { $0["event"] as? String == event }
        }
    }

    @Test func theAcceptedOpsHookGetsExactlyTheOpsAPushAccepted() async throws {
        let recorder = Recorder()
        let rig = try Rig(extensions: [recorder])
        #expect(recorder.state.withLock { $0.attached } == [ObjectIdentifier(rig.server.service)])
        #expect(try rig.logged("listening").first?["extensions"] as? String == "recorder")

        let first = try rig.store.write("article.save", payload: ["url": .text("https://example.com/1")])
        try rig.store.write("article.save", payload: ["url": .text("https://example.com/2")])
        try rig.store.write("article.save", payload: ["url": .text("https://example.com/3-past-the-cap")])
        try rig.store.write("article.tag", entity: first.entityID, payload: ["tag": .text("kept")])
        let pushed = try rig.store.pendingOps()
        #expect(pushed.count == 4)
        let segment = try Segment(libraryID: rig.user.libraryID, ops: pushed)
        let response = try await rig.transport.push(segment)
        #expect(response.results.map(\.opID) == pushed.map(\.opID))
        let outcomes = response.results.map { result -> String in
            switch result.outcome {
            case .accepted: "accepted"
            case .duplicate: "duplicate"
            case .rejected: "rejected"
            }
        }
        #expect(outcomes == ["accepted", "accepted", "rejected", "accepted"])

        // One call, before the device was answered: the accepted ops, in push order, each with its server seq.
        var expected: [Op] = []
        for (op, result) in zip(pushed, response.results) {
            guard case .accepted(let seq) = result.outcome else { continue }
            var accepted = op
            accepted.serverSeq = seq
            expected.append(accepted)
        }
        var calls = recorder.state.withLock { $0.accepted }
        #expect(calls.count == 1)
        #expect(calls.first?.library == rig.user.libraryID)
        #expect(calls.first?.ops == expected)
        #expect(calls.first?.ops.map(\.serverSeq) == [1, 2, 3])
        let logged = try rig.server.service.library(rig.user.libraryID).allOps().map(\.opID)
        #expect(logged == expected.map(\.opID), "the ops the hook got are the ones the library holds")
        #expect(recorder.state.withLock { $0.opened } == [rig.user.libraryID], "the library was opened once, by the push")

        // The same push again: duplicates and the same refusal; nothing new is accepted, and the hook is not called.
        let again = try await rig.transport.push(segment)
        #expect(again.results.allSatisfy { if case .accepted = $0.outcome { false } else { true } })
        calls = recorder.state.withLock { $0.accepted }
        #expect(calls.count == 1)

        // /metrics over HTTP carries the extension's lines.
        let (data, _) = try await session.data(from: URL(string: rig.server.url.absoluteString + "/metrics")!)
        #expect(String(decoding: data, as: UTF8.self).contains("\nchronicle_test_recorded_ops_total 3\n"))

        #expect(recorder.state.withLock { $0.stopped } == 0)
        rig.server.stop()
        #expect(recorder.state.withLock { $0.stopped } == 1, "stopped with the server")
    }

    /// An op an extension writes (`SyncService.appendServerOp`) answers a pull parked for the
    /// library at once, as a push does.
    @Test func anOpAnExtensionWritesWakesAParkedPull() async throws {
        let rig = try Rig(extensions: [Recorder()])
        let article = try rig.store.write("article.save", payload: ["url": .text("https://example.com/parked")])
        let response = try await rig.transport.push(try Segment(libraryID: rig.user.libraryID, ops: try rig.store.pendingOps()))
        #expect(response.head == 1)
        let transport = rig.transport
        let started = ContinuousClock.now
        // A long wait, so that an answer well before it can only come from the op (a loaded
        // machine took 6.9 s to answer under an 8 s wait once).
        let parked = Task { try await transport.pull(after: 1, limit: 100, waitMilliseconds: 30_000) }
        try await Task.sleep(for: .milliseconds(300))
        let op = try rig.server.service.appendServerOp("article.parsed", entity: article.entityID,
                                                       payload: ["text": .text("written by the server"), "word_count": .integer(4)],
                                                       library: rig.user.libraryID)
        #expect(op.deviceID == Op.serverDeviceID && op.serverSeq == 2)
        let page = try await parked.value
        #expect(page.segment.ops.map(\.opID) == [op.opID])
        #expect(ContinuousClock.now - started < .seconds(20), "answered when the op was written, not when the wait ran out")
    }
}
