import Foundation

/// A JSON value with ordered object keys, so `--json` output is stable.
indirect enum JSON {
    case null
    case bool(Bool)
    case int(Int64)
    case number(Double)
    case string(String)
    case array([JSON])
    case object([(String, JSON)])

    var rendered: String {
        switch self {
        case .null: return "null"
        case .bool(let b): return b ? "true" : "false"
        case .int(let i): return String(i)
        case .number(let d):
            guard d.isFinite else { return "null" }
            return String(format: "%.6g", d)
        case .string(let s): return Self.quote(s)
        case .array(let items): return "[" + items.map(\.rendered).joined(separator: ",") + "]"
        case .object(let pairs): return "{" + pairs.map { Self.quote($0.0) + ":" + $0.1.rendered }.joined(separator: ",") + "}"
        }
    }

    private static func quote(_ s: String) -> String {
        var out = "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}

/// One line of the printed table.
struct TableRow {
    var measurement: String
    var chronicle: String
    var baseline: String
    var ratio: String
    var target: String
    var verdict: String
}

/// Renders rows as a fixed-width table.
func renderTable(_ rows: [TableRow]) -> String {
    let header = TableRow(measurement: "measurement", chronicle: "chronicle", baseline: "raw sqlite", ratio: "ratio",
                          target: "target", verdict: "")
    let all = [header] + rows
    func width(_ key: KeyPath<TableRow, String>) -> Int { all.map { $0[keyPath: key].count }.max() ?? 0 }
    let widths = [width(\.measurement), width(\.chronicle), width(\.baseline), width(\.ratio), width(\.target)]
    func pad(_ s: String, _ w: Int, right: Bool = false) -> String {
        let fill = String(repeating: " ", count: max(0, w - s.count))
        return right ? fill + s : s + fill
    }
    func line(_ row: TableRow) -> String {
        [pad(row.measurement, widths[0]), pad(row.chronicle, widths[1], right: true), pad(row.baseline, widths[2], right: true),
         pad(row.ratio, widths[3], right: true), pad(row.target, widths[4]), row.verdict].joined(separator: "  ")
    }
    let rule = String(repeating: "-", count: widths.reduce(0, +) + 2 * 5 + 4)
    return ([line(header), rule] + rows.map(line)).joined(separator: "\n")
}

func verdict(_ passed: Bool?) -> String {
    switch passed {
    case true?: "ok"
    case false?: "MISSED"
    case nil: ""
    }
}

func ratioText(_ value: Double) -> String { formatFixed(value, 2) + "x" }
func millisecondsText(_ value: Double) -> String { formatFixed(value, 3) + " ms" }
