import Foundation

/// SplitMix64: seedable and the same on every platform, so a fuzz input is named by its run's
/// seed and its own index, and rebuilt from those two numbers alone.
struct FuzzRandom {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    /// The generator of input `index` of run `seed`: no input depends on the ones before it, so
    /// any one can be replayed alone, and inputs can be made on several threads in any order.
    init(seed: UInt64, index: UInt64) {
        state = seed &* 0x9E37_79B9_7F4A_7C15 ^ (index &+ 1) &* 0xD1B5_4A32_D192_ED03
        _ = next()
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// 0..<n (n > 0).
    mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }

    mutating func chance(_ percent: Int) -> Bool { below(100) < percent }

    mutating func pick<T>(_ items: [T]) -> T { items[below(items.count)] }

    mutating func bytes(_ count: Int) -> [UInt8] { (0..<count).map { _ in UInt8(truncatingIfNeeded: next()) } }
}

/// Seeds and counts from the environment, so that a soak is the suite's test with larger numbers.
enum FuzzEnvironment {
    static func integer(_ name: String, default fallback: Int) -> Int {
        guard let text = ProcessInfo.processInfo.environment[name], let value = Int(text), value >= 0 else { return fallback }
        return value
    }

    static func seed(default fallback: UInt64) -> UInt64 {
        guard let text = ProcessInfo.processInfo.environment["CHRONICLE_FUZZ_SEED"], let value = UInt64(text) else { return fallback }
        return value
    }

    /// `CHRONICLE_FUZZ_ONLY=12,907`: replay just these inputs of the seed, each printed with its answer.
    static var only: [UInt64]? {
        guard let text = ProcessInfo.processInfo.environment["CHRONICLE_FUZZ_ONLY"], !text.isEmpty else { return nil }
        return text.split(separator: ",").compactMap { UInt64($0.trimmingCharacters(in: .whitespaces)) }
    }
}
