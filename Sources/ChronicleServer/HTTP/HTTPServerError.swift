import ChronicleCore

/// Codes the HTTP layer itself uses: in errors thrown when a server cannot
/// start, and in the `{"error":{"code":…}}` bodies it sends on its own.
extension ChronicleError.Code {
    /// `Configuration.host` is not an IPv4 literal such as "127.0.0.1".
    public static let invalidHost = ChronicleError.Code(rawValue: "invalid_host")
    /// The configured address and port are already bound by another socket.
    public static let addressInUse = ChronicleError.Code(rawValue: "address_in_use")
    /// libmicrohttpd refused to start for another reason (its message is kept).
    public static let serverStartFailed = ChronicleError.Code(rawValue: "server_start_failed")
    /// A `Configuration` value is out of range (thread pool of 0, …).
    public static let invalidServerConfiguration = ChronicleError.Code(rawValue: "invalid_server_configuration")
    /// Sent with 413: the request body is larger than `maxBodyBytes`.
    public static let bodyTooLarge = ChronicleError.Code(rawValue: "body_too_large")
    /// Sent with 503 and `Retry-After` when request bodies in memory would go past
    /// `bufferedBodyBytesMax`.
    public static let serverBusy = ChronicleError.Code(rawValue: "server_busy")
    /// Sent with 503 to requests still parked when the server stops.
    public static let shuttingDown = ChronicleError.Code(rawValue: "shutting_down")
}
