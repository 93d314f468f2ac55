import ChronicleCore
import CMicroHTTPD
import ChronicleStore
import Synchronization

/// What libmicrohttpd's callbacks reach through their closure pointer: the
/// handler, the limits, and the registry of parked requests that `stop()`
/// must answer before the daemon may stop.
///
/// Every method taking an `MHDConnection` runs on the MHD worker thread that
/// owns that connection, inside an MHD callback.
final class ServerCore: Sendable {
    let handler: any HTTPHandler
    let onCompleted: (@Sendable (RequestLogEntry) -> Void)?
    let maxBodyBytes: Int
    let bufferedBodyBytesMax: Int
    /// Bytes of request bodies held now, across every connection (see `reserveBody`).
    let bufferedBodyBytes = Atomic<Int>(0)

    /// Parked requests, from just before their connection is suspended until
    /// MHD reports them complete. `resumed` turns true once
    /// `MHD_resume_connection` has returned for them.
    private struct Registry {
        var stopping = false
        var parked: [ObjectIdentifier: (context: RequestContext, resumed: Bool)] = [:]
    }

    private let registry = Locked(Registry())
    /// The start of every request id this server gives: random, so that ids from two servers
    /// (or two runs) sharing one log never meet.
    private let requestIDPrefix = Hex.encode(Secrets.randomBytes(6))
    private let requestCount = Atomic<UInt64>(0)

    /// A new request's id: this server's prefix and the request's number.
    func nextRequestID() -> String {
        let number = requestCount.add(1, ordering: .relaxed).newValue
        return requestIDPrefix + "-" + String(number, radix: 16)
    }

    /// Requests whose body is still awaited, watched for a client that half-closed (`EndOfStreamWatch`).
    let bodyWaits = EndOfStreamWatch<ObjectIdentifier>(sweepsMin: 1)
    /// Connections (by socket) waiting for their next request's head, watched the same way.
    let headWaits = EndOfStreamWatch<Int32>(sweepsMin: 2)

    /// Watches `context`'s socket while its body is awaited.
    private func awaitBody(_ context: RequestContext) {
        bodyWaits.watch(ObjectIdentifier(context), socket: chronicle_mhd_connection_fd(context.connection.pointer))
    }

    /// RequestContexts alive (between their first access-handler call and
    /// the release of the last reference): lets tests prove retains balance.
    let liveRequests = Atomic<Int>(0)
    /// The last few messages libmicrohttpd logged: why a start failed.
    private let messages = Locked<[String]>([])
    private static let messageCountMax = 16
    private static let reserveBytesMax: UInt64 = 256 << 10
    /// How far past the cap a declared body is still read (and dropped)
    /// before the 413, rather than answered at once; see ``begin(_:)``.
    static let drainBytesMax: UInt64 = 4 << 20

    init(handler: any HTTPHandler, maxBodyBytes: Int, bufferedBodyBytesMax: Int = .max,
         onCompleted: (@Sendable (RequestLogEntry) -> Void)?) {
        self.handler = handler
        self.maxBodyBytes = maxBodyBytes
        self.bufferedBodyBytesMax = bufferedBodyBytesMax
        self.onCompleted = onCompleted
    }

    // MARK: - Request lifecycle

    /// The first access-handler call: the head has arrived, the body has not.
    ///
    /// A declared body over the cap is refused now, before it is sent, when
    /// the client asked `Expect: 100-continue` (it never sends the body) or
    /// when the body is far over the cap (more than ``drainBytesMax`` past
    /// it): answering closes the connection, and a client still sending may
    /// see the connection reset instead of the 413. A body only a little over
    /// the cap is read and dropped first, so that a client which sends its
    /// body without waiting (as URLSession does for small bodies) reads the
    /// 413 rather than a broken pipe.
    func begin(_ context: RequestContext) -> MHD_Result {
        // A head the API never sends, refused before its body is read; the connection is closed
        // after the answer, since where such a body ends is not known.
        if let refusal = RequestHead(of: context.connection).refusal(nulInURI: context.nulInURI) {
            context.state.withLock { $0.phase = .queued }
            var response = HTTPResponse.error(refusal.status, code: refusal.code, message: refusal.message)
            response.headers.append(("Connection", "close"))
            return queue(response, for: context)
        }
        guard let raw = MHD_lookup_connection_value(context.connection.pointer, .HEADER_KIND, "Content-Length"),
              let declared = UInt64(String(cString: raw)) else { return .YES }
        if declared > UInt64(maxBodyBytes) {
            let expectsContinue = MHD_lookup_connection_value(context.connection.pointer, .HEADER_KIND, "Expect")
                .map { String(cString: $0).lowercased() == "100-continue" } ?? false
            if expectsContinue || declared - UInt64(maxBodyBytes) > Self.drainBytesMax {
                context.state.withLock { $0.phase = .queued }
                return queue(bodyTooLarge(), for: context)
            }
            awaitBody(context)   // read and dropped: awaited all the same
            context.state.withLock { $0.bodyTooLarge = true }
            return .YES
        }
        if declared > 0 { awaitBody(context) }
        // Trust the declared length only so far: a client that claims 16 MiB
        // and sends nothing should not make us allocate it. The room is taken
        // from the body budget; where it does not fit, the chunks decide.
        let room = Int(min(declared, Self.reserveBytesMax))
        if reserveBody(room) {
            context.state.withLock { state in
                state.heldBodyBytes = room
                state.body.reserveCapacity(room)
            }
        }
        return .YES
    }

    /// A chunk of the body. Past the cap the body is dropped and only counted,
    /// and so it is where bodies in memory would go past the budget; the 413
    /// (or 503) goes out once the request is complete.
    func receive(_ chunk: UnsafeRawBufferPointer, for context: RequestContext) {
        let maxBodyBytes = maxBodyBytes
        let released = context.state.withLock { state -> Int in
            state.requestBytes += chunk.count
            guard case .receiving = state.phase, !state.bodyTooLarge, !state.bodyRefusedBusy else { return 0 }
            let needed = state.body.count + chunk.count - state.heldBodyBytes
            if state.body.count + chunk.count > maxBodyBytes {
                state.bodyTooLarge = true
            } else if needed > 0 && !reserveBody(needed) {
                state.bodyRefusedBusy = true
            } else {
                state.heldBodyBytes += max(0, needed)
                state.body.append(contentsOf: chunk)
                return 0
            }
            state.body = []
            return state.takeHeldBodyBytes()
        }
        releaseBody(released)
    }

    /// Takes `count` bytes of the body budget; false, taking nothing, where they do not fit.
    private func reserveBody(_ count: Int) -> Bool {
        var current = bufferedBodyBytes.load(ordering: .relaxed)
        while true {
            guard current <= bufferedBodyBytesMax - count else { return false }
            let (exchanged, original) = bufferedBodyBytes.compareExchange(expected: current, desired: current + count,
                                                                           ordering: .relaxed)
            if exchanged { return true }
            current = original
        }
    }

    private func releaseBody(_ count: Int) {
        if count > 0 { bufferedBodyBytes.subtract(count, ordering: .relaxed) }
    }

    /// An access-handler call with no new body bytes: the request is complete
    /// (hand it to the handler), or a parked request was resumed (queue its
    /// stored response).
    func advance(_ context: RequestContext) -> MHD_Result {
        bodyWaits.forget(ObjectIdentifier(context))   // the body is in (or this is a resume): no byte is awaited now
        enum Step { case dispatch([UInt8]), queue(HTTPResponse), wait }
        let tooLarge = bodyTooLarge()
        let step = context.state.withLock { state -> Step in
            switch state.phase {
            case .receiving where state.bodyTooLarge:
                state.phase = .queued
                return .queue(tooLarge)
            case .receiving where state.bodyRefusedBusy:
                state.phase = .queued
                return .queue(Self.busy())
            case .receiving:
                state.phase = .handling
                var body: [UInt8] = []
                swap(&body, &state.body)
                return .dispatch(body)
            case .resuming(let response):
                state.phase = .queued
                return .queue(response)
            case .handling, .answeredWhileHandling, .suspending, .answeredWhileSuspending, .suspended, .queued,
                 .finished:
                return .wait
            }
        }
        switch step {
        case .wait:
            return .YES
        case .queue(let response):
            return queue(response, for: context)
        case .dispatch(let body):
            let request = HTTPRequest(method: context.method, path: context.path,
                                      query: MHDValues.query(of: context.connection),
                                      headers: MHDValues.headers(of: context.connection),
                                      body: body, remoteAddress: context.remoteAddress)
            handler.handle(request) { response in context.respond(response) }
            return afterHandle(context)
        }
    }

    /// `handle` has returned: queue the answer if there is one, else park the
    /// request (or, once stopping, answer 503 instead of parking).
    private func afterHandle(_ context: RequestContext) -> MHD_Result {
        if let response = context.state.withLock({ state -> HTTPResponse? in
            guard case .answeredWhileHandling(let response) = state.phase else { return nil }
            state.phase = .queued
            return response
        }) {
            return queue(response, for: context)
        }

        let registered = register(context)
        enum Next { case queue(HTTPResponse), suspend }
        let next = context.state.withLock { state -> Next in
            switch state.phase {
            case .answeredWhileHandling(let response):
                state.phase = .queued
                return .queue(response)
            case .handling where registered:
                state.phase = .suspending
                return .suspend
            case .handling:
                state.phase = .queued
                return .queue(.error(503, ChronicleError(.shuttingDown, "The server is shutting down.")))
            case .receiving, .suspending, .answeredWhileSuspending, .suspended, .resuming, .queued, .finished:
                preconditionFailure("request in phase \(state.phase) after its handler returned")
            }
        }
        switch next {
        case .queue(let response):
            if registered { unregister(context) }
            return queue(response, for: context)
        case .suspend:
            MHD_suspend_connection(context.connection.pointer)
            let resumeNow = context.state.withLock { state -> Bool in
                switch state.phase {
                case .answeredWhileSuspending(let response):
                    state.phase = .resuming(response)
                    return true
                case .suspending:
                    state.phase = .suspended
                    return false
                default:
                    preconditionFailure("request in phase \(state.phase) while suspending")
                }
            }
            if resumeNow { context.resume() }
            return .YES
        }
    }

    /// MHD's completion notice (the response went out, or the request was abandoned).
    func complete(_ context: RequestContext, normally: Bool) {
        bodyWaits.forget(ObjectIdentifier(context))
        let entry = context.finish(normally: normally)
        releaseBody(context.state.withLock { $0.takeHeldBodyBytes() })
        unregister(context)
        onCompleted?(entry)
    }

    // MARK: - Responses

    private static func busy() -> HTTPResponse {
        var response = HTTPResponse.error(503, ChronicleError(.serverBusy, "The server holds as many request bodies as it takes at once; nothing was written. Try again in a moment."))
        response.headers.append(("Retry-After", "1"))
        return response
    }

    private func bodyTooLarge() -> HTTPResponse {
        .error(413, ChronicleError(.bodyTooLarge, "The request body is larger than \(maxBodyBytes) bytes."))
    }

    /// Hands a copy of the response to MHD, which sends it once the access
    /// handler returns. MHD adds Content-Length (and Date) itself.
    private func queue(_ response: HTTPResponse, for context: RequestContext) -> MHD_Result {
        let response = response.identified(by: context.id)
        let status = (200...999).contains(response.status) ? response.status : 500
        let created: OpaquePointer?
        if let shared = response.shared {
            // Read in place: MHD holds a reference until it destroys the response.
            let reference = Unmanaged.passRetained(shared).toOpaque()
            created = MHD_create_response_from_buffer_with_free_callback_cls(shared.count, shared.base, releaseSharedBytes, reference)
            if created == nil { Unmanaged<SharedBytes>.fromOpaque(reference).release() }
        } else {
            created = response.body.withUnsafeBytes { bytes in
                MHD_create_response_from_buffer(bytes.count, UnsafeMutableRawPointer(mutating: bytes.baseAddress),
                                                .RESPMEM_MUST_COPY)
            }
        }
        guard let created else { return .NO }
        defer { MHD_destroy_response(created) }
        for (name, value) in response.headers where name.lowercased() != "content-length" {
            // MHD refuses names or values with line breaks; such a header is dropped.
            _ = MHD_add_response_header(created, name, value)
        }
        context.state.withLock { state in
            state.status = status
            state.responseBytes = response.bodyCount
            state.errorCode = response.errorCode
            state.internalDetail = response.internalDetail
        }
        return MHD_queue_response(context.connection.pointer, UInt32(status), created)
    }

    // MARK: - Parked requests

    /// Records a request about to be parked; false once the server is stopping.
    private func register(_ context: RequestContext) -> Bool {
        registry.withLock { registry in
            if registry.stopping { return false }
            registry.parked[ObjectIdentifier(context)] = (context, false)
            return true
        }
    }

    private func unregister(_ context: RequestContext) {
        _ = registry.withLock { $0.parked.removeValue(forKey: ObjectIdentifier(context)) }
    }

    func didResume(_ context: RequestContext) {
        registry.withLock { registry in
            // Absent when MHD already completed it, which may happen as soon as
            // the resume call has woken the worker.
            registry.parked[ObjectIdentifier(context)]?.resumed = true
        }
    }

    /// Refuses further parking and answers every parked request 503.
    func beginShutdown() {
        let parked = registry.withLock { registry -> [RequestContext] in
            registry.stopping = true
            return registry.parked.values.map(\.context)
        }
        let response = HTTPResponse.error(503, ChronicleError(.shuttingDown, "The server is shutting down."))
        for context in parked { context.respond(response) }
    }

    /// True when no parked request is still suspended (MHD_stop_daemon must
    /// never see one); `drained` when none is waiting to be sent either.
    func parkedState() -> (allResumed: Bool, drained: Bool) {
        registry.withLock { registry in
            (registry.parked.values.allSatisfy(\.resumed), registry.parked.isEmpty)
        }
    }

    // MARK: - MHD's log

    func record(message: String) {
        messages.withLock { messages in
            if messages.count == Self.messageCountMax { messages.removeFirst() }
            messages.append(message)
        }
    }

    func loggedMessages() -> [String] {
        messages.withLock { $0 }
    }
}

/// MHD's notice that a response reading a `SharedBytes` in place is gone: its reference goes.
/// Called on MHD's threads, so it is not isolated to any actor.
private let releaseSharedBytes: @convention(c) (UnsafeMutableRawPointer?) -> Void = { reference in
    guard let reference else { return }
    Unmanaged<SharedBytes>.fromOpaque(reference).release()
}

/// Sockets the server waits on for bytes of a request (its head, or its announced body) whose
/// client may have ended its stream. libmicrohttpd sometimes misses that end and holds the
/// connection until its idle timeout (found by the request fuzzer: a client that half-closes after
/// a Content-Length it never fills, about one in four such connections; bytes before a request
/// line, or a body's leftover it reads as the next request's start). A sweep a few times a second
/// peeks at each watched socket and shuts down those found at their end of stream `sweepsMin`
/// sweeps in a row; libmicrohttpd then closes the connection as its own. A socket leaves the watch
/// (under its lock) before MHD closes it: when the bytes waited for arrive, at a request's
/// completion notice, or at the connection's closing notice, all given before MHD closes the
/// descriptor.
final class EndOfStreamWatch<Key: Hashable & Sendable>: Sendable {
    private let waiting = Locked<[Key: (socket: Int32, strikes: Int)]>([:])
    /// Sweeps in a row that must find the peer ended: 1 while a body is awaited (its head came
    /// whole, so no request of this connection is on its way); 2 between requests, where a head
    /// that came whole just before the end reaches the access handler (and leaves) in between.
    let sweepsMin: Int

    init(sweepsMin: Int) { self.sweepsMin = sweepsMin }

    func watch(_ key: Key, socket: Int32) {
        guard socket >= 0 else { return }
        waiting.withLock { $0[key] = (socket, 0) }
    }

    func forget(_ key: Key) {
        _ = waiting.withLock { $0.removeValue(forKey: key) }
    }

    /// Shuts down every watched socket whose peer ended its stream at `sweepsMin` sweeps in a
    /// row; returns how many.
    @discardableResult
    func sweep() -> Int {
        waiting.withLock { waiting in
            var shut = 0
            for (key, entry) in waiting {
                guard PlainPort.peerEnded(entry.socket) else {
                    if entry.strikes > 0 { waiting[key] = (entry.socket, 0) }
                    continue
                }
                if entry.strikes + 1 < sweepsMin {
                    waiting[key] = (entry.socket, entry.strikes + 1)
                } else {
                    PlainPort.shutDown(entry.socket)
                    waiting.removeValue(forKey: key)
                    shut += 1
                }
            }
            return shut
        }
    }
}

extension EndOfStreamWatch where Key == Int32 {
    /// Watches a connection, keyed by its socket.
    func watch(socket: Int32) { watch(socket, socket: socket) }
}
