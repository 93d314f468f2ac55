import ChronicleCore
import Foundation

/// The simulation's true time: one per run, moved only by the simulator.
/// Nothing in a simulation reads the machine's clock.
public final class SimulatedTime: @unchecked Sendable {
    private let lock = NSLock()
    private var now: Int64

    /// 2026-05-28, a Thursday: any fixed instant works.
    public static let epochMilliseconds: Int64 = 1_780_000_000_000

    public init(startMilliseconds: Int64 = SimulatedTime.epochMilliseconds) { now = startMilliseconds }

    public var nowMilliseconds: Int64 { lock.lock(); defer { lock.unlock() }; return now }

    /// True time never runs backwards; device clocks may.
    public func advance(milliseconds: Int64) {
        precondition(milliseconds >= 0, "true time never runs backwards")
        lock.lock(); now += milliseconds; lock.unlock()
    }
}

/// A device's (or the server's) clock: the simulation's true time plus an
/// offset that the seed decides — skewed by up to years, and jumping backwards
/// and forwards as the simulation goes, the way phone clocks do after a
/// battery pull, a manual change or a time-zone bug.
///
/// ```swift
/// let time = SimulatedTime()
/// let phone = SimulatedClock(time: time, offsetMilliseconds: -3 * 365 * 86_400_000)
/// phone.jump(byMilliseconds: 90_000)    // the user fixes it, overshooting
/// ```
public final class SimulatedClock: ChronicleClock, @unchecked Sendable {
    public let time: SimulatedTime
    private let lock = NSLock()
    private var offset: Int64

    public init(time: SimulatedTime, offsetMilliseconds: Int64 = 0) {
        self.time = time
        self.offset = offsetMilliseconds
    }

    public func nowMilliseconds() -> Int64 {
        lock.lock(); defer { lock.unlock() }
        return max(0, time.nowMilliseconds + offset)
    }

    /// How far this clock is from true time (negative: behind).
    public var offsetMilliseconds: Int64 { lock.lock(); defer { lock.unlock() }; return offset }

    /// Moves this clock alone, either way.
    public func jump(byMilliseconds delta: Int64) { lock.lock(); offset += delta; lock.unlock() }
}
