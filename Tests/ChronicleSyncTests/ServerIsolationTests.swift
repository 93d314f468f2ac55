import ChronicleCore
@testable import ChronicleServer
@testable import ChronicleServerStore
@testable import ChronicleStore
@testable import ChronicleSync
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing

/// One server, many libraries: a library whose commits are stuck (a slow disk, a long
/// write) holds up only its own requests.
@Suite struct ServerIsolationTests {
    /// Synchronous on purpose, with URLSession's completion handlers: the test must not need
    /// Swift's cooperative threads, which other suites running beside it may keep busy.
    @Test func pushesWaitingOnOneLibraryDoNotHoldUpAnother() throws {
        let h = try SyncHarness(.http)
        let url = h.http!.url
        // A second library on the same server, with one device and one queued op.
        let bob = try h.service.accounts.addUser("bob", password: h.password, schema: .readItLater)
        let bobStore = try DeviceStore.create(at: h.directory + "/bob.chronicle", schema: .readItLater, libraryID: bob.libraryID, deviceID: UUID())
        let (bobToken, _) = try h.service.accounts.registerDevice(user: "bob", password: h.password, deviceID: bobStore.deviceID)
        try bobStore.write("article.save", payload: ["url": .text("https://example.com/bob"), "title": .text("Bob's")])

        // Library A: more devices pushing at once than a CPU-sized thread pool runs (2 to 4 here).
        let blocked = 12
        let devices = try (0..<blocked).map { i in
            let device = try h.device("A\(i)")
            try device.save("A\(i)")
            return device
        }
        let session = URLSession(configuration: HTTPTransport.sessionConfiguration(requestTimeoutSeconds: 60, connectionsPerHost: blocked + 2))
        defer { session.invalidateAndCancel() }
        func push(_ store: DeviceStore, token: String, answered: @escaping @Sendable (Int) -> Void) throws {
            var request = URLRequest(url: url.appendingPathComponent("v1/libraries/\(store.libraryID.lowercased)/ops"))
            request.httpMethod = "POST"
            request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
            request.setValue(SegmentCodec.mediaType, forHTTPHeaderField: "Content-Type")
            request.httpBody = Data(SegmentCodec.encode(try Segment(libraryID: store.libraryID, ops: try store.pendingOps())))
            session.dataTask(with: request) { _, response, _ in answered((response as? HTTPURLResponse)?.statusCode ?? 0) }.resume()
        }
        func waitUntil(_ done: () -> Bool) -> Bool {
            let deadline = Date().addingTimeInterval(60)   // hang detectors, not timings
            while !done() && Date() < deadline { usleep(2_000) }
            return done()
        }

        // A's writer is held, as by a commit that does not come back: every push to A waits for it.
        let library = try h.library
        let holding = Locked(false)
        let held = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        let holder = Thread {
            library.writer.withLock { _ in
                holding.withLock { $0 = true }
                held.signal()
                _ = release.wait(timeout: .now() + 90)   // the test releases it
                holding.withLock { $0 = false }
            }
        }
        holder.start()
        held.wait()
        let statusesA = Locked<[Int]>([])
        for device in devices { try push(device.store, token: device.token) { status in statusesA.withLock { $0.append(status) } } }
        // Every push to A is on a worker thread, waiting for A's writer.
        let workers = h.service.workers
        #expect(waitUntil { workers.counts.threads - workers.counts.idle >= blocked }, "\(workers.counts) of \(blocked)")

        // B's push is answered while A's writer is still held.
        let answeredB = Locked<(status: Int, whileHeld: Bool)?>(nil)
        try push(bobStore, token: bobToken) { status in answeredB.withLock { $0 = (status, holding.withLock { $0 }) } }
        #expect(waitUntil { answeredB.withLock { $0 } != nil })
        let b = answeredB.withLock { $0 }
        #expect(b?.status == 200)
        #expect(b?.whileHeld == true, "B was answered only once A's writer let go")
        #expect(try h.service.library(bob.libraryID).head == 1)

        release.signal()
        #expect(waitUntil { statusesA.withLock { $0.count } == blocked })
        #expect(statusesA.withLock { $0 } == Array(repeating: 200, count: blocked))
        #expect(library.head == Int64(blocked), "A's pushes all land once it lets go")
    }
}
