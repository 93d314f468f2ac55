import Foundation

/// One HTTP/1.1 request as bytes on the wire, so that anything a client can send can be built:
/// a method libmicrohttpd has never seen, control bytes in the path, two `Content-Length`s, a
/// `Content-Length` that lies, a chunk size past any integer.
struct RawRequest: Sendable {
    /// How the body is announced. Anything but `.exact` can leave the server and the client
    /// disagreeing on where the next request starts, so such requests go alone on a connection.
    enum Framing: Sendable, Equatable {
        case exact
        case none
        case lie(String)
        case twoLengths(String, String)
        case chunked(sizeLine: String)
    }

    var method: String
    var path: String
    /// Items as written, `key=value` joined with `&`; nil: no `?` at all.
    var query: [(String, String?)]?
    var version = "HTTP/1.1"
    var headers: [(String, String)] = []
    var body: [UInt8] = []
    var framing = Framing.exact
    /// Bytes sent before the request line (a TLS hello, stray line ends).
    var prefix: [UInt8] = []

    var target: String {
        guard let query else { return path }
        return path + "?" + query.map { key, value in value.map { "\(key)=\($0)" } ?? key }.joined(separator: "&")
    }

    func bytes() -> [UInt8] {
        var head = "\(method) \(target)\(version.isEmpty ? "" : " " + version)\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        var payload = body
        switch framing {
        case .exact: if !body.isEmpty || method == "POST" || method == "PUT" { head += "Content-Length: \(body.count)\r\n" }
        case .none: break
        case .lie(let length): head += "Content-Length: \(length)\r\n"
        case .twoLengths(let a, let b): head += "Content-Length: \(a)\r\nContent-Length: \(b)\r\n"
        case .chunked(let sizeLine):
            head += "Transfer-Encoding: chunked\r\n"
            payload = Array("\(sizeLine)\r\n".utf8) + body + Array("\r\n0\r\n\r\n".utf8)
        }
        return prefix + Array((head + "\r\n").utf8) + payload
    }

    func header(_ name: String) -> [String] {
        headers.filter { $0.0.lowercased() == name.lowercased() }.map(\.1)
    }

    /// The value the server reads for a query parameter: libmicrohttpd decodes `%XX` and `+`,
    /// and the last occurrence of a key wins.
    func queryValue(_ key: String) -> String? {
        var found: String?
        for (name, value) in query ?? [] where Self.decoded(name) == key { found = Self.decoded(value ?? "") }
        return found
    }

    /// The path as the routes see it (libmicrohttpd percent-decodes it).
    var decodedPath: String { Self.decoded(path) }

    static func decoded(_ text: String) -> String {
        text.replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? text
    }

    /// Whether it can share a keep-alive connection with others, pipelined: the server and this
    /// client then agree on where it ends, and it asks nothing that changes the connection.
    var isWellFramed: Bool {
        guard framing == .exact, prefix.isEmpty, version == "HTTP/1.1",
              ["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE"].contains(method) else { return false }
        func clean(_ text: String, allowSpace: Bool) -> Bool {
            text.unicodeScalars.allSatisfy { $0.value >= 0x21 && $0.value < 0x7F || (allowSpace && ($0 == " " || $0 == "\t")) }
        }
        guard clean(target, allowSpace: false), !target.isEmpty, target.count < 4_096 else { return false }
        let connectionHeaders: Set<String> = ["content-length", "transfer-encoding", "expect", "connection", "upgrade"]
        return headers.allSatisfy { name, value in
            !connectionHeaders.contains(name.lowercased()) && !name.isEmpty && clean(name, allowSpace: false)
                && clean(value, allowSpace: true) && value.count < 4_096
        } && headers.count < 40
    }

    /// The request as one line a person can read and paste into a Swift string literal.
    var printable: String {
        let all = bytes()
        let text = all.prefix(700).map { byte -> String in
            switch byte {
            case 0x0D: "\\r"
            case 0x0A: "\\n"
            case 0x5C: "\\\\"
            case 0x22: "\\\""
            case 0x20..<0x7F: String(UnicodeScalar(byte))
            default: "\\u{\(String(byte, radix: 16))}"
            }
        }.joined()
        let more = all.count > 700 ? " …(\(all.count) bytes in all)" : ""
        return "\"\(text)\"\(more)"
    }
}
