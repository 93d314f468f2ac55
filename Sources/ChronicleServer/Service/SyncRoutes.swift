import ChronicleCore
import ChronicleStore
import Dispatch
import Foundation
import ChronicleServerStore

/// The HTTP face of `SyncService` (`Schemas/api/openapi.yaml`):
///
/// - `GET  /healthz`, `GET /readyz`, `GET /metrics` (`ServerHealth` lists damaged files)
/// - `POST /v1/devices` — register a device, get a bearer token
/// - `POST /v1/session` — an access token for the device token sent (`Accounts+Sessions.swift`)
/// - `POST /v1/libraries/{library}/ops` — push a segment (or JSON) of ops
/// - `GET  /v1/libraries/{library}/ops?after=N&limit=M&wait=MS` — pull
/// - `GET  /v1/libraries/{library}/entities/{id}` — the server's verdict for one entity
/// - `GET  /v1/libraries/{library}/snapshot` — the newest snapshot
/// - `GET  /v1/libraries/{library}/start-image?format=N&schema=F` — the newest snapshot as a device store
/// - `GET  /v1/libraries/{library}/blobs/{blob}/status` — what the server holds of a blob
/// - `PUT  /v1/libraries/{library}/blobs/{blob}?offset=N&length=L` — one chunk of a blob
/// - `GET  /v1/libraries/{library}/blobs/{blob}` — a blob, or a `Range` of it
///
/// Every failure is a 4xx (or 503/507) with `{"error":{"code","message"}}`; a
/// handler that throws something unexpected is logged and answered 500, never a crash.
public struct SyncRoutes: HTTPHandler {
    public let service: SyncService
    /// Requests that touch a store run on the service's worker threads, not on
    /// libmicrohttpd's: a commit waits for fsync, and a blocked HTTP thread would stall
    /// every connection it serves. Their answers go back through the server's
    /// park-and-respond path.
    private var work: WorkerPool { service.workers }

    public init(service: SyncService) { self.service = service }

    public func handle(_ request: HTTPRequest, respond: @escaping @Sendable (HTTPResponse) -> Void) {
        let parts = request.path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        let answer = answering(request, parts: parts, respond: respond)
        switch (request.method, parts.count) {
        case (_, 1) where Self.operatorRoutes.contains(parts[0]):
            guard request.method == "GET" else { return answer(Self.methodNotAllowed(request.method, allowed: "GET")) }
            operatorRoute(parts[0], answer: answer)
        case (_, 2) where parts == ["v1", "devices"]:
            guard request.method == "POST" else { return answer(Self.methodNotAllowed(request.method, allowed: "POST")) }
            work.async { answer(register(request)) }   // scrypt takes tens of milliseconds
        case (_, 2) where parts == ["v1", "session"]:
            guard request.method == "POST" else { return answer(Self.methodNotAllowed(request.method, allowed: "POST")) }
            work.async { answer(openSession(request)) }
        case (_, 4...6) where parts[0] == "v1" && parts[1] == "libraries":
            libraryRoute(request, parts: parts, answer: answer)
        default:
            answer(Self.noRoute(request))
        }
    }

    /// `respond`, after counting the answer in the metrics under its route and noting a damaged
    /// file it reports.
    private func answering(_ request: HTTPRequest, parts: [String],
                           respond: @escaping @Sendable (HTTPResponse) -> Void) -> @Sendable (HTTPResponse) -> Void {
        let route = Self.routeName(parts)
        let metrics = service.metrics
        let service = self.service
        return { response in
            metrics.request(method: request.method, route: route, status: response.status)
            // A damaged file is recorded for /healthz, /readyz and /metrics (and logged once), with
            // the internal detail the answer itself does not carry.
            let note = (response.errorMessage ?? "") + (response.internalDetail.map { " (\($0))" } ?? "")
            let code = response.errorCode.map(ProtocolError.Code.init(rawValue:))
            if code == .accountsDamaged {
                service.noteDamaged(code: .accountsDamaged, library: nil, message: note)
            } else if let code, code == .libraryDamaged || code == .blobStoreDamaged,
                      parts.count > 2, let library = UUID(text: parts[2]) {
                service.noteDamaged(code: code, library: library, message: note)
            }
            respond(response)
        }
    }

    /// `GET /healthz`, `/readyz` or `/metrics` (`name`).
    private func operatorRoute(_ name: String, answer: @escaping @Sendable (HTTPResponse) -> Void) {
        switch name {
        case "healthz":
            // Liveness: 200 while the process answers, damaged files or not (restarting it
            // mends nothing); the body lists them.
            answer(.json(200, service.health.body(readiness: false)))
        case "readyz":
            readiness(answer: answer)
        default:
            answer(HTTPResponse(status: 200, headers: [("Content-Type", "text/plain; version=0.0.4")],
                                body: Array((service.metrics.render() + service.health.renderMetrics() + service.renderLibraryMetrics()
                                                  + service.renderExtensionMetrics() + (service.shared?.renderMetrics() ?? "")).utf8)))
        }
    }

    /// `GET /readyz`.
    private func readiness(answer: @escaping @Sendable (HTTPResponse) -> Void) {
        let service = self.service
        // Readiness: 503 while no token can be checked (the accounts file is damaged), or while
        // the database several servers share cannot be reached (asked on a worker thread: a
        // reconnect may take seconds).
        guard let shared = service.shared else {
            return answer(.json(service.health.isReady ? 200 : 503, service.health.body(readiness: true)))
        }
        work.async {
            if let reason = shared.unreachable() {
                let formatter = ISO8601DateFormatter()
                formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
                let fields = [#""action":"# + CanonicalJSON.quote("Start PostgreSQL or mend the network to it; requests are answered 503 server_store_unavailable until then, and nothing is written."),
                              #""code":"server_store_unavailable""#, #""file":"# + CanonicalJSON.quote(shared.label),
                              #""message":"# + CanonicalJSON.quote("It cannot be reached: \(reason)"),
                              #""since":"# + CanonicalJSON.quote(formatter.string(from: Date()))]
                let body = #"{"status":"unavailable","problems":[{"# + fields.joined(separator: ",") + "}]}"
                answer(.json(503, Array(body.utf8)))
            } else {
                answer(.json(service.health.isReady ? 200 : 503, service.health.body(readiness: true)))
            }
        }
    }

    /// The routes under `/v1/libraries/{library}/` (`parts` has 4 to 6 components): ops,
    /// snapshot, start image, an entity's verdict, blobs.
    private func libraryRoute(_ request: HTTPRequest, parts: [String], answer: @escaping @Sendable (HTTPResponse) -> Void) {
        switch (parts.count, parts[3]) {
        case (4, "ops"):
            guard let library = UUID(text: parts[2]) else { return answer(Self.badID(parts[2])) }
            switch request.method {
            case "POST": work.async { answer(push(request, library: library)) }
            case "GET": work.async { pull(request, library: library, respond: answer) }
            default: answer(Self.methodNotAllowed(request.method, allowed: "GET, POST"))
            }
        case (4, "snapshot"):
            guard request.method == "GET" else { return answer(Self.methodNotAllowed(request.method, allowed: "GET")) }
            guard let library = UUID(text: parts[2]) else { return answer(Self.badID(parts[2])) }
            work.async { answer(snapshot(request, library: library)) }
        case (4, "start-image"):
            guard request.method == "GET" else { return answer(Self.methodNotAllowed(request.method, allowed: "GET")) }
            guard let library = UUID(text: parts[2]) else { return answer(Self.badID(parts[2])) }
            work.async { answer(startImage(request, library: library)) }
        case (5, "entities"):
            guard request.method == "GET" else { return answer(Self.methodNotAllowed(request.method, allowed: "GET")) }
            guard let library = UUID(text: parts[2]) else { return answer(Self.badID(parts[2])) }
            guard let entity = UUID(text: parts[4]) else { return answer(Self.badID(parts[4])) }
            work.async { answer(verdict(request, library: library, entity: entity)) }
        case (5, "blobs"):
            guard let library = UUID(text: parts[2]) else { return answer(Self.badID(parts[2])) }
            guard let blob = BlobRef(parts[4]) else { return answer(Self.badBlob(parts[4])) }
            switch request.method {
            case "PUT": work.async { answer(putBlob(request, library: library, blob: blob)) }
            case "GET": work.async { answer(getBlob(request, library: library, blob: blob)) }
            default: answer(Self.methodNotAllowed(request.method, allowed: "GET, PUT"))
            }
        case (6, "blobs") where parts[5] == "status":
            guard request.method == "GET" else { return answer(Self.methodNotAllowed(request.method, allowed: "GET")) }
            guard let library = UUID(text: parts[2]) else { return answer(Self.badID(parts[2])) }
            guard let blob = BlobRef(parts[4]) else { return answer(Self.badBlob(parts[4])) }
            work.async { answer(blobStatus(request, library: library, blob: blob)) }
        default:
            answer(Self.noRoute(request))
        }
    }

    /// 404: no route for the request's method and path.
    private static func noRoute(_ request: HTTPRequest) -> HTTPResponse {
        .error(404, code: .notFound, message: "No route for \(request.method) \(request.path); see Schemas/api/openapi.yaml.")
    }

    /// The routes for the operator's network: liveness, readiness and metrics.
    static let operatorRoutes: Set<String> = ["healthz", "readyz", "metrics"]

    /// A low-cardinality route label for metrics.
    static func routeName(_ parts: [String]) -> String {
        switch parts.count {
        case 1 where operatorRoutes.contains(parts[0]): "/" + parts[0]
        case 2 where parts == ["v1", "devices"]: "/v1/devices"
        case 2 where parts == ["v1", "session"]: "/v1/session"
        case 4 where parts[1] == "libraries" && parts[3] == "ops": "/v1/libraries/{library}/ops"
        case 5 where parts[1] == "libraries" && parts[3] == "entities": "/v1/libraries/{library}/entities/{id}"
        case 4 where parts[1] == "libraries" && parts[3] == "snapshot": "/v1/libraries/{library}/snapshot"
        case 4 where parts[1] == "libraries" && parts[3] == "start-image": "/v1/libraries/{library}/start-image"
        case 5 where parts[1] == "libraries" && parts[3] == "blobs": "/v1/libraries/{library}/blobs/{blob}"
        case 6 where parts[1] == "libraries" && parts[3] == "blobs" && parts[5] == "status": "/v1/libraries/{library}/blobs/{blob}/status"
        default: "other"
        }
    }

    // MARK: - Handlers

    private func register(_ request: HTTPRequest) -> HTTPResponse {
        do {
            let body = try ProtocolJSON.decode(ProtocolJSON.Registration.self, from: request.body, what: "registration")
            guard let device = UUID(text: body.deviceID) else { return Self.badID(body.deviceID) }
            let (token, user) = try service.accounts.registerDevice(user: body.user, password: body.password, deviceID: device)
            service.log.log("device_registered", ["user": .text(user.name), "device": .text(device.lowercased),
                                                  "library": .text(user.libraryID.lowercased)])
            return .json(201, ProtocolJSON.encode(ProtocolJSON.RegistrationResult(
                token: token, libraryID: user.libraryID.lowercased, deviceID: device.lowercased, schema: user.schemaName)))
        } catch let error as ProtocolError {
            return Self.response(error)
        } catch let error as ChronicleError {
            return .error(400, error)
        } catch {
            return .unexpected(error)
        }
    }

    private func openSession(_ request: HTTPRequest) -> HTTPResponse {
        guard let seconds = service.limits.accessTokenSeconds else {
            return .error(404, code: .notFound, message: "This server gives no access tokens: send the device token on every request.")
        }
        guard let token = Self.bearer(request) else { return Self.unauthorized() }
        do {
            let (access, _, identity) = try service.accounts.openSession(deviceToken: token, lifetimeSeconds: seconds)
            return .json(201, ProtocolJSON.encode(ProtocolJSON.SessionResult(
                accessToken: access, expiresInSeconds: seconds, libraryID: identity.libraryID.lowercased, deviceID: identity.deviceID.lowercased)))
        } catch {
            return Self.response(error)
        }
    }

    private func push(_ request: HTTPRequest, library: UUID) -> HTTPResponse {
        guard let token = Self.bearer(request) else { return Self.unauthorized() }
        let type = (request.header("content-type") ?? "").split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
        do {
            let segment: Segment
            switch type {
            case SegmentCodec.mediaType: segment = try SegmentCodec.decode(request.body, limits: service.limits.segmentLimits)
            case "application/json": segment = try WireJSON.decode(request.body, limits: service.limits.segmentLimits)
            default:
                return .error(415, code: .unsupportedMediaType,
                              message: "Push a body of type \(SegmentCodec.mediaType) or application/json (got '\(type)').")
            }
            guard segment.libraryID == library else {
                return .error(400, code: .wrongLibrary, message: "The segment is for library \(segment.libraryID.lowercased) but was sent to \(library.lowercased).")
            }
            return .json(200, ProtocolJSON.encode(try service.pushNow(segment, token: token)))
        } catch let error as ProtocolError {
            return Self.response(error)
        } catch let error as ChronicleError {
            let status = error.code == .segmentTooLarge ? 413 : 400
            return .error(status, error)
        } catch {
            return .unexpected(error)
        }
    }

    private func pull(_ request: HTTPRequest, library: UUID, respond: @escaping @Sendable (HTTPResponse) -> Void) {
        guard let token = Self.bearer(request) else { return respond(Self.unauthorized()) }
        // Parsed strictly into any Int64 here; the service refuses values outside its limits
        // with their own codes (bad_cursor, limit_too_large, wait_too_long).
        func integer(_ name: String) throws(ProtocolError) -> Int64? {
            try request.query[name].map { text throws(ProtocolError) in try Self.number(text, WireNumber("the query parameter '\(name)'", .min ... .max)) }
        }
        let accept = request.header("accept") ?? ""
        let json = accept.contains("application/json") && !accept.contains(SegmentCodec.mediaType)
        do {
            let after = try integer("after") ?? 0
            let limit = try integer("limit").map { Int(clamping: $0) }
            let wait = Int(clamping: try integer("wait") ?? 0)
            service.pull(library: library, after: after, limit: limit, waitMilliseconds: wait, token: token) { result in
                switch result {
                case .failure(let error): respond(Self.response(error))
                case .success(let page):
                    // A page that is one sealed segment goes out as the frame stored for it.
                    let body = json ? WireJSON.encode(page.segment) : page.encoded?.frame ?? SegmentCodec.encode(page.segment)
                    var headers: [(String, String)] = [
                        ("Content-Type", json ? "application/json" : SegmentCodec.mediaType),
                        ("Chronicle-Next-Cursor", String(page.nextCursor)),
                        ("Chronicle-More", page.more ? "true" : "false"),
                        ("Chronicle-Head", String(page.head)),
                    ]
                    if let seq = page.snapshotSeq { headers.append(("Chronicle-Snapshot-Seq", String(seq))) }
                    if let op = page.afterOpID { headers.append((PullPage.afterOpHeader, op.lowercased)) }
                    if let incarnation = page.incarnation { headers.append((PullPage.incarnationHeader, incarnation.lowercased)) }
                    if let at = page.stateCarriedOverAt { headers.append((PullPage.stateCarriedOverHeader, String(at))) }
                    respond(HTTPResponse(status: 200, headers: headers, body: body))
                }
            }
        } catch {
            respond(Self.response(error))
        }
    }

    private func snapshot(_ request: HTTPRequest, library: UUID) -> HTTPResponse {
        guard let token = Self.bearer(request) else { return Self.unauthorized() }
        do {
            let (seq, frame) = try service.sharedSnapshotNow(library: library, token: token)
            return HTTPResponse(status: 200, headers: [("Content-Type", SnapshotCodec.mediaType), ("Chronicle-Snapshot-Seq", String(seq))],
                                shared: frame)
        } catch {
            return Self.response(error)
        }
    }

    private func startImage(_ request: HTTPRequest, library: UUID) -> HTTPResponse {
        guard let token = Self.bearer(request) else { return Self.unauthorized() }
        guard let text = request.query["format"], let format = WireNumber("format", 1 ... Int64(Int32.max)).value(text),
              let fingerprint = request.query["schema"], !fingerprint.isEmpty, fingerprint.count <= 256 else {
            return .error(400, code: .badRequest, message: "A start image is asked for with ?format=N (the device's store format) and &schema=F (its schema's fingerprint).")
        }
        do throws(ProtocolError) {
            let (info, bytes) = try service.startImageNow(library: library, token: token, storeFormat: format, schemaFingerprint: fingerprint)
            let etag = "\"\(info.seq)-\(info.imageBytes)-\(info.builtAt)\""
            if let match = request.header("if-match"), match != etag {
                throw ProtocolError(412, .startImageChanged, "Library \(library.lowercased)'s start image was replaced since its first range was sent; fetch it again from the start.")
            }
            var headers = [("Content-Type", StartImageInfo.mediaType), ("Chronicle-Snapshot-Seq", String(info.seq)), ("ETag", etag),
                           ("Accept-Ranges", "bytes")]
            guard let header = Self.rangeHeader(request) else { return HTTPResponse(status: 200, headers: headers, shared: bytes) }
            let asked = try Self.byteRange(header)
            let total = Int64(bytes.count)
            guard asked.start < total else {
                throw ProtocolError(416, .rangeNotSatisfiable, "The start image has \(total) bytes; range \(asked.start)- starts past its end.")
            }
            let end = min(asked.end ?? total - 1, total - 1)
            headers.append(("Content-Range", "bytes \(asked.start)-\(end)/\(total)"))
            let slice = Array(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(bytes.unsafeStorage)[Int(asked.start)...Int(end)]))
            return HTTPResponse(status: 206, headers: headers, body: slice)
        } catch {
            return Self.response(error)
        }
    }

    private func verdict(_ request: HTTPRequest, library: UUID, entity: UUID) -> HTTPResponse {
        guard let token = Self.bearer(request) else { return Self.unauthorized() }
        do {
            return .json(200, ProtocolJSON.encode(try service.verdictNow(library: library, entity: entity, token: token)))
        } catch {
            return Self.response(error)
        }
    }

    private func blobStatus(_ request: HTTPRequest, library: UUID, blob: BlobRef) -> HTTPResponse {
        guard let token = Self.bearer(request) else { return Self.unauthorized() }
        do {
            return .json(200, ProtocolJSON.encode(try service.blobStatusNow(library: library, blob: blob, token: token)))
        } catch {
            return Self.response(error)
        }
    }

    /// `PUT …/blobs/{blob}?offset=N&length=L` (or the length in `Chronicle-Blob-Length`): one chunk.
    private func putBlob(_ request: HTTPRequest, library: UUID, blob: BlobRef) -> HTTPResponse {
        guard let token = Self.bearer(request) else { return Self.unauthorized() }
        do throws(ProtocolError) {
            guard let lengthText = request.query["length"] ?? request.header(BlobLimits.lengthHeader) else {
                throw ProtocolError(400, .blobLengthMissing, "Say the blob's whole length: the query parameter 'length' or the header \(BlobLimits.lengthHeader).")
            }
            // Any Int64 parses; BlobRules.check refuses what no blob can be (bad_blob_length, blob_too_large,
            // chunk_out_of_range) with checked arithmetic.
            let length = try Self.number(lengthText, WireNumber("the blob's length", .min ... .max))
            let offset = try Self.number(request.query["offset"] ?? "0", WireNumber("the query parameter 'offset'", .min ... .max))
            let type = (request.header("content-type") ?? BlobLimits.mediaType).split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
            guard type == BlobLimits.mediaType else {
                throw ProtocolError(415, .unsupportedMediaType, "Send a blob's chunk as \(BlobLimits.mediaType) (got '\(type)').")
            }
            let status = try service.putBlobNow(library: library, blob: blob, length: length, offset: offset, bytes: request.body, token: token)
            return .json(200, ProtocolJSON.encode(status))
        } catch {
            return Self.response(error)
        }
    }

    /// `GET …/blobs/{blob}`, whole (up to `BlobLimits.rangeBytesMax`) or a `Range: bytes=a-b`.
    private func getBlob(_ request: HTTPRequest, library: UUID, blob: BlobRef) -> HTTPResponse {
        guard let token = Self.bearer(request) else { return Self.unauthorized() }
        do throws(ProtocolError) {
            var asked: (start: Int64, end: Int64?)?
            if let header = Self.rangeHeader(request) { asked = try Self.byteRange(header) }
            let offset = asked?.start ?? 0
            // `end - start` cannot overflow (0 ≤ start ≤ end); the + 1 can, for a range to Int64.max.
            let count = asked.flatMap { range in range.end.flatMap { WireNumber.sum($0 - range.start, 1) } }.map { Int(clamping: $0) } ?? Int.max
            let range = try service.blobRangeNow(library: library, blob: blob, offset: offset, count: count, token: token)
            if asked == nil, Int64(range.bytes.count) < range.length {
                throw ProtocolError(400, .rangeRequired, "\(blob) has \(range.length) bytes, more than one answer carries (\(BlobLimits.rangeBytesMax)); ask for it in ranges (Range: bytes=0-\(BlobLimits.rangeBytesMax - 1)).")
            }
            var headers: [(String, String)] = [("Content-Type", BlobLimits.mediaType), ("ETag", "\"\(blob.hex)\""),
                                               ("Accept-Ranges", "bytes"), ("Cache-Control", "private, max-age=31536000, immutable")]
            guard asked != nil else { return HTTPResponse(status: 200, headers: headers, body: range.bytes) }
            let last = range.offset + Int64(range.bytes.count) - 1   // within the blob's length: no overflow
            headers.append(("Content-Range", range.length == 0 ? "bytes */0" : "bytes \(range.offset)-\(last)/\(range.length)"))
            return HTTPResponse(status: 206, headers: headers, body: range.bytes)
        } catch {
            return Self.response(error)
        }
    }

    /// The `Range` header, unless it is absent or empty: an empty one asks for no range, and is
    /// ignored as RFC 9110 §14.2 lets a server ignore a Range it cannot use.
    static func rangeHeader(_ request: HTTPRequest) -> String? {
        guard let header = request.header("range"), !header.trimmingCharacters(in: .whitespaces).isEmpty else { return nil }
        return header
    }

    /// A `Range` header of one range, `bytes=a-b` or `bytes=a-` (suffix and multiple ranges are refused).
    static func byteRange(_ header: String) throws(ProtocolError) -> (start: Int64, end: Int64?) {
        let text = header.trimmingCharacters(in: .whitespaces)
        // Not a range this API serves: 416 `bad_range` (RFC 9110 lets a server ignore it instead,
        // and serving a whole blob for a mistyped range is the worse answer). A well-formed range
        // that starts past the end is 416 `range_not_satisfiable`, answered where the length is known.
        let bad = ProtocolError(416, .badRange, "Ask for one range as 'bytes=<first>-<last>' or 'bytes=<first>-'; got '\(text.prefix(60))'.")
        guard text.lowercased().hasPrefix("bytes=") else { throw bad }
        let spec = text.dropFirst(6)
        let sides = spec.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        let position = WireNumber("a range's position", 0 ... .max)
        guard sides.count == 2, !spec.contains(","), let start = position.value(sides[0]) else { throw bad }
        if sides[1].isEmpty { return (start, nil) }
        // A last byte past Int64 is past the end of anything: read as "to the end".
        if !sides[1].isEmpty, sides[1].utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
           Int64(sides[1]) == nil { return (start, nil) }
        guard let end = position.value(sides[1]), end >= start else { throw bad }
        return (start, end)
    }

    // MARK: - Helpers

    static func badBlob(_ text: String) -> HTTPResponse {
        .error(400, code: .badBlobRef, message: BlobRef.badRefMessage(text))
    }

    /// The token of `Authorization: Bearer <token>`. The scheme is matched case-insensitively
    /// (RFC 9110 §11.1) and may be followed by spaces or tabs; a token is visible ASCII only, so
    /// one with a control character or a space inside is no token.
    static func bearer(_ request: HTTPRequest) -> String? {
        guard let header = request.header("authorization") else { return nil }
        let utf8 = Array(header.utf8)
        guard utf8.count > 7, String(decoding: utf8[0..<6], as: UTF8.self).lowercased() == "bearer",
              utf8[6] == UInt8(ascii: " ") || utf8[6] == UInt8(ascii: "\t") else { return nil }
        let token = utf8[7...].drop { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }
        let trimmed = token.reversed().drop { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }.reversed()
        guard !trimmed.isEmpty, trimmed.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { return nil }
        return String(decoding: trimmed, as: UTF8.self)
    }

    /// A number from the request, or 400 `bad_query` naming it and its range.
    static func number(_ text: String, _ bound: WireNumber) throws(ProtocolError) -> Int64 {
        do { return try bound.parse(text) } catch { throw ProtocolError(400, .badQuery, error.message) }
    }

    static func response(_ error: ProtocolError) -> HTTPResponse {
        var response = HTTPResponse.error(error.status, code: error.code.rawValue, message: error.message)
        response.internalDetail = error.detail
        if let retry = error.retryAfterSeconds { response.headers.append(("Retry-After", String(Int(retry.rounded(.up))))) }
        if let reused = error.reusedDeviceSeq { response.headers.append((ProtocolError.reusedDeviceSeqHeader, String(reused))) }
        if let last = error.lastDeviceSeq { response.headers.append((ProtocolError.lastDeviceSeqHeader, String(last))) }
        if let head = error.serverHead { response.headers.append((ProtocolError.headHeader, String(head))) }
        if let op = error.afterOpID { response.headers.append((PullPage.afterOpHeader, op.lowercased)) }
        if error.status == 401 { response.headers.append(("WWW-Authenticate", "Bearer")) }
        return response
    }

    static func unauthorized() -> HTTPResponse {
        response(ProtocolError(401, .unauthorized, "Send 'Authorization: Bearer <token>'; get a token with `chronicle login`."))
    }

    static func badID(_ text: String) -> HTTPResponse {
        .error(400, code: .badId, message: "'\(text.prefix(64))' is not a UUID.")
    }

    static func methodNotAllowed(_ method: String, allowed: String) -> HTTPResponse {
        var response = HTTPResponse.error(405, code: .methodNotAllowed, message: "\(method) is not allowed here; use \(allowed).")
        response.headers.append(("Allow", allowed))
        return response
    }
}
