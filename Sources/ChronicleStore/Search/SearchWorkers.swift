import ChronicleCore
import Foundation

/// What the two workers of one search found, plan by plan.
final class PlanResults: @unchecked Sendable {
    private let lock = NSLock()
    private var found: [[String: DeviceStore.SearchCandidate]]
    private var failure: Error?

    init(count: Int) { found = Array(repeating: [:], count: count) }

    func set(_ index: Int, _ candidates: [String: DeviceStore.SearchCandidate]) { lock.withLock { found[index] = candidates } }
    func fail(_ error: Error) { lock.withLock { failure = failure ?? error } }

    func results() throws -> [[String: DeviceStore.SearchCandidate]] {
        try lock.withLock {
            if let failure { throw failure }
            return found
        }
    }
}

/// A value handed to another thread that alone uses it (each of `concurrentPerform`'s workers its own connection).
struct UnsafeSendable<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}

/// How the two workers of a search share a phrase's count of older matches: a worker offers
/// one half (`offer`) and counts the other; a worker done with its own indexes (`serve`) takes
/// an offered half and counts it on its connection. An offer no one took by the time its
/// worker needs it is taken back and counted there, so no worker ever waits for another
/// that is still busy with its own indexes. One offer is pending at a time: while one is, a
/// second is counted by its own worker.
final class SearchCountHelp: @unchecked Sendable {
    typealias Job = (Database) throws -> Int64

    /// Guarded by the help's condition.
    final class Offer: @unchecked Sendable {
        fileprivate let job: Job
        fileprivate unowned let help: SearchCountHelp
        fileprivate var taken = false
        fileprivate var outcome: Result<Int64, Error>?

        fileprivate init(_ job: @escaping Job, _ help: SearchCountHelp) {
            self.job = job
            self.help = help
        }

        /// The count: taken back and run on `db` if no other worker took it, else its result once ready.
        func result(orRunOn db: Database) throws -> Int64 {
            let condition = help.condition
            condition.lock()
            if !taken {
                taken = true
                if help.pending === self { help.pending = nil }
                condition.unlock()
                return try job(db)
            }
            while outcome == nil { condition.wait() }
            let outcome = self.outcome!
            condition.unlock()
            return try outcome.get()
        }
    }

    fileprivate let condition = NSCondition()
    fileprivate var pending: Offer?
    private var working: Int

    init(workers: Int) { working = workers }

    /// No offer is waiting to be taken (tests).
    var isIdle: Bool {
        condition.lock()
        defer { condition.unlock() }
        return pending == nil
    }

    /// Offers `job` to the other worker (unless an offer is pending already: then it stays the caller's).
    func offer(_ job: @escaping Job) -> Offer {
        condition.lock()
        defer { condition.unlock() }
        let offer = Offer(job, self)
        if pending == nil {
            pending = offer
            condition.broadcast()
        }
        return offer
    }

    /// Called by a worker done with its own indexes: counts offered halves on `db` until every
    /// worker is done.
    func serve(on db: Database) {
        condition.lock()
        working -= 1
        condition.broadcast()
        while true {
            if let offer = pending {
                offer.taken = true
                pending = nil
                condition.unlock()
                let outcome = Result { try offer.job(db) }
                condition.lock()
                offer.outcome = outcome
                condition.broadcast()
                continue
            }
            if working == 0 { break }
            condition.wait()
        }
        condition.unlock()
    }
}
