import ChronicleCore
import Foundation
import Testing

@Suite struct SegmentFilterTests {
    /// Deterministic ids: time-ordered leading bytes (as v7 ids have), the rest from a counter's hash.
    static func ids(_ count: Int, salt: UInt64) -> [UUID] {
        (0..<count).map { n in
            var z = UInt64(n) &* 0x9E37_79B9_7F4A_7C15 ^ salt
            z = (z ^ (z >> 31)) &* 0xBF58_476D_1CE4_E5B9
            let t = UInt64(1_780_000_000_000 + n)
            var bytes = [UInt8](repeating: 0, count: 16)
            for i in 0..<6 { bytes[i] = UInt8(truncatingIfNeeded: t >> (40 - 8 * UInt64(i))) }
            for i in 6..<16 { bytes[i] = UInt8(truncatingIfNeeded: z >> (8 * UInt64(i - 6))) }
            bytes[6] = 0x70 | bytes[6] & 0x0F
            bytes[8] = 0x80 | bytes[8] & 0x3F
            return UUID(uuid: (bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
                               bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]))
        }
    }

    @Test("Every id put in is found; ids left out are found about 1% of the time")
    func noFalseNegativesAndFewFalsePositives() {
        let members = Self.ids(8_000, salt: 1)
        let filter = SegmentFilter(ids: members)
        #expect(members.allSatisfy(filter.mayContain))
        let others = Self.ids(50_000, salt: 2)
        let falsePositives = others.filter(filter.mayContain).count
        #expect(falsePositives > 0, "a 10-bit, 7-probe filter is not exact")
        #expect(Double(falsePositives) / Double(others.count) < 0.02)
    }

    @Test("Stored bytes read back to the same filter; anything else is refused")
    func bytesRoundTripAndBadBytesAreRefused() throws {
        let filter = SegmentFilter(ids: Self.ids(300, salt: 3))
        let bytes = filter.bytes
        #expect(bytes.count == 6 + Int(filter.bitCount) / 8 && bytes[0] == 1 && bytes[1] == 7)
        #expect(SegmentFilter(bytes: bytes) == filter)
        #expect(SegmentFilter(bytes: []) == nil)
        #expect(SegmentFilter(bytes: Array(bytes.dropLast())) == nil, "cut short")
        #expect(SegmentFilter(bytes: bytes + [0]) == nil, "trailing byte")
        var future = bytes
        future[0] = 2
        #expect(SegmentFilter(bytes: future) == nil, "another format")
        var noProbes = bytes
        noProbes[1] = 0
        #expect(SegmentFilter(bytes: noProbes) == nil)
        // An empty segment still gets a (small) filter that says no to everything.
        let empty = SegmentFilter(ids: [UUID]())
        #expect(empty.bitCount == 64 && !Self.ids(100, salt: 4).contains(where: empty.mayContain))
    }

    /// Stored filters must stay readable by every later version: the layout and the hashing
    /// are pinned (the expected bytes come from the documented algorithm, computed apart).
    @Test func theLayoutAndHashingArePinned() throws {
        let id = try #require(UUID(uuidString: "019e7044-cf9d-708f-adde-bb04ee046a36"))
        #expect(SegmentFilter(ids: [id]).bytes == [1, 7, 64, 0, 0, 0, 28, 0, 0, 3, 0, 96, 0, 0])
    }
}
