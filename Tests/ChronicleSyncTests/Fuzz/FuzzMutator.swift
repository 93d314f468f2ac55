import Foundation

/// The values hostile input is made of, shared by the request fuzzer (what a client sends) and
/// the answer fuzzer (what a server answers): numbers at and past every integer bound, numbers
/// Swift's `Int64(_:)` refuses, and text that looks like a number.
enum FuzzValues {
    static let numbers: [String] = [
        "0", "1", "-1", "2", "7", "10", "480", "1000", "10000", "10001", "60000", "60001", "65536", "1048576", "16777217",
        "2147483647", "2147483648", "-2147483649", "4294967295", "4294967296",
        "9223372036854775807", "9223372036854775806", "9223372036854775800", "4611686018427387904",
        "-9223372036854775808", "-9223372036854775807", "9223372036854775808", "-9223372036854775809",
        "18446744073709551615", "18446744073709551616", "99999999999999999999999999999",
        "", " ", "+1", "-0", "00000000000000000000001", " 7", "7 ", "1.5", "1e3", "1e308", "1e400", "-1e400",
        "0x10", "NaN", "nan", "inf", "-inf", "Infinity", "٣", "1\u{0}", "1,2", "true", "null", "abc",
    ]

    /// Where integer arithmetic overflows: drawn more often than the rest.
    static let bounds = ["9223372036854775807", "9223372036854775806", "-9223372036854775808", "9223372036854775808", "-1", "0"]

    /// An edge number, or one near a number the input already holds.
    static func number(_ rng: inout FuzzRandom, near: Int64? = nil) -> String {
        if let near, rng.chance(30) {
            let delta = Int64(rng.below(5)) - 2
            return String(near.addingReportingOverflow(delta).partialValue)
        }
        return rng.chance(30) ? rng.pick(bounds) : rng.pick(numbers)
    }

    static let garbage: [String] = [
        "", " ", "\t", "\u{0}", "x\u{0}y", "\u{7F}", "é", "🎉", "\"", "'", "\\", "%00", "%", "%zz", "../..", "null", ",", ";", "=",
        String(repeating: "a", count: 300), String(repeating: "9", count: 40), "\r", "a\rb",
    ]

    static func text(_ rng: inout FuzzRandom) -> String { rng.chance(50) ? number(&rng) : rng.pick(garbage) }
}

/// What a request can name in the server under test: its library, tokens of every kind, blobs,
/// an entity, real pushes. The corpus and the mutator draw from it, so an input is a recipe
/// (seed, index) that gives the same request shape in any run.
struct FuzzTargets: Sendable {
    var library: UUID
    var otherLibrary: UUID
    var deviceToken: String
    var accessToken: String
    var revokedToken: String
    var otherUserToken: String
    var user: String
    var password: String
    var entity: UUID
    var completeBlob: (ref: String, bytes: [UInt8])
    var partialBlob: (ref: String, bytes: [UInt8])
    var segment: [UInt8]
    var segmentJSON: [UInt8]
    var storeFormat: Int64
    var fingerprint: String

    var tokens: [String] {
        [deviceToken, accessToken, revokedToken, otherUserToken, "", "chr_" + String(repeating: "0", count: 64),
         "chra_" + String(repeating: "f", count: 64), deviceToken + "x", String(deviceToken.dropLast()), deviceToken.uppercased()]
    }
}

/// Turns a valid request into a hostile one, reproducibly: the same generator state always makes
/// the same changes. One to four changes per request, each to one part of it.
struct RequestMutator {
    let targets: FuzzTargets

    static let methods = ["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "TRACE", "CONNECT", "get", "Get", "PRI",
                          "G\u{0}ET", "", "GET GET", String(repeating: "M", count: 200), "PROPFIND", "é"]
    static let queryKeys = ["after", "limit", "wait", "format", "schema", "offset", "length", "x", "", "after[]", "AFTER"]
    static let versions = ["HTTP/1.0", "HTTP/2.0", "HTTP/0.9", "", "HTTP/1.1 x", "HTTP/1.10", "http/1.1", "HTTP/9.9", "HTTP/1.1\u{0}"]

    func mutate(_ request: RawRequest, _ rng: inout FuzzRandom) -> RawRequest {
        var request = request
        for _ in 0..<(1 + rng.below(4)) {
            switch rng.below(100) {
            case 0..<6: request.method = rng.pick(Self.methods)
            case 6..<20: mutatePath(&request, &rng)
            case 20..<36: mutateQuery(&request, &rng)
            case 36..<62: mutateHeaders(&request, &rng)
            case 62..<72: mutateAuthorization(&request, &rng)
            case 72..<88: mutateBody(&request, &rng)
            case 88..<96: mutateFraming(&request, &rng)
            default: mutateLine(&request, &rng)
            }
        }
        return request
    }

    private func mutatePath(_ request: inout RawRequest, _ rng: inout FuzzRandom) {
        let library = targets.library.lowercased
        switch rng.below(10) {
        case 0: request.path = request.path.replacingOccurrences(of: library, with: rng.pick([
            targets.otherLibrary.lowercased, library.uppercased(), "null", "", "..", "%00", String(library.dropLast()), library + "0",
            UUID().lowercased, "00000000-0000-0000-0000-000000000000", library.replacingOccurrences(of: "-", with: "")]))
        case 1: request.path = request.path.replacingOccurrences(of: "/", with: "//")
        case 2: request.path += rng.pick(["/", "/x", "/status", "/..", "%00", "\u{0}", "%2F", ";x", "#frag", "?", "%", "/%2e%2e"])
        case 3: request.path = rng.pick(["/", "*", "", "/v1", "/v1/", "/v1/libraries", "/v1/libraries/", "/v2/nothing", "/v1/v1/devices",
                                         "/healthz/", "/HEALTHZ", "http://127.0.0.1/healthz", "/" + String(repeating: "a", count: 70_000)])
        case 4:
            // One character of the path percent-encoded: the routes must see the same path either way.
            guard let index = request.path.indices.dropFirst().element(using: &rng) else { return }
            let char = request.path[index]
            let encoded = char.utf8.map { String(format: "%%%02X", $0) }.joined()
            request.path.replaceSubrange(index...index, with: encoded)
        case 5:
            var parts = request.path.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
            guard parts.count > 1 else { return }
            parts[1 + rng.below(parts.count - 1)] = FuzzValues.text(&rng)
            request.path = parts.joined(separator: "/")
        case 6: request.path = request.path.replacingOccurrences(of: "sha256:", with: rng.pick(["", "SHA256:", "sha512:", "sha256:sha256:"]))
        case 7: request.path += String(repeating: "/x", count: 1 + rng.below(3))
        case 8: request.path = request.path.replacingOccurrences(of: targets.entity.lowercased, with: FuzzValues.text(&rng))
        default: request.path = request.path.uppercased()
        }
    }

    private func mutateQuery(_ request: inout RawRequest, _ rng: inout FuzzRandom) {
        var items = request.query ?? []
        switch rng.below(8) {
        case 0..<3:
            // A numeric parameter set to an edge value (most queries carry only numbers).
            let key = items.isEmpty || rng.chance(30) ? rng.pick(Self.queryKeys) : items[rng.below(items.count)].0
            let value = FuzzValues.number(&rng, near: items.first { $0.0 == key }?.1.flatMap { Int64($0) })
            items.removeAll { $0.0 == key }
            items.append((key, rng.chance(80) ? value.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? value : value))
        case 3: if !items.isEmpty { items.remove(at: rng.below(items.count)) }
        case 4:
            if let item = items.element(using: &rng) { items.append((item.0, FuzzValues.number(&rng))) }
        case 5: items.append((rng.pick(Self.queryKeys), nil))
        case 6: items.append((rng.pick(Self.queryKeys), FuzzValues.text(&rng)))
        default: items = rng.chance(50) ? [] : [("", ""), ("", nil), ("&", "=")]
        }
        request.query = items
    }

    static let headerNames = ["Range", "If-Match", "Accept", "Content-Type", "Chronicle-Blob-Length", "Authorization", "Expect", "Connection",
                              "Transfer-Encoding", "Content-Length", "Host", "Accept-Encoding", "X-Forwarded-For", "Cookie", "Upgrade", ""]

    private func headerValue(_ name: String, _ rng: inout FuzzRandom) -> String {
        switch name {
        case "Range":
            let start = rng.chance(50) ? FuzzValues.number(&rng) : "0"
            let end = rng.chance(20) ? "" : FuzzValues.number(&rng)
            return rng.chance(85) ? "bytes=\(start)-\(end)" : rng.pick(["", "bytes=", "bytes=-5", "bytes=0-1,2-3", "items=0-1", "bytes 0-1",
                                                                          "BYTES=0-0", "bytes=--1", "bytes=0-0-0", " bytes=0-"])
        case "Content-Type":
            return rng.pick(["application/vnd.chronicle.segment", "application/json", "application/octet-stream", "text/plain", "",
                             "application/json; charset=utf-8", "APPLICATION/JSON", "application/vnd.chronicle.segment;;", ";", "multipart/form-data; boundary=x"])
        case "Accept": return rng.pick(["application/json", "application/vnd.chronicle.segment", "*/*", "", "application/json, application/vnd.chronicle.segment"])
        case "Chronicle-Blob-Length", "Content-Length": return FuzzValues.number(&rng)
        case "Expect": return rng.pick(["100-continue", "100-Continue", "200-ok", ""])
        case "Connection": return rng.pick(["close", "keep-alive", "upgrade", "", "Keep-Alive, close"])
        case "Transfer-Encoding": return rng.pick(["chunked", "gzip", "identity", "chunked, chunked", ""])
        case "If-Match": return rng.pick(["\"x\"", "*", "", "\"\(FuzzValues.number(&rng))-1-1\""])
        default: return FuzzValues.text(&rng)
        }
    }

    private func mutateHeaders(_ request: inout RawRequest, _ rng: inout FuzzRandom) {
        switch rng.below(6) {
        case 0..<2:
            let name = rng.pick(Self.headerNames)
            if rng.chance(70) { request.headers.removeAll { $0.0.lowercased() == name.lowercased() } }
            request.headers.append((rng.chance(10) ? name.uppercased() : name, headerValue(name, &rng)))
        case 2:
            // The same header twice, the second with another value.
            guard let header = request.headers.element(using: &rng) else { return }
            request.headers.append((header.0, rng.chance(50) ? header.1 : headerValue(header.0, &rng)))
        case 3: if !request.headers.isEmpty { request.headers.remove(at: rng.below(request.headers.count)) }
        case 4:
            // A control byte or a bare CR inside a value.
            guard !request.headers.isEmpty else { return }
            let index = rng.below(request.headers.count)
            request.headers[index].1 += rng.pick(["\u{0}junk", "\u{0}", "\t", "\r", "\u{1}", " ", "\r\n folded"])
        default:
            request.headers.append((rng.pick(["X-\(rng.below(1000))", "Bad Name", "Bad:Name", "\u{0}", ""]), FuzzValues.text(&rng)))
        }
    }

    private func mutateAuthorization(_ request: inout RawRequest, _ rng: inout FuzzRandom) {
        let token = rng.pick(targets.tokens)
        let value = rng.pick(["Bearer \(token)", "bearer \(token)", "BEARER \(token)", "Bearer\t\(token)", "Bearer  \(token)", "Bearer \(token) ",
                              "Basic YWRhOnBhc3N3b3Jk", "Bearer", "Bearer ", "", "Bearer \(token)\u{0}junk", "Bearer \(token), Bearer x",
                              "Token \(token)", token, "Bearer " + String(repeating: "x", count: 5_000), "Bearer \(token)\u{7F}"])
        request.headers.removeAll { $0.0.lowercased() == "authorization" }
        request.headers.append(("Authorization", value))
        if rng.chance(15) { request.headers.append(("Authorization", "Bearer \(rng.pick(targets.tokens))")) }
    }

    private func mutateBody(_ request: inout RawRequest, _ rng: inout FuzzRandom) {
        var body = request.body
        switch rng.below(7) {
        case 0: body = Array(body.prefix(rng.below(body.count + 1)))
        case 1:
            for _ in 0..<(1 + rng.below(8)) where !body.isEmpty {
                body[rng.below(body.count)] ^= UInt8(1) << UInt8(rng.below(8))
            }
        case 2: body += rng.bytes(1 + rng.below(64))
        case 3: body = rng.bytes(rng.below(512))
        case 4: body = []
        case 5: body += body
        default:
            // A number inside a JSON body replaced with an edge value.
            var text = String(decoding: body, as: UTF8.self)
            if let range = text.range(of: "[0-9]+", options: .regularExpression) { text.replaceSubrange(range, with: FuzzValues.number(&rng)) }
            body = Array(text.utf8)
        }
        request.body = body
    }

    private func mutateFraming(_ request: inout RawRequest, _ rng: inout FuzzRandom) {
        let count = request.body.count
        switch rng.below(5) {
        case 0: request.framing = .lie(rng.chance(50) ? String(count + 1 + rng.below(100)) : String(max(0, count - 1 - rng.below(max(1, count)))))
        case 1: request.framing = .lie(FuzzValues.number(&rng))
        case 2: request.framing = .twoLengths(String(count), rng.chance(50) ? String(count + 1) : String(count))
        case 3: request.framing = .chunked(sizeLine: rng.pick([String(count, radix: 16), "FFFFFFFFFFFFFFFFFFFF", "7fffffffffffffff", "8000000000000000",
                                                                "-1", "0x10", "", "zz", "\(String(count, radix: 16));ext=1", "0"]))
        default: request.framing = .none
        }
    }

    private func mutateLine(_ request: inout RawRequest, _ rng: inout FuzzRandom) {
        switch rng.below(4) {
        case 0: request.version = rng.pick(Self.versions)
        case 1: request.prefix = rng.pick([Array("\r\n".utf8), Array("\r\n\r\n".utf8), [0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xFC, 0x03, 0x03],
                                           [0x00], Array("GET / HTTP/1.1\r\n".utf8)])
        case 2: request.path = " " + request.path
        default: request.method += " "
        }
    }
}

extension Collection {
    /// A random element drawn from the fuzzer's own generator (so that it replays).
    func element(using rng: inout FuzzRandom) -> Element? {
        guard !isEmpty else { return nil }
        return self[index(startIndex, offsetBy: rng.below(count))]
    }
}
