import Foundation

/// A `Value` as a bare JSON scalar (`null`, `true`, `42`, `0.5`, `"text"`), so
/// protocol messages can carry payload values with `Codable`.
///
/// ```swift
/// struct Verdict: Codable { var field: String; var current: Value }
/// ```
///
/// Foundation's `JSONEncoder` writes the real `2.0` as `2`, which then reads
/// back as the integer 2 (the one integral real kept is `-0.0`, written `-0`).
/// Where a real must stay a real whatever its value, carry ops in a segment
/// (`SegmentCodec` or `WireJSON`).
extension Value: Codable {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let bool = try? container.decode(Bool.self) {
            self = .bool(bool)
        } else if let integer = try? container.decode(Int64.self) {
            // "-0" is never an integer: it is what the encoder makes of the real -0.0.
            if integer == 0, let real = try? container.decode(Double.self), real.sign == .minus {
                self = .real(real)
            } else {
                self = .integer(integer)
            }
        } else if let real = try? container.decode(Double.self) {
            self = .real(real)
        } else if let text = try? container.decode(String.self) {
            self = .text(text)
        } else {
            throw DecodingError.typeMismatch(Value.self, .init(codingPath: decoder.codingPath,
                debugDescription: "Expected null, a boolean, a number or a string."))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let b): try container.encode(b)
        case .integer(let i): try container.encode(i)
        case .real(let d): try container.encode(d)
        case .text(let s): try container.encode(s)
        }
    }
}
