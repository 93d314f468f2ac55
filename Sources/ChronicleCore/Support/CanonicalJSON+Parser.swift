import Foundation

extension CanonicalJSON {
    /// Parses a flat JSON object of scalars straight from UTF-8 bytes.
    ///
    /// Replaying a large log is dominated by decoding payloads, so this reads
    /// the bytes directly with the strict scanner that reads segments and the
    /// wire (`JSONScanner`), rather than through `JSONSerialization` and
    /// `NSNumber` (which also turns some 64-bit integers into doubles). What
    /// it refuses is diagnosed by `JSONSerialization` for a plain message.
    public static func decodePayload(utf8 bytes: UnsafeRawBufferPointer) throws(ChronicleError) -> Payload {
        try parse(bytes).get()
    }

    private static func parse(_ bytes: UnsafeRawBufferPointer) -> Result<Payload, ChronicleError> {
        var scanner = JSONScanner(bytes, subject: "payload")
        do throws(ChronicleError) {
            let payload = try scanner.flatObject()
            guard scanner.isAtEnd() else { throw scanner.error("unexpected bytes follow the payload object.") }
            return .success(payload)
        } catch {
            return .failure(diagnose(bytes, scanned: error))
        }
    }

    /// Parses a flat JSON object of scalars.
    public static func decodePayload(_ text: String) throws(ChronicleError) -> Payload {
        var copy = text
        return try copy.withUTF8 { parse(UnsafeRawBufferPointer($0)) }.get()
    }

    /// The error for a payload the scanner refused (`scanned`): what `JSONSerialization` says of
    /// it in plain words where it can, else the scanner's own sentence (a key named twice, an
    /// integer past 64 bits: never rounded into a real).
    private static func diagnose(_ bytes: UnsafeRawBufferPointer, scanned: ChronicleError) -> ChronicleError {
        guard let object = try? JSONSerialization.jsonObject(with: Data(bytes), options: [.fragmentsAllowed]) else {
            return ChronicleError(.malformedPayload, "The payload is not valid JSON.")
        }
        guard let dictionary = object as? [String: Any] else {
            return ChronicleError(.malformedPayload, "The payload must be a JSON object.")
        }
        for (key, value) in dictionary.sorted(by: { $0.key < $1.key }) where value is [Any] || value is [String: Any] {
            return ChronicleError(.malformedPayload, "The payload field '\(key)' must be a string, number, boolean or null.")
        }
        return ChronicleError(.malformedPayload, scanned.message)
    }
}

