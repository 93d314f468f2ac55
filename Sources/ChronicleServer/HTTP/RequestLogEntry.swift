/// What ``HTTPServer`` reports through its `onCompleted` hook once a request
/// is over (answered and sent, or abandoned), for the caller to log and count.
public struct RequestLogEntry: Sendable {
    public var method: String
    public var path: String
    /// The status sent, or 0 when no response was queued (the client went
    /// away or the connection timed out before the request was answered).
    public var status: Int
    /// From the end of the request head to the completion notice (after the
    /// response was handed to the socket). Includes any time parked.
    public var durationMilliseconds: Double
    /// Body bytes received, including any discarded past the body cap.
    public var requestBytes: Int
    /// Response body bytes (headers not counted).
    public var responseBytes: Int
    public var remoteAddress: String?
    /// False when libmicrohttpd ended the request abnormally: the client
    /// closed the connection, a timeout, a socket error, or server shutdown.
    public var completedNormally: Bool
    /// The stable code of an error answer (`HTTPResponse.errorCode`), nil for others.
    public var errorCode: String?
    /// The id the answer carried (`Chronicle-Request-Id`, and `requestId` in an error's body).
    public var requestID: String
    /// What went wrong inside the server, which the answer does not say (`HTTPResponse.internalDetail`).
    public var internalDetail: String?

    public init(method: String, path: String, status: Int, durationMilliseconds: Double, requestBytes: Int,
                responseBytes: Int, remoteAddress: String?, completedNormally: Bool, errorCode: String? = nil,
                requestID: String = "", internalDetail: String? = nil) {
        self.errorCode = errorCode
        self.requestID = requestID
        self.internalDetail = internalDetail
        self.method = method
        self.path = path
        self.status = status
        self.durationMilliseconds = durationMilliseconds
        self.requestBytes = requestBytes
        self.responseBytes = responseBytes
        self.remoteAddress = remoteAddress
        self.completedNormally = completedNormally
    }
}
