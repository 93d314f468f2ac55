import ChronicleCore
import ChronicleServer
import ChronicleStore
import Foundation

/// Wraps a handler and answers a fraction of `/v1/` requests with 503, for fault
/// tests against a real server process (`chronicle-test-server --fault-503-rate`), wrapped around
/// the server's routes through `SyncServer`'s `wrapping` seam.
/// Half of the failures happen before the request is handled (nothing done) and half
/// after (the work is committed but the answer is lost): clients must cope with both.
public struct FaultInjectingHandler: HTTPHandler {
    public let inner: any HTTPHandler
    public let rate: Double
    private let random: @Sendable () -> Double

    public init(wrapping inner: any HTTPHandler, rate: Double, random: @escaping @Sendable () -> Double = SystemRandom.unit) {
        self.inner = inner
        self.rate = rate
        self.random = random
    }

    public func handle(_ request: HTTPRequest, respond: @escaping @Sendable (HTTPResponse) -> Void) {
        guard request.path.hasPrefix("/v1/libraries/"), random() < rate else { return inner.handle(request, respond: respond) }
        var response = HTTPResponse.error(503, code: .unavailable, message: "Injected fault: try again.")
        response.headers.append(("Retry-After", "0"))
        let unavailable = response
        if random() < 0.5 { return respond(unavailable) }
        inner.handle(request) { _ in respond(unavailable) }
    }
}
