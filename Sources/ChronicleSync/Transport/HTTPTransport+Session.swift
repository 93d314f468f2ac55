import ChronicleCore
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The bearer an `HTTPTransport` sends. The device token (`chr_…`, from `chronicle login`) is
/// long-lived; on its first request the transport trades it for an access token
/// (`POST /v1/session`), sends that on every request, and trades again shortly before it
/// expires, or at once when the server refuses it (401: expired, or made under a key the server
/// no longer holds) and then sends the same request once more. So the device token crosses the
/// network about once an hour, and a refused access token costs a round trip, never an op. A
/// server that gives no access tokens (404) is sent the device token on every request.
actor SessionTokens {
    let deviceToken: String
    private let open: @Sendable () async throws(SyncError) -> ProtocolJSON.SessionResult?
    private var current: (token: String, renewAt: Date)?
    private var usesDeviceToken = false
    private var opening: Task<Result<ProtocolJSON.SessionResult?, SyncError>, Never>?
    /// Sessions opened (for tests and logs).
    private(set) var opened = 0

    /// `open` asks the server for an access token; nil where it gives none.
    init(deviceToken: String, open: @escaping @Sendable () async throws(SyncError) -> ProtocolJSON.SessionResult?) {
        self.deviceToken = deviceToken
        self.open = open
    }

    /// The token to send: the current access token unless it is `refused` (or due for renewal),
    /// else a new one (one request however many callers ask at once).
    func bearer(refused: String? = nil) async throws(SyncError) -> String {
        if usesDeviceToken { return deviceToken }
        if let current, current.token != refused, current.renewAt > Date() { return current.token }
        let task: Task<Result<ProtocolJSON.SessionResult?, SyncError>, Never>
        if let opening {
            task = opening
        } else {
            let open = self.open
            task = Task { () async -> Result<ProtocolJSON.SessionResult?, SyncError> in
                do throws(SyncError) { return .success(try await open()) } catch { return .failure(error) }
            }
            opening = task
        }
        let result = await task.value
        if opening == task { opening = nil }
        switch result {
        case .failure(let error):
            throw error
        case .success(nil):
            usesDeviceToken = true
            return deviceToken
        case .success(let session?):
            if current?.token != session.accessToken {
                opened += 1
                // Renewed with a fifth of its lifetime left, so a clock or a slow request never meets the end.
                current = (session.accessToken, Date().addingTimeInterval(Double(session.expiresInSeconds) * 0.8))
            }
            return session.accessToken
        }
    }
}

extension HTTPTransport {
    /// `POST /v1/session` with the device token: an access token, or nil where the server gives none (404).
    static func openSession(baseURL: URL, deviceToken: String, timeoutSeconds: Double, session: URLSession) async throws(SyncError)
        -> ProtocolJSON.SessionResult? {
        var request = URLRequest(url: baseURL.appendingPathComponent("v1/session"))
        request.httpMethod = "POST"
        request.timeoutInterval = timeoutSeconds
        request.setValue("Bearer \(deviceToken)", forHTTPHeaderField: "Authorization")
        let body: [UInt8]
        do {
            body = try await send(request, session: session).0
        } catch {
            if case .terminal(let refusal) = error, refusal.status == 404 { return nil }
            throw error
        }
        do {
            return try ProtocolJSON.decode(ProtocolJSON.SessionResult.self, from: body, what: "session answer")
        } catch {
            throw .transient(reason: "The server's session answer could not be read: \(error.message)", retryAfterSeconds: nil)
        }
    }

    /// Sends `request` with the session's bearer (`call` sends it); a 401 for an access token
    /// gets a new one and the request again, once.
    func authorized<T>(_ request: URLRequest, _ call: (URLRequest) async throws(SyncError) -> T) async throws(SyncError) -> T {
        var request = request
        let token = try await tokens.bearer()
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        do {
            return try await call(request)
        } catch {
            guard token != tokens.deviceToken, case .terminal(let refusal) = error, refusal.status == 401 else { throw error }
            let fresh = try await tokens.bearer(refused: token)
            request.setValue("Bearer \(fresh)", forHTTPHeaderField: "Authorization")
            return try await call(request)
        }
    }

    /// One request with the session's bearer (`HTTPTransport.send`).
    func send(_ request: URLRequest) async throws(SyncError) -> ([UInt8], HTTPURLResponse) {
        try await authorized(request) { request async throws(SyncError) in try await Self.send(request, session: session) }
    }

    /// Gets an access token now, where the server gives them (nothing otherwise): an app may
    /// call it as it starts, so that its first sync does not wait for one.
    public func startSession() async throws(SyncError) {
        _ = try await tokens.bearer()
    }

    /// Access tokens this transport has been given so far.
    public var sessionsOpened: Int { get async { await tokens.opened } }
}
