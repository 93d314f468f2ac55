import ChronicleCore
import Foundation

/// Writes results for people (tables, sentences) or for scripts (`--json`).
struct Output {
    let json: Bool

    func line(_ text: String = "") { print(text) }

    func error(_ text: String) { FileHandle.standardError.write(Data(("chronicle: " + text + "\n").utf8)) }

    /// Prints a JSON document with sorted keys.
    func emit(_ object: Any) {
        do {
            let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .fragmentsAllowed, .withoutEscapingSlashes])
            print(String(decoding: data, as: UTF8.self))
        } catch {
            self.error("could not encode JSON output: \(error)")
        }
    }

    static func jsonValue(_ value: Value) -> Any {
        switch value {
        case .null: NSNull()
        case .bool(let b): b
        case .integer(let i): i
        case .real(let d): d
        case .text(let s): s
        }
    }

    static func jsonPayload(_ payload: Payload) -> [String: Any] { payload.mapValues(jsonValue) }

    static func opJSON(_ op: Op) -> [String: Any] {
        var object: [String: Any] = [
            "op_id": op.opID.lowercased, "library_id": op.libraryID.lowercased, "device_id": op.deviceID.lowercased,
            "device_seq": op.deviceSeq, "type": op.type, "version": op.version, "entity_id": op.entityID.lowercased,
            "payload": jsonPayload(op.payload), "device_time": op.deviceTime, "base_seq": op.baseSeq,
        ]
        object["server_seq"] = op.serverSeq ?? NSNull()
        object["server_time"] = op.serverTime ?? NSNull()
        return object
    }

    static func time(_ milliseconds: Int64) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.string(from: Date(timeIntervalSince1970: Double(milliseconds) / 1000))
    }

    static func short(_ id: String) -> String { String(id.prefix(8)) }

    /// Left-aligned columns; the last column is not padded.
    func table(_ header: [String], _ rows: [[String]]) {
        let widths = header.indices.map { column in
            ([header[column]] + rows.map { $0[column] }).map { min($0.count, 60) }.max() ?? 0
        }
        func render(_ cells: [String]) -> String {
            cells.enumerated().map { index, cell in
                let clipped = cell.count > 60 ? String(cell.prefix(59)) + "…" : cell
                return index == cells.count - 1 ? clipped : clipped.padding(toLength: widths[index], withPad: " ", startingAt: 0)
            }.joined(separator: "  ")
        }
        line(render(header))
        for row in rows { line(render(row)) }
    }
}

/// A progress bar on a terminal's stderr; silent when stderr is not a terminal.
final class ProgressBar {
    private let label: String
    private let unit: String
    private let enabled: Bool
    private var lastDrawn: Int = -1

    init(_ label: String, unit: String = "ops") {
        self.label = label
        self.unit = unit
        enabled = isatty(STDERR_FILENO) == 1
    }

    func update(_ done: Int64, _ total: Int64) {
        guard enabled, total > 0 else { return }
        let percent = Int(done * 100 / total)
        guard percent != lastDrawn else { return }
        lastDrawn = percent
        let width = 30
        let filled = width * percent / 100
        let bar = String(repeating: "█", count: filled) + String(repeating: "·", count: width - filled)
        FileHandle.standardError.write(Data("\r\(label) \(bar) \(percent)% (\(done)/\(total) \(unit))".utf8))
    }

    func finish() {
        guard enabled, lastDrawn >= 0 else { return }
        FileHandle.standardError.write(Data("\r\u{1B}[2K".utf8))
    }
}
