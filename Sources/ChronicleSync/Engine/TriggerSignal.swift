import ChronicleCore
import ChronicleStore
import Foundation

/// Wakes a waiting engine early. A fire with nobody waiting is remembered once.
final class TriggerSignal: @unchecked Sendable {
    private let lock = NSLock()
    private var pending = false
    private var waiters: [UUID: CheckedContinuation<Void, Never>] = [:]

    func fire() {
        lock.lock()
        let woken = waiters
        waiters.removeAll()
        if woken.isEmpty { pending = true }
        lock.unlock()
        for continuation in woken.values { continuation.resume() }
    }

    /// Returns after `milliseconds`, on a fire, or when the task is cancelled.
    func wait(milliseconds: Int) async {
        let id = UUID()
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await Task.sleep(nanoseconds: UInt64(max(0, milliseconds)) * 1_000_000) }
            group.addTask {
                await withTaskCancellationHandler {
                    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                        self.lock.lock()
                        if self.pending || Task.isCancelled {
                            self.pending = false
                            self.lock.unlock()
                            continuation.resume()
                        } else {
                            self.waiters[id] = continuation
                            self.lock.unlock()
                        }
                    }
                } onCancel: {
                    self.lock.lock()
                    let continuation = self.waiters.removeValue(forKey: id)
                    self.lock.unlock()
                    continuation?.resume()
                }
            }
            await group.next()
            group.cancelAll()
        }
    }
}
