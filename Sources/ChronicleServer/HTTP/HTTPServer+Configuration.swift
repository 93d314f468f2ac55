import ChronicleCore

extension HTTPServer {
    /// Where and how the server listens, and the limits it enforces. Every
    /// limit is explicit; the defaults suit one `chronicle serve` process.
    ///
    /// ```swift
    /// var configuration = HTTPServer.Configuration()
    /// configuration.port = 8080
    /// configuration.maxBodyBytes = 4 << 20
    /// ```
    public struct Configuration: Sendable {
        /// An IPv4 literal; the server binds to this address only.
        public var host = "127.0.0.1"
        /// 0 lets the kernel pick a free port; read it back from ``HTTPServer/port``.
        public var port: UInt16 = 0
        /// libmicrohttpd worker threads. Handlers run on them, so handlers must
        /// not block; parked (long-poll) requests hold no thread.
        public var threadPoolSize = 8
        /// Open connections at most, parked ones included; past it new
        /// connections are refused.
        public var connectionLimit = 1_024
        /// Idle connections are closed after this long (0: never). Parked
        /// requests do not count as idle.
        public var connectionTimeoutSeconds = 120
        /// Request bodies larger than this are answered 413 `body_too_large`
        /// without reaching the handler. A declared body at most 4 MiB over
        /// it is read and dropped before the answer, so that a client sending
        /// it without waiting reads the 413 rather than a reset connection;
        /// one further over, or announced with `Expect: 100-continue`, is
        /// refused as soon as its head arrives.
        public var maxBodyBytes = 16 << 20
        /// Request bodies held in memory at once, across every connection, counted as
        /// their bytes arrive and given back when each request completes. A body that
        /// would go past it is read and dropped, and answered 503 `server_busy` with
        /// `Retry-After: 1` (devices keep what they sent and try again): without it,
        /// `connectionLimit` uploads of `maxBodyBytes` each would need 16 GiB.
        public var bufferedBodyBytesMax = 256 << 20
        /// libmicrohttpd's per-connection memory pool: it holds the request
        /// line, the headers and the read buffer, so it is also the bound on
        /// the request head (past it MHD answers 414 or 431 itself).
        public var connectionMemoryLimitBytes = 64 << 10
        /// How long ``HTTPServer/stop()`` waits for the 503s sent to parked
        /// requests to go out before it closes every connection.
        public var shutdownGraceMilliseconds = 2_000

        public init() {}

        func validate() throws(ChronicleError) {
            func check(_ ok: Bool, _ message: String) throws(ChronicleError) {
                if !ok { throw ChronicleError(.invalidServerConfiguration, message) }
            }
            try check((1...1_024).contains(threadPoolSize), "threadPoolSize must be 1...1024, not \(threadPoolSize).")
            try check((1...1_000_000).contains(connectionLimit),
                      "connectionLimit must be 1...1000000, not \(connectionLimit).")
            try check((0...86_400).contains(connectionTimeoutSeconds),
                      "connectionTimeoutSeconds must be 0...86400, not \(connectionTimeoutSeconds).")
            try check(maxBodyBytes >= 0, "maxBodyBytes must not be negative, not \(maxBodyBytes).")
            try check(bufferedBodyBytesMax >= maxBodyBytes,
                      "bufferedBodyBytesMax (\(bufferedBodyBytesMax)) must be at least maxBodyBytes (\(maxBodyBytes)), or a body at the cap could never be taken.")
            try check((4_096...(64 << 20)).contains(connectionMemoryLimitBytes),
                      "connectionMemoryLimitBytes must be 4096...\(64 << 20), not \(connectionMemoryLimitBytes).")
            try check((0...60_000).contains(shutdownGraceMilliseconds),
                      "shutdownGraceMilliseconds must be 0...60000, not \(shutdownGraceMilliseconds).")
        }
    }
}
