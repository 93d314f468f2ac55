/// A scalar value in an op payload or a projection column.
///
/// Payloads are flat maps of field name to `Value`; SQLite stores the same
/// values (booleans as 0/1 integers).
public enum Value: Sendable, Hashable {
    case null
    case bool(Bool)
    case integer(Int64)
    case real(Double)
    case text(String)

    public var isNull: Bool { if case .null = self { true } else { false } }

    public var textValue: String? { if case .text(let s) = self { s } else { nil } }

    public var integerValue: Int64? {
        switch self {
        case .integer(let i): i
        case .bool(let b): b ? 1 : 0
        case .real(let d) where d.rounded() == d && abs(d) < 9.0e15: Int64(d)
        default: nil
        }
    }

    public var realValue: Double? {
        switch self {
        case .real(let d): d
        case .integer(let i): Double(i)
        default: nil
        }
    }

    /// A short human rendering for audits and listings.
    public var display: String {
        switch self {
        case .null: "null"
        case .bool(let b): b ? "true" : "false"
        case .integer(let i): String(i)
        case .real(let d): CanonicalJSON.format(d)
        case .text(let s): CanonicalJSON.quote(s)
        }
    }
}

/// An op's payload: field or argument name to value.
public typealias Payload = [String: Value]
