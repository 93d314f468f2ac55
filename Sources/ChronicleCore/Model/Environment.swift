import Foundation

/// Where time comes from. Production uses the system clock; tests and the
/// simulator move time only when told to.
public protocol ChronicleClock: Sendable {
    /// Milliseconds since 1970-01-01T00:00:00Z.
    func nowMilliseconds() -> Int64
}

/// Where fresh ids come from. Production draws from the system's random
/// source; tests and the simulator use a seeded generator.
public protocol IDGenerator: Sendable {
    func makeUUID() -> UUID
}

/// SplitMix64 (Steele, Lea and Flood): a small, fast, seeded generator, so tests, the
/// simulator and the benchmark make the same values on every run and every machine.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// Uniform in `0..<bound` (bound > 0), by remainder: the same values everywhere, a
    /// negligible bias for the small bounds tests use.
    public mutating func below(_ bound: Int) -> Int {
        precondition(bound > 0)
        return Int(next() % UInt64(bound))
    }
}
