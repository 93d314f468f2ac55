import ChronicleCore

/// What a handler answers: a status, headers and a body. libmicrohttpd copies
/// it when it is queued and adds `Content-Length` (and `Date`) itself.
///
/// ```swift
/// respond(.json(200, Array(#"{"ok":true}"#.utf8)))
/// respond(.error(404, code: "not_found", message: "No route for GET /v2/pull."))
/// ```
public struct HTTPResponse: Sendable {
    /// The status code; anything outside 200...999 is sent as 500.
    public var status: Int
    /// Extra headers in order. `Content-Length` is always computed by the
    /// server, so a value given here is ignored.
    public var headers: [(String, String)]
    public var body: [UInt8]

    public init(status: Int, headers: [(String, String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A response with `Content-Type: application/json`; `body` must already
    /// be JSON.
    public static func json(_ status: Int, _ body: [UInt8]) -> HTTPResponse {
        HTTPResponse(status: status, headers: [("Content-Type", "application/json")], body: body)
    }

    /// The API's one error shape, `{"error":{"code":…,"message":…}}`, with
    /// both strings JSON-escaped.
    public static func error(_ status: Int, code: String, message: String) -> HTTPResponse {
        let text = #"{"error":{"code":"# + CanonicalJSON.quote(code)
            + #","message":"# + CanonicalJSON.quote(message) + "}}"
        return .json(status, Array(text.utf8))
    }

    /// The error shape for a ``ChronicleError``: its code and message.
    public static func error(_ status: Int, _ error: ChronicleError) -> HTTPResponse {
        .error(status, code: error.code.rawValue, message: error.message)
    }
}
