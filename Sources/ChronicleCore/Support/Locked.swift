import Synchronization

/// A value reachable only under a lock, shared by reference: the toolchain's `Mutex` held by
/// a class, so that closures and threads can hold it. The store keeps its one writer connection
/// and its reader pool behind these.
///
/// The state need not be `Sendable` (a SQLite connection is not): the lock is what makes it safe
/// to reach from any thread, so the state and the results of `body` cross the lock unchecked,
/// as they would through a lock the compiler cannot see.
public final class Locked<State>: Sendable {
    private let mutex: Mutex<Unchecked<State>>

    public init(_ state: State) { mutex = Mutex(Unchecked(state)) }

    public func withLock<R>(_ body: (inout State) throws -> R) rethrows -> R {
        try mutex.withLock { held in Unchecked(try body(&held.value)) }.value
    }

    /// `body` under the lock if no one holds it now; nil, without waiting, if someone does.
    public func withLockIfAvailable<R>(_ body: (inout State) throws -> R) rethrows -> R? {
        try mutex.withLockIfAvailable { held in Unchecked(try body(&held.value)) }?.value
    }
}

/// A value handed across the lock of a `Locked`; only `Locked` makes these.
struct Unchecked<Value>: @unchecked Sendable {
    var value: Value
    init(_ value: Value) { self.value = value }
}
