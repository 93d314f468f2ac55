import ChronicleStore
import Foundation
import Testing
import ChronicleCore
@testable import ChronicleServer

/// The server's own threads for blocking work. Each test waits on conditions with a long
/// deadline (a hang detector, not a timing test): a pool that ran fewer jobs at once than
/// asked never meets them and fails.
@Suite struct WorkerPoolTests {
    /// Jobs that each block until `count` of them are running at the same time.
    final class Rendezvous: @unchecked Sendable {
        private let condition = NSCondition()
        private var arrived = 0
        private var running = 0
        private(set) var mostAtOnce = 0
        let count: Int

        init(count: Int) { self.count = count }

        /// Blocks until `count` jobs arrived (true), or `seconds` passed (false).
        func arrive(seconds: Double = 20) -> Bool {
            condition.lock()
            defer { condition.unlock() }
            arrived += 1
            running += 1
            mostAtOnce = max(mostAtOnce, running)
            condition.broadcast()
            let deadline = Date().addingTimeInterval(seconds)
            while arrived < count { if !condition.wait(until: deadline) { break } }
            let met = arrived >= count
            running -= 1
            return met
        }

        var most: Int { condition.lock(); defer { condition.unlock() }; return mostAtOnce }
    }

    static func waitUntil(seconds: Double = 20, _ done: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while !done() && Date() < deadline { usleep(2_000) }
        return done()
    }

    @Test func blockedJobsDoNotHoldUpTheOnesAfterThem() {
        // More blocked jobs than this machine has cores: GCD's concurrent queue ran 2 to 4 at once here.
        let pool = WorkerPool(name: "test.pool", threadsMax: 32)
        let jobs = 4 * max(4, ProcessInfo.processInfo.activeProcessorCount)
        let meeting = Rendezvous(count: jobs)
        let met = Counter()
        for _ in 0..<jobs { pool.async { if meeting.arrive() { met.add() } } }
        #expect(Self.waitUntil { met.value == jobs }, "all \(jobs) blocked jobs ran at once (met: \(met.value))")
    }

    @Test func neverMoreThreadsThanItsMaximum() {
        let pool = WorkerPool(name: "test.pool", threadsMax: 3)
        let meeting = Rendezvous(count: 3)
        let done = Counter()
        for _ in 0..<9 { pool.async { _ = meeting.arrive(); done.add() } }
        #expect(Self.waitUntil { done.value == 9 })
        #expect(meeting.most == 3, "three ran at once, never more")
        #expect(pool.counts.threads <= 3)
    }

    @Test func oneThreadRunsJobsInTheOrderTheyCame() {
        let pool = WorkerPool(name: "test.pool", threadsMax: 1)
        let order = Locked<[Int]>([])
        for i in 0..<2_000 { pool.async { order.withLock { $0.append(i) } } }
        #expect(Self.waitUntil { order.withLock { $0.count } == 2_000 })
        #expect(order.withLock { $0 } == Array(0..<2_000))
    }

    @Test func idleThreadsEnd() {
        let pool = WorkerPool(name: "test.pool", threadsMax: 8, idleSeconds: 0.05)
        let meeting = Rendezvous(count: 8)
        for _ in 0..<8 { pool.async { _ = meeting.arrive() } }
        #expect(Self.waitUntil { meeting.most == 8 })
        #expect(Self.waitUntil { pool.counts.threads == 0 }, "a quiet pool holds no thread")
        // And it starts again.
        let again = Counter()
        pool.async { again.add() }
        #expect(Self.waitUntil { again.value == 1 })
    }

    /// A count the jobs add to (the project's `Locked`).
    final class Counter: Sendable {
        private let count = Locked(0)
        func add() { count.withLock { $0 += 1 } }
        var value: Int { count.withLock { $0 } }
    }
}
