import ChronicleCore
import Testing

/// Numbers from the wire: strict decimal, within a named range, and sums that say when they overflow.
@Suite struct WireNumberTests {
    let any = WireNumber("a number", .min ... .max)

    @Test func strictDecimalOnly() {
        #expect(any.value("0") == 0)
        #expect(any.value("-0") == 0)
        #expect(any.value("007") == 7)
        #expect(any.value("9223372036854775807") == .max)
        #expect(any.value("-9223372036854775808") == .min)
        for text in ["", "-", "+5", " 5", "5 ", "0x10", "1e3", "1.0", "5\0", "٣", "9223372036854775808", "-9223372036854775809",
                     "99999999999999999999", "18446744073709551616", "--1"] {
            #expect(any.value(text) == nil, "'\(text)'")
        }
    }

    @Test func boundsAreNamedAndKept() throws {
        #expect(WireNumber.seq.value("-1") == nil)
        #expect(WireNumber.seq.value(String(WireNumber.seqMax)) == WireNumber.seqMax)
        #expect(WireNumber.seq.value(String(WireNumber.seqMax + 1)) == nil)
        #expect(WireNumber.retryAfterSeconds.value("86401") == nil)
        let error = try #require(throws: WireNumberError.self) { try WireNumber.seq.named("the query parameter 'after'").parse("-1\u{0}x") }
        #expect(error.message == "The query parameter 'after' must be a whole number from 0 to \(WireNumber.seqMax); got '-1?x'.")
    }

    @Test func checkedSumsAndDifferences() {
        #expect(WireNumber.sum(.max, 1) == nil)
        #expect(WireNumber.sum(.max - 1, 1) == .max)
        #expect(WireNumber.sum(.min, -1) == nil)
        #expect(WireNumber.difference(.min, 1) == nil)
        #expect(WireNumber.difference(0, .min) == nil)
        #expect(WireNumber.sum(WireNumber.seqMax, Int64(Int32.max)) != nil, "a seq in range leaves room for any count")
    }
}
