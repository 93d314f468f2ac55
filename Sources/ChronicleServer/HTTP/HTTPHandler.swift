/// The application side of ``HTTPServer``: turns one complete request into
/// one response.
///
/// `handle` runs on one of libmicrohttpd's pool threads, and that thread
/// serves other connections too, so it must not block. Call `respond` exactly
/// once, either before returning or later from any thread. A request not
/// answered by the time `handle` returns is parked: its connection is
/// suspended, it holds no thread, and it is answered when `respond` is called
/// (this is how long-poll works). Calls after the first are ignored.
///
/// ```swift
/// struct Health: HTTPHandler {
///     func handle(_ request: HTTPRequest, respond: @escaping @Sendable (HTTPResponse) -> Void) {
///         respond(.json(200, Array(#"{"ok":true}"#.utf8)))
///     }
/// }
/// ```
public protocol HTTPHandler: Sendable {
    func handle(_ request: HTTPRequest, respond: @escaping @Sendable (HTTPResponse) -> Void)
}
