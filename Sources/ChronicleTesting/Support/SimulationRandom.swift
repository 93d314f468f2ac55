import ChronicleCore
import Foundation

/// The simulator's only source of randomness: SplitMix64 from one seed, so one
/// seed replays one run exactly. `fork` derives an independent stream (per
/// device, per transport) so that adding a draw in one place does not shift
/// every decision made elsewhere.
///
/// ```swift
/// let random = SimulationRandom(seed: 42)
/// if random.chance(0.1) { … }
/// let device = random.below(devices.count)
/// let transportRandom = random.fork(label: 7)
/// ```
public final class SimulationRandom: @unchecked Sendable {
    private let generator: SeededIDGenerator
    public let seed: UInt64

    public init(seed: UInt64) {
        self.seed = seed
        generator = SeededIDGenerator(seed: Self.mix(seed))
    }

    /// A stream of its own, decided by this stream's seed and `label` only.
    public func fork(label: UInt64) -> SimulationRandom {
        SimulationRandom(seed: Self.mix(seed ^ Self.mix(label &+ 0xA076_1D64_78BD_642F)))
    }

    public func next() -> UInt64 { generator.next() }

    /// Uniform in 0..<n (n ≥ 1).
    public func below(_ n: Int) -> Int {
        precondition(n >= 1, "below(\(n)): the range is empty")
        return Int(next() % UInt64(n))
    }

    /// Uniform in the closed range.
    public func between(_ range: ClosedRange<Int>) -> Int { range.lowerBound + below(range.count) }

    /// Uniform in the closed range of Int64.
    public func between64(_ low: Int64, _ high: Int64) -> Int64 {
        precondition(low <= high)
        let span = UInt64(bitPattern: high &- low) &+ 1
        return span == 0 ? Int64(bitPattern: next()) : low &+ Int64(bitPattern: next() % span)
    }

    /// Uniform in [0, 1).
    public func unit() -> Double { Double(next() >> 11) / Double(UInt64(1) << 53) }

    /// True with probability `p`.
    public func chance(_ p: Double) -> Bool { p > 0 && unit() < p }

    public func pick<T>(_ items: [T]) -> T { items[below(items.count)] }

    /// An index chosen with the given weights (at least one positive).
    public func weighted(_ weights: [Double]) -> Int {
        let total = weights.reduce(0) { $0 + max(0, $1) }
        precondition(total > 0, "weighted: no positive weight")
        var x = unit() * total
        for (index, weight) in weights.enumerated() where weight > 0 {
            if x < weight { return index }
            x -= weight
        }
        return weights.lastIndex { $0 > 0 }!
    }

    public func uuid() -> UUID { generator.makeUUID() }

    /// SplitMix64's finalizer: spreads nearby seeds far apart.
    static func mix(_ value: UInt64) -> UInt64 {
        var z = value &+ 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
