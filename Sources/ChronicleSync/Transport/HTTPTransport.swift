import ChronicleCore
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The sync API over HTTP/1.1 (`Schemas/api/openapi.yaml`), with URLSession.
/// Ops travel as binary segments; answers that are not 2xx become `SyncError`s:
/// no route, refused connections, timeouts, 5xx and 429 are transient, other 4xx terminal.
public final class HTTPTransport: SyncTransport {
    public let baseURL: URL
    public let library: UUID
    /// What is sent as the bearer: an access token got with the device token (`SessionTokens`).
    let tokens: SessionTokens
    let session: URLSession
    /// Whether this transport made `session` (and so ends it).
    private let ownsSession: Bool
    /// Seconds a request may take beyond any long-poll wait it asked for.
    public let requestTimeoutSeconds: Double

    /// `session`: one to share with other transports of this process (several libraries or
    /// accounts in one app); it must allow a request of `requestTimeoutSeconds` + 65 s, the
    /// longest long-poll. By default the transport makes its own (`sessionConfiguration`).
    public init(baseURL: URL, library: UUID, token: String, requestTimeoutSeconds: Double = 30, session: URLSession? = nil) {
        self.baseURL = baseURL
        self.library = library
        self.requestTimeoutSeconds = requestTimeoutSeconds
        ownsSession = session == nil
        let session = session ?? URLSession(configuration: Self.sessionConfiguration(requestTimeoutSeconds: requestTimeoutSeconds))
        self.session = session
        tokens = SessionTokens(deviceToken: token) { () async throws(SyncError) in
            try await Self.openSession(baseURL: baseURL, deviceToken: token, timeoutSeconds: requestTimeoutSeconds, session: session)
        }
    }

    /// The configuration of a transport's own session: ephemeral, no cache, 4 connections to the server.
    public static func sessionConfiguration(requestTimeoutSeconds: Double = 30, connectionsPerHost: Int = 4) -> URLSessionConfiguration {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.urlCache = nil
        configuration.httpMaximumConnectionsPerHost = connectionsPerHost
        configuration.timeoutIntervalForRequest = requestTimeoutSeconds + 65
        return configuration
    }

    deinit { if ownsSession { session.invalidateAndCancel() } }

    /// Registers a device with the server and returns its token (`POST /v1/devices`).
    public static func register(baseURL: URL, user: String, password: String, deviceID: UUID,
                                timeoutSeconds: Double = 30) async throws(SyncError) -> ProtocolJSON.RegistrationResult {
        var request = URLRequest(url: baseURL.appendingPathComponent("v1/devices"))
        request.httpMethod = "POST"
        request.timeoutInterval = timeoutSeconds
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = Data(ProtocolJSON.encode(ProtocolJSON.Registration(user: user, password: password, deviceID: deviceID.lowercased)))
        let session = URLSession(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        let (body, _) = try await send(request, session: session)
        do {
            return try ProtocolJSON.decode(ProtocolJSON.RegistrationResult.self, from: body, what: "registration answer")
        } catch {
            throw .terminal(ProtocolError(502, ProtocolError.Code(error.code), error.message))
        }
    }

    func request(_ path: String, query: [URLQueryItem] = [], timeout: Double) -> URLRequest {
        var components = URLComponents(url: baseURL.appendingPathComponent(path), resolvingAgainstBaseURL: false)!
        if !query.isEmpty { components.queryItems = query }
        var request = URLRequest(url: components.url!)
        request.timeoutInterval = timeout
        return request
    }

    /// A push body at least this large asks `Expect: 100-continue` and is sent only once the
    /// server has seen its head and wants it. A server refuses a body far over its cap on the
    /// head (413 `body_too_large`, and the engine halves the batch); sent without waiting, the
    /// body would run into a closed connection and the refusal could arrive as a reset, a
    /// transient error retried as it was. Below this size the server reads the body first.
    public static let expectContinueBytesMin = 1 << 20

    public func push(_ segment: Segment) async throws(SyncError) -> PushResponse {
        var request = request("v1/libraries/\(library.lowercased)/ops", timeout: requestTimeoutSeconds)
        request.httpMethod = "POST"
        request.setValue(SegmentCodec.mediaType, forHTTPHeaderField: "Content-Type")
        let encoded = SegmentCodec.encode(segment)
        if encoded.count >= Self.expectContinueBytesMin { request.setValue("100-continue", forHTTPHeaderField: "Expect") }
        request.httpBody = Data(encoded)
        let (body, _) = try await send(request)
        do {
            return try ProtocolJSON.decodePushResponse(body)
        } catch {
            throw .transient(reason: "The server's push answer could not be read: \(error.message)", retryAfterSeconds: nil)
        }
    }

    public func pull(after cursor: Int64, limit: Int, waitMilliseconds: Int) async throws(SyncError) -> PullPage {
        var request = request("v1/libraries/\(library.lowercased)/ops", query: [
            URLQueryItem(name: "after", value: String(cursor)),
            URLQueryItem(name: "limit", value: String(limit)),
            URLQueryItem(name: "wait", value: String(waitMilliseconds)),
        ], timeout: requestTimeoutSeconds + Double(waitMilliseconds) / 1000)
        request.setValue(SegmentCodec.mediaType, forHTTPHeaderField: "Accept")
        let (body, response) = try await send(request)
        let segment: Segment
        let inflated: [UInt8]
        do {
            inflated = try LZ4Frame.decompress(body, maxBytes: SegmentCodec.Limits().maxDecodedBytes)
            segment = try SegmentCodec.decodeBody(inflated)
        } catch {
            throw .transient(reason: "The server's segment could not be read: \(error.message)", retryAfterSeconds: nil)
        }
        func header(_ name: String) -> String? { response.value(forHTTPHeaderField: name) }
        // The server's numbers are hostile too: each is read into its bound, and one out of it makes
        // the answer unreadable (a transient failure: nothing is applied, the queue stays).
        func number(_ name: String, _ bound: WireNumber) throws(SyncError) -> Int64? {
            guard let text = header(name) else { return nil }
            guard let value = bound.value(text) else {
                throw .transient(reason: "The server's pull answer carries \(name): '\(text.prefix(40))', not \(bound.name) from \(bound.range.lowerBound) to \(bound.range.upperBound).",
                                 retryAfterSeconds: nil)
            }
            return value
        }
        guard let next = try number("Chronicle-Next-Cursor", .seq), let head = try number("Chronicle-Head", .seq) else {
            throw .transient(reason: "The server's pull answer lacks its cursor headers.", retryAfterSeconds: nil)
        }
        var page = PullPage(segment: segment, nextCursor: next, more: header("Chronicle-More") == "true", head: head,
                            snapshotSeq: try number("Chronicle-Snapshot-Seq", .seq), encoded: SegmentBytes(body: inflated, frame: [UInt8](body)))
        page.afterOpID = header(PullPage.afterOpHeader).flatMap { UUID(uuidString: $0) }
        page.incarnation = header(PullPage.incarnationHeader).flatMap { UUID(uuidString: $0) }
        page.stateCarriedOverAt = try number(PullPage.stateCarriedOverHeader, .milliseconds)
        return page
    }

    /// Downloads the snapshot into a temporary file (a large library's frame never sits in memory).
    public func snapshot() async throws(SyncError) -> SnapshotFrame {
        var request = request("v1/libraries/\(library.lowercased)/snapshot", timeout: requestTimeoutSeconds + 60)
        request.setValue(SnapshotCodec.mediaType, forHTTPHeaderField: "Accept")
        let file = try await authorized(request) { request async throws(SyncError) in try await Self.download(request, session: session) }
        return SnapshotFrame(file: file, temporary: true)
    }

    public func verdict(for entity: UUID) async throws(SyncError) -> Verdict {
        var request = request("v1/libraries/\(library.lowercased)/entities/\(entity.lowercased)", timeout: requestTimeoutSeconds)
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        let (body, _) = try await send(request)
        do {
            return try ProtocolJSON.decodeVerdict(body)
        } catch {
            throw .transient(reason: "The server's verdict could not be read: \(error.message)", retryAfterSeconds: nil)
        }
    }

    private func blobPath(_ blob: BlobRef) -> String { "v1/libraries/\(library.lowercased)/blobs/\(blob.description)" }

    private static func blobStatus(from body: [UInt8]) throws(SyncError) -> BlobStatus {
        do {
            return try ProtocolJSON.decode(BlobStatus.self, from: body, what: "blob status")
        } catch {
            throw .transient(reason: "The server's blob status could not be read: \(error.message)", retryAfterSeconds: nil)
        }
    }

    public func blobStatus(_ blob: BlobRef) async throws(SyncError) -> BlobStatus {
        var request = request(blobPath(blob) + "/status", timeout: requestTimeoutSeconds)
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        return try Self.blobStatus(from: try await send(request).0)
    }

    public func putBlob(_ blob: BlobRef, length: Int64, offset: Int64, bytes: [UInt8]) async throws(SyncError) -> BlobStatus {
        var request = request(blobPath(blob), query: [URLQueryItem(name: "offset", value: String(offset)),
                                                      URLQueryItem(name: "length", value: String(length))],
                              timeout: requestTimeoutSeconds + 60)
        request.httpMethod = "PUT"
        request.setValue(BlobLimits.mediaType, forHTTPHeaderField: "Content-Type")
        // No `Expect: 100-continue`: a chunk is always far under the server's body cap, and the wait
        // for the go-ahead cost a round trip per chunk.
        request.httpBody = Data(bytes)
        return try Self.blobStatus(from: try await send(request).0)
    }

    public func blobRange(_ blob: BlobRef, offset: Int64, count: Int) async throws(SyncError) -> BlobRange {
        var request = request(blobPath(blob), timeout: requestTimeoutSeconds + 60)
        request.setValue("bytes=\(offset)-\(offset + Int64(max(1, count)) - 1)", forHTTPHeaderField: "Range")
        let (body, response) = try await send(request)
        // `bytes */0` for an empty blob.
        guard let range = Self.contentRange(response) else {
            throw .transient(reason: "The server's blob range lacks its Content-Range.", retryAfterSeconds: nil)
        }
        return BlobRange(offset: range.first ?? 0, bytes: body, length: range.length)
    }

    /// A `Content-Range: bytes a-b/total` answer's first byte (nil for `bytes */total`) and total length.
    static func contentRange(_ response: HTTPURLResponse) -> (first: Int64?, length: Int64)? {
        guard let header = response.value(forHTTPHeaderField: "Content-Range"), let slash = header.lastIndex(of: "/"),
              let length = WireNumber.byteCount.value(header[header.index(after: slash)...]) else { return nil }
        guard let dash = header.firstIndex(of: "-"), let space = header.firstIndex(of: " "), dash > space else { return (nil, length) }
        guard let first = WireNumber.byteCount.value(header[header.index(after: space)..<dash]), first <= length else { return nil }
        return (first, length)
    }

    /// One request; 2xx gives the body, everything else a `SyncError`. Cancelling the
    /// calling task cancels the request.
    static func send(_ request: URLRequest, session: URLSession) async throws(SyncError) -> ([UInt8], HTTPURLResponse) {
        let box = TaskBox()
        let outcome: Result<(Data, URLResponse), Error> = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let task = session.dataTask(with: request) { data, response, error in
                    if let error { continuation.resume(returning: .failure(error)) }
                    else if let data, let response { continuation.resume(returning: .success((data, response))) }
                    else { continuation.resume(returning: .failure(URLError(.badServerResponse))) }
                }
                box.set(task)
                task.resume()
            }
        } onCancel: {
            box.cancel()
        }
        let data: Data, response: URLResponse
        switch outcome {
        case .failure(let error):
            throw .transient(reason: describe(error), retryAfterSeconds: nil)
        case .success(let pair):
            (data, response) = pair
        }
        guard let http = response as? HTTPURLResponse else {
            throw .transient(reason: "The server's answer was not HTTP.", retryAfterSeconds: nil)
        }
        let body = [UInt8](data)
        guard (200..<300).contains(http.statusCode) else {
            throw SyncError.from(Self.refusal(http, body: body))
        }
        return (body, http)
    }

    /// Like `send`, with the answer's body written to a temporary file whose path is returned
    /// (the caller removes it). An answer that is not 2xx is read and thrown as `send` does.
    static func download(_ request: URLRequest, session: URLSession) async throws(SyncError) -> String {
        let box = TaskBox()
        let target = NSTemporaryDirectory() + "chronicle-download-\(UUID().uuidString.lowercased())"
        let outcome: Result<URLResponse, Error> = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let task = session.downloadTask(with: request) { location, response, error in
                    // The session removes its own file when this returns: take it now.
                    if let error { continuation.resume(returning: .failure(error)); return }
                    guard let location, let response else { continuation.resume(returning: .failure(URLError(.badServerResponse))); return }
                    do {
                        try FileManager.default.moveItem(atPath: location.path, toPath: target)
                        // A snapshot or start image of the library: its owner's alone, as the store is.
                        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: target)
                        continuation.resume(returning: .success(response))
                    } catch {
                        continuation.resume(returning: .failure(error))
                    }
                }
                box.set(task)
                task.resume()
            }
        } onCancel: {
            box.cancel()
        }
        let response: URLResponse
        switch outcome {
        case .failure(let error):
            try? FileManager.default.removeItem(atPath: target)
            throw .transient(reason: describe(error), retryAfterSeconds: nil)
        case .success(let answer):
            response = answer
        }
        guard let http = response as? HTTPURLResponse, (200..<300).contains(http.statusCode) else {
            let body = (try? Data(contentsOf: URL(fileURLWithPath: target)).prefix(64 << 10)).map { [UInt8]($0) } ?? []
            try? FileManager.default.removeItem(atPath: target)
            guard let http = response as? HTTPURLResponse else {
                throw .transient(reason: "The server's answer was not HTTP.", retryAfterSeconds: nil)
            }
            throw SyncError.from(Self.refusal(http, body: body))
        }
        return target
    }

    /// A 4xx or 5xx answer as the error it carries: its body's code and message, and the
    /// numbers some refusals send as headers (`Retry-After`, a reused deviceSeq's two, the head).
    static func refusal(_ http: HTTPURLResponse, body: [UInt8]) -> ProtocolError {
        let detail = ProtocolJSON.decodeError(body)
        var error = ProtocolError(http.statusCode, ProtocolError.Code(rawValue: detail?.code ?? "http_\(http.statusCode)"),
                                  detail?.message ?? HTTPURLResponse.localizedString(forStatusCode: http.statusCode),
                                  retryAfterSeconds: retryAfterSeconds(http.value(forHTTPHeaderField: "Retry-After")))
        // A number out of its bound is as good as absent: the engine then treats the refusal as
        // one it cannot act on (it keeps the queue and reports it), never as a number to add to.
        func number(_ name: String, _ bound: WireNumber) -> Int64? { http.value(forHTTPHeaderField: name).flatMap(bound.value) }
        error.reusedDeviceSeq = number(ProtocolError.reusedDeviceSeqHeader, .deviceSeq)
        error.lastDeviceSeq = number(ProtocolError.lastDeviceSeqHeader, .deviceSeq)
        error.serverHead = number(ProtocolError.headHeader, .seq)
        error.afterOpID = http.value(forHTTPHeaderField: PullPage.afterOpHeader).flatMap { UUID(uuidString: $0) }
        return error
    }

    /// `Retry-After` in whole seconds, at most a day: a longer wait is read as a day, and an HTTP
    /// date or anything else that is not a number of seconds as none (the engine's own backoff).
    static func retryAfterSeconds(_ text: String?) -> Double? {
        guard let text = text?.trimmingCharacters(in: .whitespaces), !text.isEmpty,
              text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return nil }
        return Double(WireNumber.retryAfterSeconds.value(text) ?? WireNumber.retryAfterSeconds.range.upperBound)
    }

    static func describe(_ error: Error) -> String {
        guard let url = error as? URLError else { return "The request failed: \(error.localizedDescription)" }
        switch url.code {
        case .cannotConnectToHost: return "Could not connect to the server (connection refused)."
        case .timedOut: return "The request timed out."
        case .notConnectedToInternet: return "No network connection."
        case .networkConnectionLost: return "The connection was lost."
        case .cannotFindHost, .dnsLookupFailed: return "The server's host name could not be resolved."
        case .cancelled: return "The request was cancelled."
        default: return "The request failed: \(url.localizedDescription)"
        }
    }
}

/// Holds the data task so a cancellation arriving from another thread can reach it.
final class TaskBox: @unchecked Sendable {
    private let lock = NSLock()
    private var task: URLSessionTask?
    private var cancelled = false

    func set(_ task: URLSessionTask) {
        lock.lock()
        self.task = task
        let cancelNow = cancelled
        lock.unlock()
        if cancelNow { task.cancel() }
    }

    func cancel() {
        lock.lock()
        cancelled = true
        let task = self.task
        lock.unlock()
        task?.cancel()
    }
}
