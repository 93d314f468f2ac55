/// An integer that arrives from outside this process (a header, a query parameter, a path
/// segment, a field of a JSON body): hostile until parsed. In Swift an overflow traps, and a
/// trap of the server is an outage for every user, so every such number is parsed here into a
/// range named for what it is, and arithmetic on it is checked (``WireNumber/sum(_:_:)``).
///
/// ```swift
/// let after = try WireNumber.parse(request.query["after"] ?? "0", WireNumber.seq)
/// guard let end = WireNumber.sum(start, count) else { throw … }   // nil past Int64
/// ```
///
/// The syntax is strict decimal: an optional `-` (only where the range allows a negative) and
/// 1 to 19 ASCII digits. No `+`, no spaces, no NUL, no hex: `Int64("+5")` and `" 5"` are not
/// numbers of this protocol.
public struct WireNumber: Sendable, Equatable {
    /// What the number is, for the sentence of a refusal ("the query parameter 'after'").
    public var name: String
    /// The values accepted.
    public var range: ClosedRange<Int64>

    public init(_ name: String, _ range: ClosedRange<Int64>) {
        self.name = name
        self.range = range
    }

    /// The same bound under another name (a header instead of a query parameter, say).
    public func named(_ name: String) -> WireNumber { WireNumber(name, range) }

    // MARK: - Limits

    /// The highest seq either side accepts from the other: server seqs, cursors, heads and
    /// device seqs. 2^53 is past anything a log reaches (a million ops a second for 285
    /// years) and below where a JSON double stops being exact, so a value in range can be
    /// added to any count this process holds without overflow.
    public static let seqMax: Int64 = 1 << 53

    /// A seq, a cursor or a head: 0 (nothing yet) to ``seqMax``.
    public static let seq = WireNumber("a seq", 0...seqMax)
    /// The seq of an op in the server's order: 1 (the first) to ``seqMax``.
    public static let opSeq = WireNumber("an op's seq", 1...seqMax)
    /// A device seq a server names (`Chronicle-Last-Device-Seq`): 0 (none yet) to ``seqMax``.
    public static let deviceSeq = WireNumber("a device seq", 0...seqMax)
    /// A byte offset or length in a file: 0 to 2^53 bytes (8 PiB).
    public static let byteCount = WireNumber("a byte count", 0...(1 << 53))
    /// `Retry-After` in seconds: a day at most (a longer one is read as a day).
    public static let retryAfterSeconds = WireNumber("Retry-After", 0...86_400)
    /// A server time in milliseconds since 1970 (`Chronicle-State-Carried-Over`): 0 to the year 2255.
    public static let milliseconds = WireNumber("a time in milliseconds", 0...(1 << 43))

    // MARK: - Parsing

    /// The value of `text`, or nil where it is not strict decimal or falls outside `range`.
    public func value(_ text: some StringProtocol) -> Int64? {
        let utf8 = text.utf8
        var digits = utf8[...]
        let negative = digits.first == UInt8(ascii: "-")
        if negative { digits = digits.dropFirst() }
        guard !digits.isEmpty, digits.count <= 19,
              digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return nil }
        // At most 19 digits: the magnitude fits in a UInt64, so this loop cannot overflow.
        var magnitude: UInt64 = 0
        for digit in digits { magnitude = magnitude * 10 + UInt64(digit - UInt8(ascii: "0")) }
        let value: Int64
        if negative {
            guard magnitude <= UInt64(Int64.max) + 1 else { return nil }
            value = magnitude == UInt64(Int64.max) + 1 ? .min : -Int64(magnitude)
        } else {
            guard magnitude <= UInt64(Int64.max) else { return nil }
            value = Int64(magnitude)
        }
        return range.contains(value) ? value : nil
    }

    /// The value of `text`, or a ``WireNumberError`` whose sentence names the number and its range.
    public func parse(_ text: some StringProtocol) throws(WireNumberError) -> Int64 {
        guard let value = value(text) else { throw WireNumberError(number: self, text: String(text)) }
        return value
    }

    /// `a + b`, or nil where the sum does not fit in an Int64.
    public static func sum(_ a: Int64, _ b: Int64) -> Int64? {
        let (result, overflow) = a.addingReportingOverflow(b)
        return overflow ? nil : result
    }

    /// `a - b`, or nil where the difference does not fit in an Int64.
    public static func difference(_ a: Int64, _ b: Int64) -> Int64? {
        let (result, overflow) = a.subtractingReportingOverflow(b)
        return overflow ? nil : result
    }
}

/// A number from outside that is not one (``WireNumber/parse(_:)``).
public struct WireNumberError: Error, Sendable, Equatable, CustomStringConvertible {
    public var number: WireNumber
    /// What arrived, cut to 40 characters and with control characters shown as `?`.
    public var text: String

    init(number: WireNumber, text: String) {
        self.number = number
        self.text = String(text.prefix(40).unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7F ? "?" : Character($0) })
    }

    /// "The query parameter 'after' must be a whole number from 0 to 9007199254740992; got '-1'."
    public var message: String {
        let name = number.name.prefix(1).uppercased() + number.name.dropFirst()
        return "\(name) must be a whole number from \(number.range.lowerBound) to \(number.range.upperBound); got '\(text)'."
    }

    public var description: String { message }
}
