import Foundation

/// The push answer's JSON (`Schemas/api/openapi.yaml`, `PushResponse`), written and read
/// directly: one result per pushed op, so a 500-op push answers 500 results, and through
/// `JSONEncoder`/`JSONDecoder` that took the server about 3.5 ms to write and the device
/// about 4.5 ms to read, on every push. The keys and their order are what the `Codable`
/// bodies gave (sorted), so either side reads the other's. A rejection's verdict (rare)
/// still goes through `Codable`.
enum PushResponseJSON {
    static func encode(_ response: PushResponse) -> [UInt8] {
        var out = JSONWriter(capacity: 32 + response.results.count * 100)
        out.raw("{\"head\":")
        out.integer(response.head)
        out.raw(",\"results\":[")
        for (index, result) in response.results.enumerated() {
            if index > 0 { out.raw(",") }
            out.raw("{")
            let status: StaticString
            switch result.outcome {
            case .accepted: status = "accepted"
            case .duplicate: status = "duplicate"
            case .rejected(let code, _):
                status = "rejected"
                out.raw("\"code\":")
                out.string(code)
                out.raw(",")
            }
            out.raw("\"deviceSeq\":")
            out.integer(result.deviceSeq)
            if case .rejected(_, let message) = result.outcome {
                out.raw(",\"message\":")
                out.string(message)
            }
            out.raw(",\"opID\":")
            out.uuid(result.opID)
            if let seq = result.outcome.serverSeq {
                out.raw(",\"serverSeq\":")
                out.integer(seq)
            }
            out.raw(",\"status\":\"")
            out.raw(status)
            out.raw("\"")
            if let verdict = result.verdict {
                out.raw(",\"verdict\":")
                out.raw(json: ProtocolJSON.encode(ProtocolJSON.body(verdict)))
            }
            out.raw("}")
        }
        out.raw("]}")
        return out.bytes
    }

    static func decode(_ bytes: [UInt8]) throws(ChronicleError) -> PushResponse {
        do {
            return try bytes.withUnsafeBytes { buffer in
                Result { () throws(ChronicleError) in try decode(buffer) }
            }.get()
        } catch {
            throw ChronicleError(.malformedPayload, error.message)
        }
    }

    private static func decode(_ buffer: UnsafeRawBufferPointer) throws(ChronicleError) -> PushResponse {
        var scanner = JSONScanner(buffer, subject: "push response")
        var results: [PushResult]?
        var head: Int64?
        try scanner.expect(UInt8(ascii: "{"), "the response object")
        if !scanner.consume(UInt8(ascii: "}")) {
            repeat {
                switch try scanner.key(in: "the response object") {
                case "head":
                    head = try integer(&scanner, "head", WireNumber.seq)
                case "results":
                    try scanner.expect(UInt8(ascii: "["), "the results array")
                    var list: [PushResult] = []
                    if !scanner.consume(UInt8(ascii: "]")) {
                        repeat { list.append(try result(&scanner)) } while try scanner.another(closing: UInt8(ascii: "]"), in: "the results array")
                    }
                    results = list
                default:
                    try scanner.skipValue()
                }
            } while try scanner.another(closing: UInt8(ascii: "}"), in: "the response object")
        }
        guard scanner.isAtEnd() else { throw scanner.error("unexpected \(scanner.describeNext()) after the response object.") }
        guard let results else { throw scanner.error("the response has no 'results'.") }
        guard let head else { throw scanner.error("the response has no 'head'.") }
        return PushResponse(results: results, head: head)
    }

    private static func result(_ scanner: inout JSONScanner) throws(ChronicleError) -> PushResult {
        let start = scanner.offset
        var opID: UUID?, deviceSeq: Int64?, status: String?, serverSeq: Int64?, code: String?, message: String?
        var verdict: Verdict?
        try scanner.expect(UInt8(ascii: "{"), "a result object")
        if !scanner.consume(UInt8(ascii: "}")) {
            repeat {
                let key = try scanner.key(in: "a result object")
                // Optional members may be null, as `Codable` allowed.
                if scanner.peek() == UInt8(ascii: "n"), key != "opID", key != "deviceSeq", key != "status" {
                    _ = try scanner.scalar(key)
                    continue
                }
                switch key {
                case "opID":
                    let at = scanner.offset
                    guard let id = UUID(text: try text(&scanner, key)) else { throw scanner.error("'opID' must be a UUID.", at: at) }
                    opID = id
                case "deviceSeq": deviceSeq = try integer(&scanner, key, WireNumber.opSeq)
                case "status": status = try text(&scanner, key)
                case "serverSeq": serverSeq = try integer(&scanner, key, WireNumber.opSeq)
                case "code": code = try text(&scanner, key)
                case "message": message = try text(&scanner, key)
                case "verdict":
                    let range = try scanner.skipValue()
                    let body = try ProtocolJSON.decode(ProtocolJSON.VerdictBody.self,
                                                       from: Array(UnsafeRawBufferPointer(rebasing: scanner.bytes[range])), what: "verdict")
                    verdict = try ProtocolJSON.verdict(body)
                default:
                    try scanner.skipValue()
                }
            } while try scanner.another(closing: UInt8(ascii: "}"), in: "a result object")
        }
        guard let opID, let deviceSeq, let status else {
            throw scanner.error("a result needs 'opID', 'deviceSeq' and 'status'.", at: start)
        }
        let outcome: PushOutcome
        switch (status, serverSeq) {
        case ("accepted", let seq?): outcome = .accepted(serverSeq: seq)
        case ("duplicate", let seq?): outcome = .duplicate(serverSeq: seq)
        case ("rejected", _): outcome = .rejected(code: code ?? "rejected", message: message ?? "")
        default: throw scanner.error("a result has status '\(status)' without what it needs.", at: start)
        }
        return PushResult(opID: opID, deviceSeq: deviceSeq, outcome: outcome, verdict: verdict)
    }

    private static func integer(_ scanner: inout JSONScanner, _ key: String, _ bound: WireNumber) throws(ChronicleError) -> Int64 {
        let at = scanner.offset
        guard case .integer(let value) = try scanner.scalar("'\(key)'") else { throw scanner.error("'\(key)' must be an integer.", at: at) }
        guard bound.range.contains(value) else {
            throw scanner.error("'\(key)' must be \(bound.range.lowerBound) to \(bound.range.upperBound); it is \(value).", at: at)
        }
        return value
    }

    private static func text(_ scanner: inout JSONScanner, _ key: String) throws(ChronicleError) -> String {
        let at = scanner.offset
        guard case .text(let value) = try scanner.scalar("'\(key)'") else { throw scanner.error("'\(key)' must be a string.", at: at) }
        return value
    }
}
