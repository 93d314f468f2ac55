/// One complete HTTP request as the server hands it to an ``HTTPHandler``:
/// the head parsed by libmicrohttpd and the whole body, already bounded by
/// ``HTTPServer/Configuration/maxBodyBytes``.
///
/// ```swift
/// if request.method == "GET", request.path == "/v1/health" { … }
/// let wait = request.query["waitMilliseconds"].flatMap(Int.init) ?? 0
/// let token = request.headers["authorization"]
/// ```
public struct HTTPRequest: Sendable {
    /// The request method as sent ("GET", "POST", …).
    public var method: String
    /// The path without the query string, as libmicrohttpd delivers it: it
    /// percent-decodes the whole path, so `%2F` arrives as a real "/" and
    /// `%20` as a space. Nothing further is applied here.
    public var path: String
    /// Query arguments, decoded by libmicrohttpd (`%XX` and `+` for space).
    /// A key given without a value maps to "". When a key repeats, the last
    /// occurrence wins.
    public var query: [String: String]
    /// Request headers with lowercased names. Repeated headers are joined
    /// with ", " in arrival order, as RFC 9110 §5.3 allows.
    public var headers: [String: String]
    /// The complete request body (empty when there was none).
    public var body: [UInt8]
    /// The peer's IP address ("127.0.0.1"), when the socket reports one.
    public var remoteAddress: String?

    public init(method: String, path: String, query: [String: String] = [:], headers: [String: String] = [:],
                body: [UInt8] = [], remoteAddress: String? = nil) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
        self.remoteAddress = remoteAddress
    }

    /// The value of a header, looked up case-insensitively.
    public func header(_ name: String) -> String? {
        headers[name.lowercased()]
    }
}
