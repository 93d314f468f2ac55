import CSQLite
import ChronicleCore
import Foundation

/// `chronicle_uuid_blob(text)`: the 16 bytes of a UUID written as text (`8-4-4-4-12` hex
/// digits, either case), or NULL for anything else. Registered on every connection the
/// store opens (and any other connection that writes to the store's outbox: its guard triggers
/// call it). The device keeps the ids of confirmed ops in this form (store format v5,
/// `chronicle_sealed_ids`; v9, `chronicle_op_ids`), at a third of the bytes of their text; SQL
/// that matches a text id against them (a trigger, a migration, `verify`) converts it with this function.
/// SQLite before 3.41 has no `unhex()`, so it is ours. Deterministic and innocuous: it reads
/// nothing but its argument, so the schema's triggers may call it.
public enum UUIDBlobFunction {
    static let name = "chronicle_uuid_blob"

    public static func register(on handle: OpaquePointer) {
        sqlite3_create_function_v2(handle, name, 1, SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS,
                                   nil, chronicleUUIDBlob, nil, nil, nil)
    }

    /// The 16 bytes of the UUID spelled by `text`, or nil when it is not exactly one.
    static func parse(_ text: UnsafeBufferPointer<UInt8>) -> uuid_t? {
        guard text.count == 36 else { return nil }
        var bytes: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        let ok = withUnsafeMutableBytes(of: &bytes) { out -> Bool in
            var position = 0
            for byte in 0..<16 {
                if byte == 4 || byte == 6 || byte == 8 || byte == 10 {
                    guard text[position] == UInt8(ascii: "-") else { return false }
                    position += 1
                }
                guard let high = Hex.value(of: text[position]), let low = Hex.value(of: text[position + 1]) else { return false }
                out[byte] = high << 4 | low
                position += 2
            }
            return true
        }
        return ok ? bytes : nil
    }
}

/// The SQL function's body (SQLite calls it on the thread running the statement).
private func chronicleUUIDBlob(_ context: OpaquePointer?, _ count: Int32, _ values: UnsafeMutablePointer<OpaquePointer?>?) {
    guard count == 1, let value = values?[0], sqlite3_value_type(value) == SQLITE_TEXT,
          let text = sqlite3_value_text(value) else {
        sqlite3_result_null(context)
        return
    }
    let length = Int(sqlite3_value_bytes(value))
    guard let bytes = UUIDBlobFunction.parse(UnsafeBufferPointer(start: text, count: length)) else {
        sqlite3_result_null(context)
        return
    }
    withUnsafeBytes(of: bytes) { raw in chronicle_result_blob(context, raw.baseAddress, 16) }
}
