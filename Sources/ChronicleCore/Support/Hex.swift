/// Lowercase hexadecimal: the one encoder of bytes as text (digests, tokens, keys in messages).
public enum Hex {
    private static let digits = Array("0123456789abcdef".utf8)

    /// `bytes` as lowercase hex, two digits a byte.
    public static func encode<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.underestimatedCount * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The bytes of hex text (either case); nil for an odd length or any other character.
    public static func decode(_ text: String) -> [UInt8]? {
        let utf8 = Array(text.utf8)
        guard utf8.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(utf8.count / 2)
        var i = 0
        while i < utf8.count {
            guard let high = value(of: utf8[i]), let low = value(of: utf8[i + 1]) else { return nil }
            out.append(high << 4 | low)
            i += 2
        }
        return out
    }

    /// The value of one hex digit (either case); nil for a byte that is not one.
    public static func value(of digit: UInt8) -> UInt8? {
        let value = nibble(digit)
        return value == 0xFF ? nil : value
    }

    /// A hex digit's value (either case), or 0xFF for a byte that is not one: without branches
    /// to mispredict, for loops that check once at the end (an id's 32 digits).
    @inlinable @inline(__always)
    public static func nibble(_ c: UInt8) -> UInt8 {
        let digit = c &- UInt8(ascii: "0")
        if digit < 10 { return digit }
        let letter = (c | 0x20) &- UInt8(ascii: "a")
        return letter < 6 ? letter + 10 : 0xFF
    }
}
