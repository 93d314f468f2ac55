import Foundation

/// The store's read-only connections, opened on demand and reused. `pause` closes them all
/// (waiting for reads in progress) and holds new reads back until `resume`, for the one moment
/// the store's file is replaced (`DeviceStore.replaceFile`).
package final class ReaderPool: @unchecked Sendable {
    let path: String
    private let condition = NSCondition()
    private var idle: [Database] = []
    private var leased = 0
    private var paused = false

    package init(path: String) { self.path = path }

    package func read<T>(_ body: (Database) throws -> T) throws -> T {
        condition.lock()
        while paused { condition.wait() }
        let db: Database
        if let last = idle.popLast() {
            db = last
        } else {
            do {
                var options = Database.Options()
                options.readOnly = true
                db = try Database(path: path, options: options)
            } catch {
                condition.unlock()
                throw error
            }
        }
        leased += 1
        condition.unlock()
        defer {
            condition.lock()
            leased -= 1
            idle.append(db)
            condition.broadcast()
            condition.unlock()
        }
        return try db.readTransaction(body)
    }

    /// Waits (at most `timeoutSeconds`) for the reads in progress, then closes every connection;
    /// reads wait from now until `resume()`. False, with reads going on as before, if one did not end in time.
    func pause(timeoutSeconds: Double) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        paused = true
        let deadline = Date(timeIntervalSinceNow: timeoutSeconds)
        while leased > 0 {
            if !condition.wait(until: deadline) && leased > 0 {
                paused = false
                condition.broadcast()
                return false
            }
        }
        idle.removeAll()
        return true
    }

    func resume() {
        condition.lock()
        paused = false
        condition.broadcast()
        condition.unlock()
    }
}
