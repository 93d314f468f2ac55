import Foundation

/// The JSON bodies of the sync API other than op segments (`Schemas/api/openapi.yaml`):
/// push results, verdicts, device registration and errors.
public enum ProtocolJSON {
    struct VerdictBody: Codable {
        var entityID: String
        var entityType: String?
        var exists: Bool
        var deleted: Bool
        var fields: [String: Value]
        var sets: [String: [Value]]
        var lastSeq: Int64
        var head: Int64
    }

    struct ErrorBody: Codable {
        struct Detail: Codable { var code: String; var message: String }
        var error: Detail
    }

    /// `POST /v1/devices`.
    public struct Registration: Codable, Sendable, Equatable {
        public var user: String
        public var password: String
        public var deviceID: String
        public init(user: String, password: String, deviceID: String) {
            self.user = user
            self.password = password
            self.deviceID = deviceID
        }
    }

    /// The answer to a device's sign-in: its token, library, device id and schema.
    public struct RegistrationResult: Codable, Sendable, Equatable {
        public var token: String
        public var libraryID: String
        public var deviceID: String
        public var schema: String
        public init(token: String, libraryID: String, deviceID: String, schema: String) {
            self.token = token
            self.libraryID = libraryID
            self.deviceID = deviceID
            self.schema = schema
        }
    }

    /// `POST /v1/session`'s answer: an access token and how long it is good for.
    public struct SessionResult: Codable, Sendable, Equatable {
        public var accessToken: String
        public var expiresInSeconds: Int
        public var libraryID: String
        public var deviceID: String
        public init(accessToken: String, expiresInSeconds: Int, libraryID: String, deviceID: String) {
            self.accessToken = accessToken
            self.expiresInSeconds = expiresInSeconds
            self.libraryID = libraryID
            self.deviceID = deviceID
        }
    }

    static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }

    public static func encode<T: Encodable>(_ value: T) -> [UInt8] {
        // Encoding our own value types cannot fail.
        Array(try! encoder().encode(value))
    }

    public static func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8], what: String) throws(ChronicleError) -> T {
        do {
            return try JSONDecoder().decode(type, from: Data(bytes))
        } catch {
            throw ChronicleError(.malformedPayload, "The \(what) is not valid JSON of the expected shape: \(shapeProblem(error)).")
        }
    }

    /// What is wrong with a body, said from the caller's side: the field and what it lacks, never
    /// the decoder's own debug text.
    static func shapeProblem(_ error: any Error) -> String {
        func field(_ path: [any CodingKey], _ last: (any CodingKey)? = nil) -> String {
            let names = (path + (last.map { [$0] } ?? [])).map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }
            return "'" + names.joined(separator: ".").replacingOccurrences(of: ".[", with: "[") + "'"
        }
        switch error as? DecodingError {
        case .keyNotFound(let key, let context)?: return "the field \(field(context.codingPath, key)) is missing"
        case .valueNotFound(_, let context)?: return "the field \(field(context.codingPath)) is null"
        case .typeMismatch(let type, let context)?:
            let expected = type == String.self ? "a string" : type == Bool.self ? "true or false" : "of another type"
            return context.codingPath.isEmpty ? "the body is not a JSON object" : "the field \(field(context.codingPath)) must be \(expected)"
        case .dataCorrupted(let context)?:
            return context.codingPath.isEmpty ? "it is not JSON" : "the field \(field(context.codingPath)) holds a value that is not allowed"
        default: return "it cannot be read"
        }
    }

    static func body(_ verdict: Verdict) -> VerdictBody {
        VerdictBody(entityID: verdict.entityID.lowercased, entityType: verdict.entityType, exists: verdict.exists,
                    deleted: verdict.deleted, fields: verdict.fields, sets: verdict.sets, lastSeq: verdict.lastSeq, head: verdict.head)
    }

    static func verdict(_ body: VerdictBody) throws(ChronicleError) -> Verdict {
        guard let id = UUID(text: body.entityID) else { throw ChronicleError(.malformedPayload, "The verdict's entityID '\(body.entityID)' is not a UUID.") }
        return Verdict(entityID: id, entityType: body.entityType, deleted: body.deleted, fields: body.fields, sets: body.sets,
                       lastSeq: body.lastSeq, head: body.head)
    }

    public static func encode(_ verdict: Verdict) -> [UInt8] { encode(body(verdict)) }

    public static func decodeVerdict(_ bytes: [UInt8]) throws(ChronicleError) -> Verdict {
        try verdict(try decode(VerdictBody.self, from: bytes, what: "verdict"))
    }

    public static func encode(_ response: PushResponse) -> [UInt8] { PushResponseJSON.encode(response) }

    public static func decodePushResponse(_ bytes: [UInt8]) throws(ChronicleError) -> PushResponse {
        try PushResponseJSON.decode(bytes)
    }

    /// The `{"error":{"code","message"}}` body every 4xx and 5xx carries, if this is one.
    public static func decodeError(_ bytes: [UInt8]) -> (code: String, message: String)? {
        guard let body = try? JSONDecoder().decode(ErrorBody.self, from: Data(bytes)) else { return nil }
        return (body.error.code, body.error.message)
    }
}
