import Foundation

/// Which entities a sealed segment may hold ops for: a Bloom filter over the
/// entity ids of its ops, kept beside the segment so one entity's history
/// (audit, the server's verdicts) opens only the segments that can hold it.
///
/// "No" is exact; "maybe" is wrong about 1% of the time at the sizes used
/// (10 bits and 7 probes per id), so a reader still checks each op's id.
/// Layout (`Schemas/store/device-v4.md`): one byte format (1), one byte probe
/// count, four bytes bit count (little-endian), then the bits (bit `i` is bit
/// `i % 8` of byte `i / 8`). Probe `j` of an id sets bit `(h1 + j·h2) mod m`,
/// with `h1`, `h2` mixed from the id's two 64-bit halves (`SegmentFilter.hashes`).
public struct SegmentFilter: Sendable, Equatable {
    public static let format: UInt8 = 1
    public static let bitsPerID = 10
    public static let probes: UInt8 = 7

    public let probes: UInt8
    public let bitCount: UInt32
    public private(set) var bits: [UInt8]

    /// A filter sized for `ids` holding all of them.
    public init<IDs: Collection>(ids: IDs) where IDs.Element == UUID {
        let count = max(64, ids.count * Self.bitsPerID)
        bitCount = UInt32((count + 7) / 8 * 8)
        probes = Self.probes
        bits = [UInt8](repeating: 0, count: Int(bitCount) / 8)
        for id in ids { insert(id) }
    }

    /// Reads a stored filter; nil if the bytes are not one (a reader then opens the segment).
    public init?(bytes: some Collection<UInt8>) {
        let bytes = Array(bytes)
        guard bytes.count >= 6, bytes[0] == Self.format, bytes[1] > 0 else { return nil }
        let count = UInt32(bytes[2]) | UInt32(bytes[3]) << 8 | UInt32(bytes[4]) << 16 | UInt32(bytes[5]) << 24
        guard count > 0, count % 8 == 0, bytes.count == 6 + Int(count) / 8 else { return nil }
        probes = bytes[1]
        bitCount = count
        bits = Array(bytes[6...])
    }

    public var bytes: [UInt8] {
        [Self.format, probes, UInt8(bitCount & 0xFF), UInt8(bitCount >> 8 & 0xFF), UInt8(bitCount >> 16 & 0xFF), UInt8(bitCount >> 24)] + bits
    }

    /// False only if no op of the segment acts on `id`.
    public func mayContain(_ id: UUID) -> Bool {
        let (h1, h2) = Self.hashes(id)
        for probe in 0..<UInt64(probes) {
            let bit = (h1 &+ probe &* h2) % UInt64(bitCount)
            if bits[Int(bit / 8)] & (1 << UInt8(bit % 8)) == 0 { return false }
        }
        return true
    }

    private mutating func insert(_ id: UUID) {
        let (h1, h2) = Self.hashes(id)
        for probe in 0..<UInt64(probes) {
            let bit = (h1 &+ probe &* h2) % UInt64(bitCount)
            bits[Int(bit / 8)] |= 1 << UInt8(bit % 8)
        }
    }

    /// Two 64-bit hashes of an id: its halves (big-endian, as the id's bytes read) through
    /// the SplitMix64 finalizer, so the time-ordered leading bytes of a v7 id spread as well.
    static func hashes(_ id: UUID) -> (UInt64, UInt64) {
        let u = id.uuid
        let high = [u.0, u.1, u.2, u.3, u.4, u.5, u.6, u.7].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        let low = [u.8, u.9, u.10, u.11, u.12, u.13, u.14, u.15].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        return (mix(high ^ mix(low)), mix(low ^ 0x9E37_79B9_7F4A_7C15) | 1)
    }

    private static func mix(_ value: UInt64) -> UInt64 {
        var z = value &+ 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
