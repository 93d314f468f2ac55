import Foundation

/// Threads of the server's own for work that blocks: a push's commit waits for fsync and for
/// its library's writer, a pull reads pages from disk, a registration runs scrypt.
///
/// GCD sizes the pool behind a concurrent queue by the CPU count, and on Linux it does not
/// grow while those threads wait: on a 2-core machine such a queue ran 2 to 4 blocked items
/// at once, so one library's slow commit held up every other library's pushes and pulls,
/// and the parked pulls woken by a push waited behind them too. Here a job starts as soon as
/// a thread is free, and a thread is started for it while fewer than `threadsMax` exist; a
/// thread idle for `idleSeconds` ends, so a quiet server holds none.
final class WorkerPool: @unchecked Sendable {
    typealias Job = @Sendable () -> Void

    let name: String
    let threadsMax: Int
    let idleSeconds: Double

    // Guarded by `condition`.
    private let condition = NSCondition()
    private var jobs: [Job] = []
    private var head = 0
    private var threads = 0
    private var idle = 0

    init(name: String, threadsMax: Int = 64, idleSeconds: Double = 10) {
        precondition(threadsMax >= 1, "a worker pool needs at least one thread")
        self.name = name
        self.threadsMax = threadsMax
        self.idleSeconds = idleSeconds
    }

    /// Runs `job` on one of the pool's threads, in the order jobs were added.
    func async(_ job: @escaping Job) {
        condition.lock()
        jobs.append(job)
        // Every waiting job has a thread coming for it: an idle one (woken here) or a new one.
        if jobs.count - head > idle && threads < threadsMax {
            threads += 1
            let thread = Thread { [self] in work() }
            thread.name = name
            thread.start()
        }
        condition.signal()
        condition.unlock()
    }

    /// Threads running now, and how many of them wait for a job (for tests and metrics).
    var counts: (threads: Int, idle: Int) {
        condition.lock()
        defer { condition.unlock() }
        return (threads, idle)
    }

    private func work() {
        condition.lock()
        while true {
            while head == jobs.count {
                idle += 1
                let signalled = condition.wait(until: Date().addingTimeInterval(idleSeconds))
                idle -= 1
                if !signalled && head == jobs.count {
                    threads -= 1
                    condition.unlock()
                    return
                }
            }
            let job = jobs[head]
            head += 1
            if head == jobs.count {
                jobs.removeAll(keepingCapacity: true)
                head = 0
            } else if head >= 1_024 && head * 2 >= jobs.count {
                jobs.removeFirst(head)   // under steady load the queue never empties: drop what was run
                head = 0
            }
            condition.unlock()
            job()
            condition.lock()
        }
    }
}
