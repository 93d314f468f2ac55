import ChronicleCore
import ChronicleStore
import Foundation

/// Listens on one channel (`LISTEN`) on a connection and thread of its own, and hands each
/// notification's payload to `handler`. A lost connection is opened again a second later; the
/// handler then gets nil, since notifications sent meanwhile were lost.
final class PostgresListener: @unchecked Sendable {
    private let conninfo: String
    private let channel: String
    private let handler: @Sendable (String?) -> Void
    private let stopped = Locked(false)
    private let connected = Locked(false)
    private let ended = DispatchSemaphore(value: 0)

    init(conninfo: String, channel: String, handler: @escaping @Sendable (String?) -> Void) {
        self.conninfo = conninfo
        self.channel = channel
        self.handler = handler
    }

    func start() {
        let thread = Thread { [self] in run(); ended.signal() }
        thread.name = "chronicle.postgres.listen"
        thread.start()
    }

    /// Whether the connection is up and listening: notifications sent now reach `handler`.
    var isListening: Bool { connected.withLock { $0 } }

    /// Returns once the thread has ended (within half a second).
    func stop() {
        stopped.withLock { $0 = true }
        ended.wait()
    }

    private func run() {
        var connection: PostgresConnection?
        var first = true
        while !stopped.withLock({ $0 }) {
            if connection == nil {
                do {
                    let made = try PostgresConnection(conninfo)
                    try made.execute("LISTEN \(channel)")
                    connection = made
                    connected.withLock { $0 = true }
                    if !first { handler(nil) }
                    first = false
                } catch {
                    Thread.sleep(forTimeInterval: 1)
                    continue
                }
            }
            do {
                for payload in try connection!.notifications(waitingMilliseconds: 500) { handler(payload) }
            } catch {
                connected.withLock { $0 = false }
                connection = nil
            }
        }
        connected.withLock { $0 = false }
    }
}
