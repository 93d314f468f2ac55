import ChronicleCore
#if canImport(Glibc)
import Glibc
#endif

/// What a handler answers: a status, headers and a body. libmicrohttpd copies
/// it when it is queued and adds `Content-Length` (and `Date`) itself.
///
/// ```swift
/// respond(.json(200, Array(#"{"ok":true}"#.utf8)))
/// respond(.error(404, code: .notFound, message: "No route for GET /v2/pull."))
/// ```
public struct HTTPResponse: Sendable {
    /// The status code; anything outside 200...999 is sent as 500.
    public var status: Int
    /// Extra headers in order. `Content-Length` is always computed by the
    /// server, so a value given here is ignored.
    public var headers: [(String, String)]
    public var body: [UInt8]
    /// Sent instead of `body` when set: bytes libmicrohttpd reads in place, without a copy,
    /// however many responses send them at once (a library's snapshot, tens of MB).
    public var shared: SharedBytes?
    /// The stable code of an error response (`error(_:code:message:)`), for the request log.
    public var errorCode: String?
    /// Its sentence, for what the server records of its own damaged files (`ServerHealth`).
    public var errorMessage: String?
    /// What went wrong inside the server, for its log only: never sent. The answer carries the
    /// request's id, and the log line for that id carries this.
    public var internalDetail: String?

    public init(status: Int, headers: [(String, String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    public init(status: Int, headers: [(String, String)] = [], shared: SharedBytes) {
        self.init(status: status, headers: headers)
        self.shared = shared
    }

    /// The length of what is sent.
    public var bodyCount: Int { shared?.count ?? body.count }

    /// A response with `Content-Type: application/json`; `body` must already
    /// be JSON.
    public static func json(_ status: Int, _ body: [UInt8]) -> HTTPResponse {
        HTTPResponse(status: status, headers: [("Content-Type", "application/json")], body: body)
    }

    /// The API's one error shape, `{"error":{"code":…,"message":…}}`, with
    /// both strings JSON-escaped. The server adds `"requestId"` as it sends it
    /// (`identified(by:)`).
    public static func error(_ status: Int, code: ProtocolError.Code, message: String) -> HTTPResponse {
        error(status, code: code.rawValue, message: message)
    }

    /// `error(_:code:message:)` with a code as text (an HTTP-level refusal of the head, or a
    /// code read back from a refusal).
    public static func error(_ status: Int, code: String, message: String) -> HTTPResponse {
        var response = HTTPResponse.json(status, errorBody(code: code, message: message, requestID: nil))
        response.errorCode = code
        response.errorMessage = message
        return response
    }

    /// A 500 for an error nothing expected: a sentence that names no internal type or file,
    /// and the error itself kept for the log under the request's id.
    public static func unexpected(_ error: any Error) -> HTTPResponse {
        var response = HTTPResponse.error(500, code: .serverError, message: "The server met an error it did not expect; nothing more is said here. Its operator finds it in the server's log under this request's id.")
        response.internalDetail = String(describing: error)
        return response
    }

    /// This response as sent for the request `id`: the id in `Chronicle-Request-Id`, and in the
    /// body of an error answer, so that a person who reports it names the server's log line.
    func identified(by id: String) -> HTTPResponse {
        var response = self
        response.headers.append((Self.requestIDHeader, id))
        if let code = errorCode, let message = errorMessage, shared == nil {
            response.body = Self.errorBody(code: code, message: message, requestID: id)
        }
        return response
    }

    /// The header that names a request in the server's log.
    public static let requestIDHeader = "Chronicle-Request-Id"

    private static func errorBody(code: String, message: String, requestID: String?) -> [UInt8] {
        var text = #"{"error":{"code":"# + CanonicalJSON.quote(code) + #","message":"# + CanonicalJSON.quote(message)
        if let requestID { text += #","requestId":"# + CanonicalJSON.quote(requestID) }
        return Array((text + "}}").utf8)
    }

    /// The error shape for a `ChronicleError`: its code and message.
    public static func error(_ status: Int, _ error: ChronicleError) -> HTTPResponse {
        .error(status, code: error.code.rawValue, message: error.message)
    }
}

/// Bytes in one allocation that never moves or changes after it is filled: every response
/// sending them reads them in place (libmicrohttpd holds a reference until it is done with
/// the response), and the last one done frees them.
public final class SharedBytes: @unchecked Sendable {
    public let count: Int
    let base: UnsafeMutableRawPointer

    /// Room for `count` bytes, which the caller fills through `unsafeStorage` before sharing them.
    /// Whether `base` is a read-only mapping of a file (`init(mapping:)`), unmapped at the end.
    private let mapped: Bool

    public init(count: Int) {
        self.count = count
        base = UnsafeMutableRawPointer.allocate(byteCount: max(1, count), alignment: 16)
        mapped = false
    }

    /// The bytes of the file at `path`, mapped read-only (a start image, hundreds of MB: the
    /// page cache holds them, not this process). The file must not change while they are shared;
    /// replacing it by a rename is safe. Nil if it cannot be opened or mapped.
    public init?(mapping path: String) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var status = stat()
        guard fstat(fd, &status) == 0, status.st_size > 0,
              let address = mmap(nil, Int(status.st_size), PROT_READ, MAP_PRIVATE, fd, 0), address != MAP_FAILED else { return nil }
        count = Int(status.st_size)
        base = address
        mapped = true
    }

    public convenience init(_ bytes: [UInt8]) {
        self.init(count: bytes.count)
        bytes.withUnsafeBytes { if let source = $0.baseAddress { base.copyMemory(from: source, byteCount: bytes.count) } }
    }

    /// The storage, for filling it once, before the bytes are shared.
    public var unsafeStorage: UnsafeMutableRawBufferPointer { UnsafeMutableRawBufferPointer(start: base, count: count) }

    /// A copy as an array (in-process callers).
    public var bytes: [UInt8] { Array(UnsafeRawBufferPointer(start: base, count: count)) }

    deinit {
        if mapped { munmap(base, count) } else { base.deallocate() }
    }
}
