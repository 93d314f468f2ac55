import ChronicleCore
import ChronicleTesting
import ChronicleStore
import Foundation

/// A failure of the benchmark itself (bad flags, a baseline SQL error, a child that died).
struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The workload's draws, on `ChronicleCore.SplitMix64`: seeded, so every run generates the same workload.
extension SplitMix64 {
    /// Uniform in `range`.
    mutating func int(_ range: ClosedRange<Int>) -> Int { range.lowerBound + below(range.count) }

    /// Uniform in [0, 1).
    mutating func unit() -> Double { Double(next() >> 11) * 0x1.0p-53 }

    mutating func chance(_ probability: Double) -> Bool { unit() < probability }

    mutating func pick<T>(_ items: [T]) -> T { items[below(items.count)] }

    /// A time-ordered version-7 UUID (RFC 9562) for `milliseconds`, the rest from two
    /// draws: shaped like the ids production devices make (`SystemIDGenerator`), so
    /// indexes grow at their end as they do in real stores.
    mutating func uuid7(milliseconds: Int64) -> UUID {
        let a = next(), b = next()
        var bytes = [UInt8](repeating: 0, count: 16)
        for i in 0..<6 { bytes[i] = UInt8(truncatingIfNeeded: UInt64(milliseconds) >> (8 * (5 - i))) }
        for i in 6..<8 { bytes[i] = UInt8(truncatingIfNeeded: a >> (8 * i)) }
        for i in 8..<16 { bytes[i] = UInt8(truncatingIfNeeded: b >> (8 * (i - 8))) }
        bytes[6] = (bytes[6] & 0x0F) | 0x70 // version 7
        bytes[8] = (bytes[8] & 0x3F) | 0x80 // RFC 4122 variant
        return UUID(uuid: (bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
                           bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]))
    }

    /// A UUID made from two draws, shaped as version 4 like `SeededIDGenerator`'s.
    mutating func uuid() -> UUID {
        let a = next(), b = next()
        var bytes = [UInt8](repeating: 0, count: 16)
        for i in 0..<8 { bytes[i] = UInt8(truncatingIfNeeded: a >> (8 * i)) }
        for i in 0..<8 { bytes[8 + i] = UInt8(truncatingIfNeeded: b >> (8 * i)) }
        bytes[6] = (bytes[6] & 0x0F) | 0x40
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        return UUID(uuid: (bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
                           bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]))
    }
}

/// Seeded, time-ordered (version 7) ids from a store's clock: deterministic, and
/// shaped like production ids.
final class SeededV7IDGenerator: IDGenerator, @unchecked Sendable {
    private let lock = NSLock()
    private var rng: SplitMix64
    private let clock: any ChronicleClock

    init(seed: UInt64, clock: any ChronicleClock) {
        rng = SplitMix64(seed: seed)
        self.clock = clock
    }

    func makeUUID() -> UUID {
        let now = clock.nowMilliseconds()
        lock.lock(); defer { lock.unlock() }
        return rng.uuid7(milliseconds: now)
    }
}

/// Monotonic nanoseconds.
@inline(__always)
func nowNanoseconds() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

/// Latency samples in nanoseconds, summarised with nearest-rank percentiles.
struct Samples {
    private(set) var nanoseconds: [UInt64] = []
    private var sorted: [UInt64]? = nil

    init(capacity: Int = 0) { nanoseconds.reserveCapacity(capacity) }

    mutating func add(_ value: UInt64) {
        nanoseconds.append(value)
        sorted = nil
    }

    var count: Int { nanoseconds.count }

    /// Nearest-rank percentile in milliseconds, `p` in 0...1.
    mutating func percentileMilliseconds(_ p: Double) -> Double {
        if sorted == nil { sorted = nanoseconds.sorted() }
        guard let sorted, !sorted.isEmpty else { return .nan }
        let rank = max(1, Int((p * Double(sorted.count)).rounded(.up)))
        return Double(sorted[min(rank, sorted.count) - 1]) / 1e6
    }

    var meanMilliseconds: Double {
        nanoseconds.isEmpty ? .nan : Double(nanoseconds.reduce(0, +)) / Double(nanoseconds.count) / 1e6
    }
}

/// Progress lines for long phases go to stderr so stdout stays a clean table or JSON object.
func progress(_ message: String) {
    FileHandle.standardError.write(Data((message + "\n").utf8))
}

/// A progress printer that speaks at most once every `intervalSeconds`.
struct Throttle {
    private var last: UInt64 = 0
    let intervalNanoseconds: UInt64

    init(intervalSeconds: Double = 2) { intervalNanoseconds = UInt64(intervalSeconds * 1e9) }

    mutating func ready() -> Bool {
        let now = nowNanoseconds()
        if now - last >= intervalNanoseconds { last = now; return true }
        return false
    }
}

/// A field of /proc/self/status in kilobytes (`VmHWM`, `VmRSS`), or nil off Linux.
func procStatusKilobytes(_ field: String) -> Int? {
    guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return nil }
    for line in text.split(separator: "\n") where line.hasPrefix(field + ":") {
        let digits = line.dropFirst(field.count + 1).filter(\.isNumber)
        return Int(digits)
    }
    return nil
}

/// Resets this process's `VmHWM` to its current resident memory (Linux), so the peak read
/// afterwards is that of the work in between; returns `VmRSS` now (KiB).
func resetPeakMemory() -> Int {
    if let handle = FileHandle(forWritingAtPath: "/proc/self/clear_refs") {
        handle.write(Data("5".utf8))
        try? handle.close()
    }
    return procStatusKilobytes("VmRSS") ?? 0
}

/// Size of a SQLite database with its WAL.
func databaseBytes(_ path: String) -> Int64 {
    var total: Int64 = 0
    for suffix in ["", "-wal"] {
        if let size = (try? FileManager.default.attributesOfItem(atPath: path + suffix))?[.size] as? NSNumber {
            total += size.int64Value
        }
    }
    return total
}

func formatCount(_ value: Double) -> String {
    let rounded = Int64(value.rounded())
    var digits = String(abs(rounded))
    var groups: [String] = []
    while digits.count > 3 {
        groups.insert(String(digits.suffix(3)), at: 0)
        digits.removeLast(3)
    }
    groups.insert(digits, at: 0)
    return (rounded < 0 ? "-" : "") + groups.joined(separator: ",")
}

func formatFixed(_ value: Double, _ digits: Int) -> String {
    guard value.isFinite else { return "n/a" }
    return String(format: "%.\(digits)f", value)
}

/// Completes `store`'s phrase indexes on this thread and waits for its background filler, so the
/// next measurement runs without it (after a bulk apply, a rebuild or a bootstrap the store fills
/// them in the background). Returns the seconds it took and the rows they hold.
@discardableResult
func completePhraseIndexes(_ store: DeviceStore, label: String) throws -> (seconds: Double, rows: Int64) {
    let t0 = nowNanoseconds()
    var throttle = Throttle()
    try store.completePhraseIndexes { done, total in
        if throttle.ready() { progress("\(label): phrase indexes \(formatCount(Double(done)))/\(formatCount(Double(total))) rows") }
    }
    guard store.waitForPhraseIndexing(timeoutSeconds: 3_600) else { throw BenchError("\(label): the phrase index filler did not stop") }
    let seconds = Double(nowNanoseconds() - t0) / 1e9
    let rows = try store.phraseIndexStatus().reduce(0) { $0 + $1.rows }
    progress("\(label): phrase indexes complete (\(formatCount(Double(rows))) rows) after \(formatFixed(seconds, 2)) s more")
    return (seconds, rows)
}
