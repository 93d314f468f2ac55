import Foundation

/// The one JSON encoding Chronicle writes: keys sorted, no whitespace, integers
/// without a fraction, doubles in their shortest round-tripping form. The same
/// payload always gives the same bytes, which the digest and idempotency rely on.
public enum CanonicalJSON {
    public static func encode(_ payload: Payload) -> String {
        var out = "{"
        var first = true
        for key in payload.keys.sorted() {
            if !first { out.append(",") }
            first = false
            out.append(quote(key))
            out.append(":")
            append(payload[key]!, to: &out)
        }
        out.append("}")
        return out
    }

    public static func encode(_ value: Value) -> String {
        var out = ""
        append(value, to: &out)
        return out
    }

    static func append(_ value: Value, to out: inout String) {
        switch value {
        case .null: out.append("null")
        case .bool(let b): out.append(b ? "true" : "false")
        case .integer(let i): out.append(String(i))
        case .real(let d): out.append(format(d))
        case .text(let s): out.append(quote(s))
        }
    }

    /// Doubles print in Swift's shortest round-tripping form; non-finite values
    /// cannot be represented in JSON and are written as null.
    public static func format(_ d: Double) -> String {
        guard d.isFinite else { return "null" }
        if d == d.rounded(), abs(d) < 1e15 { return String(Int64(d)) + ".0" }
        return String(d)
    }

    public static func quote(_ s: String) -> String {
        // Most strings need no escaping: copy them in one go.
        if !s.utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
            return "\"" + s + "\""
        }
        var out = "\""
        out.reserveCapacity(s.utf8.count + 2)
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out.append("\\\"")
            case "\\": out.append("\\\\")
            case "\n": out.append("\\n")
            case "\r": out.append("\\r")
            case "\t": out.append("\\t")
            case _ where scalar.value < 0x20:
                out.append("\\u")
                let hex = String(scalar.value, radix: 16)
                out.append(String(repeating: "0", count: 4 - hex.count) + hex)
            default: out.unicodeScalars.append(scalar)
            }
        }
        out.append("\"")
        return out
    }

    /// Converts a value produced by JSONSerialization into a `Value`.
    public static func value(fromJSON raw: Any, key: String) throws(ChronicleError) -> Value {
        switch raw {
        case is NSNull: return .null
        case let s as String: return .text(s)
        case let n as NSNumber:
            // JSONSerialization marks booleans 'c', doubles 'd' (also for 2.0),
            // integers 'i'/'q'; keeping 2.0 a real keeps encode∘decode the identity.
            switch n.objCType.pointee {
            case 0x63, 0x42: return .bool(n.boolValue)              // 'c', 'B'
            case 0x64, 0x66: return .real(n.doubleValue)            // 'd', 'f'
            default: return .integer(n.int64Value)
            }
        default:
            throw ChronicleError(.malformedPayload, "The payload field '\(key)' must be a string, number, boolean or null.")
        }
    }
}
