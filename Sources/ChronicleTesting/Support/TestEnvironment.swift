import ChronicleCore
import Foundation

/// A deterministic id generator for tests and the simulator (SplitMix64).
public final class SeededIDGenerator: IDGenerator, @unchecked Sendable {
    private var random: SplitMix64
    private let lock = NSLock()

    public init(seed: UInt64) { random = SplitMix64(seed: seed) }

    public func next() -> UInt64 {
        lock.lock(); defer { lock.unlock() }
        return random.next()
    }

    public func makeUUID() -> UUID {
        let a = next(), b = next()
        var bytes = [UInt8](repeating: 0, count: 16)
        for i in 0..<8 { bytes[i] = UInt8(truncatingIfNeeded: a >> (8 * i)) }
        for i in 0..<8 { bytes[8 + i] = UInt8(truncatingIfNeeded: b >> (8 * i)) }
        bytes[6] = (bytes[6] & 0x0F) | 0x40 // version 4
        bytes[8] = (bytes[8] & 0x3F) | 0x80 // RFC 4122 variant
        return UUID(uuid: (bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
                           bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]))
    }
}

/// A clock that moves only when told to.
public final class ManualClock: ChronicleClock, @unchecked Sendable {
    private var now: Int64
    private let lock = NSLock()
    public init(startMilliseconds: Int64 = 1_780_000_000_000) { now = startMilliseconds }
    public func nowMilliseconds() -> Int64 { lock.lock(); defer { lock.unlock() }; return now }
    public func advance(milliseconds: Int64) { lock.lock(); now += milliseconds; lock.unlock() }
    public func set(milliseconds: Int64) { lock.lock(); now = milliseconds; lock.unlock() }
}
