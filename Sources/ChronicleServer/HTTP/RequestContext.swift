import ChronicleCore
import CMicroHTTPD
import ChronicleStore

/// One request's state from its first access-handler call to libmicrohttpd's
/// completion notice. MHD keeps a retained pointer to it in the request's
/// `con_cls`; the respond closure handed to the handler keeps another, so a
/// late `respond` never touches freed memory.
///
/// The phase machine exists because `respond` may run on any thread at any
/// moment relative to the worker thread that suspends the connection:
///
/// ```
/// receiving ─▶ handling ─┬─ respond ─▶ answeredWhileHandling ─▶ queued
///                        └─ returns ─▶ suspending ─┬─ respond ─▶ answeredWhileSuspending ─┐
///                                                  └─ suspended ─ respond ─▶ resuming ◀───┘
/// resuming ─ next access call ─▶ queued;     anything ─ completion ─▶ finished
/// ```
///
/// Exactly one party calls `MHD_resume_connection`, and only after
/// `MHD_suspend_connection` has returned: the worker when `respond` arrived
/// while it was suspending, otherwise the thread that calls `respond`.
final class RequestContext: Sendable {
    enum Phase: Sendable {
        case receiving
        case handling
        case answeredWhileHandling(HTTPResponse)
        case suspending
        case answeredWhileSuspending(HTTPResponse)
        case suspended
        case resuming(HTTPResponse)
        case queued
        case finished
    }

    struct State: Sendable {
        var phase = Phase.receiving
        var body: [UInt8] = []
        var bodyTooLarge = false
        /// The body was dropped: bodies in memory would have gone past `bufferedBodyBytesMax`.
        var bodyRefusedBusy = false
        /// What this request holds of the server's body budget (`ServerCore.bufferedBodyBytes`).
        var heldBodyBytes = 0

        /// Lets go of what this request holds of the body budget; returns it, for the server to give back.
        mutating func takeHeldBodyBytes() -> Int {
            defer { heldBodyBytes = 0 }
            return heldBodyBytes
        }
        var requestBytes = 0
        var status = 0
        var responseBytes = 0
        var errorCode: String?
        var internalDetail: String?
    }

    let core: ServerCore
    let connection: MHDConnection
    let method: String
    let path: String
    let remoteAddress: String?
    /// The raw URI held `%00`, which the decoded `path` no longer shows (`chronicleURILog`).
    let nulInURI: Bool
    /// Names the request in the answer (`Chronicle-Request-Id`) and in the server's log.
    let id: String
    let started = ContinuousClock.now
    let state = Locked(State())

    init(core: ServerCore, connection: MHDConnection, method: String, path: String, remoteAddress: String?, nulInURI: Bool = false) {
        self.core = core
        self.connection = connection
        self.method = method
        self.path = path
        self.remoteAddress = remoteAddress
        self.nulInURI = nulInURI
        self.id = core.nextRequestID()
        core.liveRequests.add(1, ordering: .relaxed)
    }

    deinit {
        core.liveRequests.subtract(1, ordering: .relaxed)
    }

    /// The handler's answer, from any thread. Only the first call counts.
    func respond(_ response: HTTPResponse) {
        let mustResume = state.withLock { state -> Bool in
            switch state.phase {
            case .handling:
                state.phase = .answeredWhileHandling(response)
            case .suspending:
                state.phase = .answeredWhileSuspending(response)
            case .suspended:
                state.phase = .resuming(response)
                return true
            case .receiving, .answeredWhileHandling, .answeredWhileSuspending, .resuming, .queued, .finished:
                break // already answered (or never handed out): later calls are ignored
            }
            return false
        }
        if mustResume { resume() }
    }

    /// Called once the connection is known to be suspended and the response is
    /// stored: wakes the worker, whose next access-handler call queues it.
    func resume() {
        // The connection stays valid while suspended: MHD frees it only after
        // it is resumed and closed, and stop() resumes everything first.
        MHD_resume_connection(connection.pointer)
        core.didResume(self)
    }

    /// The log entry for the completion notice; later `respond` calls are ignored.
    func finish(normally: Bool) -> RequestLogEntry {
        let (status, requestBytes, responseBytes, errorCode, detail) = state.withLock { state in
            state.phase = .finished
            state.body = []
            return (state.status, state.requestBytes, state.responseBytes, state.errorCode, state.internalDetail)
        }
        let elapsed = started.duration(to: .now).components
        let milliseconds = Double(elapsed.seconds) * 1_000 + Double(elapsed.attoseconds) / 1e15
        return RequestLogEntry(method: method, path: path, status: status, durationMilliseconds: milliseconds,
                               requestBytes: requestBytes, responseBytes: responseBytes,
                               remoteAddress: remoteAddress, completedNormally: normally, errorCode: errorCode,
                               requestID: id, internalDetail: detail)
    }
}

/// An MHD connection handle. MHD documents `MHD_resume_connection` as safe
/// from any thread; every other call on it happens on the worker thread that
/// owns the connection, inside MHD's own callbacks.
struct MHDConnection: @unchecked Sendable {
    let pointer: OpaquePointer
}
