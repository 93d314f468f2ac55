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

    struct ResultBody: Codable {
        var opID: String
        var deviceSeq: Int64
        var status: String
        var serverSeq: Int64?
        var code: String?
        var message: String?
        var verdict: VerdictBody?
    }

    struct PushBody: Codable {
        var results: [ResultBody]
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
            throw ChronicleError(.malformedPayload, "The \(what) is not valid JSON of the expected shape: \(error)")
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

    public static func encode(_ response: PushResponse) -> [UInt8] {
        let results = response.results.map { result -> ResultBody in
            var body = ResultBody(opID: result.opID.lowercased, deviceSeq: result.deviceSeq, status: "accepted")
            switch result.outcome {
            case .accepted(let seq): body.serverSeq = seq
            case .duplicate(let seq): body.status = "duplicate"; body.serverSeq = seq
            case .rejected(let code, let message): body.status = "rejected"; body.code = code; body.message = message
            }
            body.verdict = result.verdict.map(Self.body)
            return body
        }
        return encode(PushBody(results: results, head: response.head))
    }

    public static func decodePushResponse(_ bytes: [UInt8]) throws(ChronicleError) -> PushResponse {
        let body = try decode(PushBody.self, from: bytes, what: "push response")
        var results: [PushResult] = []
        for item in body.results {
            guard let id = UUID(text: item.opID) else { throw ChronicleError(.malformedPayload, "A push result's opID '\(item.opID)' is not a UUID.") }
            let outcome: PushOutcome
            switch (item.status, item.serverSeq) {
            case ("accepted", let seq?): outcome = .accepted(serverSeq: seq)
            case ("duplicate", let seq?): outcome = .duplicate(serverSeq: seq)
            case ("rejected", _): outcome = .rejected(code: item.code ?? "rejected", message: item.message ?? "")
            default: throw ChronicleError(.malformedPayload, "A push result has status '\(item.status)' without what it needs.")
            }
            results.append(PushResult(opID: id, deviceSeq: item.deviceSeq, outcome: outcome, verdict: try item.verdict.map(verdict)))
        }
        return PushResponse(results: results, head: body.head)
    }

    /// The `{"error":{"code","message"}}` body every 4xx and 5xx carries, if this is one.
    public static func decodeError(_ bytes: [UInt8]) -> (code: String, message: String)? {
        guard let body = try? JSONDecoder().decode(ErrorBody.self, from: Data(bytes)) else { return nil }
        return (body.error.code, body.error.message)
    }
}
