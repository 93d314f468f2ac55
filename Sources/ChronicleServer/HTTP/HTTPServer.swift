import ChronicleCore
import Dispatch
import CMicroHTTPD
import ChronicleStore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An HTTP/1.1 server on libmicrohttpd: MHD's own pool of polling threads
/// (epoll on Linux) parses requests and calls the ``HTTPHandler``; requests
/// the handler does not answer at once are parked by suspending their
/// connection, so a long-poll holds no thread.
///
/// ```swift
/// var configuration = HTTPServer.Configuration()
/// configuration.port = 8080
/// let server = try HTTPServer(configuration: configuration, handler: router) { entry in
///     log.info("\(entry.method) \(entry.path) \(entry.status) \(entry.durationMilliseconds) ms")
/// }
/// defer { server.stop() }
/// ```
///
/// Threading: the handler and `onCompleted` run on MHD's worker threads and
/// must not block them. `stop()` must not be called from either (it waits
/// for those threads to finish).
///
/// See <https://www.gnu.org/software/libmicrohttpd/manual/libmicrohttpd.html>.
public final class HTTPServer: Sendable {
    /// The port the listen socket is bound to (the kernel's pick when the
    /// configuration asked for 0).
    public let port: UInt16

    private let core: ServerCore
    private let configuration: Configuration
    /// The running daemon; nil once stopped.
    private let daemon: Locked<OpaquePointer?>
    /// Sweeps `core.bodyWaits` and `core.headWaits` four times a second while the daemon runs.
    // Dispatch sources are safe to use from any thread; Dispatch does not mark them Sendable.
    nonisolated(unsafe) private let sweeper: DispatchSourceTimer

    /// Starts listening on `configuration.host:configuration.port`.
    ///
    /// - Throws: `ChronicleError` with `invalid_host` when the host is not an
    ///   IPv4 literal, `address_in_use` when the port is taken,
    ///   `invalid_server_configuration` for out-of-range limits, and
    ///   `server_start_failed` (with libmicrohttpd's reason) otherwise.
    public init(configuration: Configuration, handler: any HTTPHandler,
                onCompleted: (@Sendable (RequestLogEntry) -> Void)? = nil) throws {
        try configuration.validate()
        var address = try SocketAddress.ipv4(configuration.host, port: configuration.port)
        let core = ServerCore(handler: handler, maxBodyBytes: configuration.maxBodyBytes,
                              bufferedBodyBytesMax: configuration.bufferedBodyBytesMax, onCompleted: onCompleted)

        // One retain for the daemon's lifetime, shared by the three callbacks;
        // released in stop() once MHD_stop_daemon has returned.
        let closure = Unmanaged.passRetained(core).toOpaque()
        let started = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bindAddress in
                chronicle_mhd_start_daemon(chronicle_mhd_default_flags(), configuration.port, bindAddress,
                                           chronicleAccessHandler, closure,
                                           chronicleRequestCompleted, closure,
                                           chronicleMHDLog, closure,
                                           chronicleURILog, closure,
                                           chronicleConnectionNotice, closure,
                                           UInt32(configuration.threadPoolSize),
                                           UInt32(configuration.connectionLimit),
                                           UInt32(configuration.connectionTimeoutSeconds),
                                           configuration.connectionMemoryLimitBytes)
            }
        }
        guard let started else {
            Unmanaged<ServerCore>.fromOpaque(closure).release()
            throw Self.startError(configuration, messages: core.loggedMessages())
        }
        PlainPort.deferAccept(listenSocket: chronicle_mhd_listen_fd(started))
        let sweeper = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "chronicle.http.body-waits"))
        sweeper.schedule(deadline: .now() + .milliseconds(250), repeating: .milliseconds(250))
        sweeper.setEventHandler { [bodyWaits = core.bodyWaits, headWaits = core.headWaits] in
            bodyWaits.sweep()
            headWaits.sweep()
        }
        sweeper.resume()
        self.sweeper = sweeper
        self.core = core
        self.configuration = configuration
        self.port = chronicle_mhd_bind_port(started)
        self.daemon = Locked(started)
    }

    deinit {
        stop()
    }

    /// Stops the server: stops accepting, answers every parked request 503
    /// `shutting_down` (waiting up to `shutdownGraceMilliseconds` for those
    /// answers to go out), then closes all connections and joins MHD's
    /// threads. Idempotent; concurrent calls return once the server is down.
    public func stop() {
        daemon.withLock { daemon in
            guard let running = daemon else { return }
            daemon = nil

            // New connections are refused from here on; the listen socket is
            // ours to close once MHD has stopped.
            let listenSocket = MHD_quiesce_daemon(running)
            core.beginShutdown()

            // MHD_stop_daemon must never meet a suspended connection. Every parked
            // request was just answered, so at worst a resume is in flight on
            // another thread for a moment.
            while !core.parkedState().allResumed { usleep(1_000) }
            let deadline = ContinuousClock.now.advanced(by: .milliseconds(configuration.shutdownGraceMilliseconds))
            while !core.parkedState().drained, ContinuousClock.now < deadline { usleep(1_000) }

            sweeper.cancel()
            MHD_stop_daemon(running)
            if listenSocket >= 0 { _ = close(listenSocket) }
            Unmanaged.passUnretained(core).release()
        }
    }

    /// Requests whose state is still alive: 0 once every request is complete
    /// and no handler still holds a `respond` closure.
    var liveRequestCount: Int { core.liveRequests.load(ordering: .relaxed) }

    /// Bytes of request bodies held now against `bufferedBodyBytesMax`: 0 once every request is complete.
    var bufferedBodyByteCount: Int { core.bufferedBodyBytes.load(ordering: .relaxed) }

    private static func startError(_ configuration: Configuration, messages: [String]) -> ChronicleError {
        let endpoint = "\(configuration.host):\(configuration.port)"
        let reason = messages.isEmpty ? "" : " (libmicrohttpd: \(messages.joined(separator: "; ")))"
        if messages.contains(where: { $0.contains("Address already in use") }) {
            return ChronicleError(.addressInUse, "Cannot listen on \(endpoint): the address is already in use\(reason).")
        }
        return ChronicleError(.serverStartFailed, "Cannot listen on \(endpoint)\(reason).")
    }
}
