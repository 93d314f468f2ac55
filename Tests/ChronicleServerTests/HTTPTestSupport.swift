import ChronicleCore
import ChronicleStore
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization
import Testing
@testable import ChronicleServer
#if canImport(Glibc)
import Glibc
#endif

// What the HTTP server tests share: handlers, a client over URLSession and one over raw sockets.

/// Answers at once with the request echoed: the body as the body, the rest in
/// headers. `?status=N` picks the status.
final class Echo: HTTPHandler {
    let calls = Atomic<Int>(0)

    func handle(_ request: HTTPRequest, respond: @escaping @Sendable (HTTPResponse) -> Void) {
        calls.add(1, ordering: .relaxed)
        let query = request.query.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: "&")
        respond(HTTPResponse(status: request.query["status"].flatMap(Int.init) ?? 200,
                             headers: [("Content-Type", "application/octet-stream"),
                                       ("X-Method", request.method), ("X-Path", request.path), ("X-Query", query),
                                       ("X-Custom", request.header("X-CUSTOM") ?? ""),
                                       ("X-Remote", request.remoteAddress ?? "")],
                             body: request.body))
    }
}

/// Hands every request to a closure that answers it however and whenever.
struct LongPoll: HTTPHandler {
    let body: @Sendable (HTTPRequest, @escaping @Sendable (HTTPResponse) -> Void) -> Void
    func handle(_ request: HTTPRequest, respond: @escaping @Sendable (HTTPResponse) -> Void) {
        body(request, respond)
    }
}

/// Parks every request (except `?now`) until told to answer.
final class Parker: HTTPHandler {
    private let parked = Locked<[(HTTPRequest, @Sendable (HTTPResponse) -> Void)]>([])

    var parkedCount: Int { parked.withLock { $0.count } }

    func handle(_ request: HTTPRequest, respond: @escaping @Sendable (HTTPResponse) -> Void) {
        if request.query["now"] != nil { return respond(HTTPResponse(status: 200)) }
        parked.withLock { $0.append((request, respond)) }
    }

    func answerAll(_ answer: (HTTPRequest) -> HTTPResponse) {
        let all = parked.withLock { parked in
            defer { parked = [] }
            return parked
        }
        for (request, respond) in all { respond(answer(request)) }
    }
}

// MARK: - Client helpers

struct Reply: Sendable {
    var status: Int
    var headers: [String: String]
    var body: [UInt8]
    func header(_ name: String) -> String? { headers[name.lowercased()] }
}

let session: URLSession = {
    let configuration = URLSessionConfiguration.ephemeral
    configuration.httpMaximumConnectionsPerHost = 256
    configuration.timeoutIntervalForRequest = 20
    configuration.timeoutIntervalForResource = 40
    return URLSession(configuration: configuration)
}()

func configuration(_ adjust: (inout HTTPServer.Configuration) -> Void = { _ in }) -> HTTPServer.Configuration {
    var configuration = HTTPServer.Configuration()
    adjust(&configuration)
    return configuration
}

func withServer(handler: any HTTPHandler, configure: (inout HTTPServer.Configuration) -> Void = { _ in },
                        _ body: (HTTPServer) async throws -> Void) async throws {
    let server = try HTTPServer(configuration: configuration(configure), handler: handler)
    do {
        try await body(server)
    } catch {
        server.stop()
        throw error
    }
    server.stop()
    #expect(server.liveRequestCount == 0)
}

func send(_ server: HTTPServer, _ pathAndQuery: String, method: String = "GET",
                  headers: [String: String] = [:], body: [UInt8]? = nil) async throws -> Reply {
    var request = URLRequest(url: URL(string: "http://127.0.0.1:\(server.port)\(pathAndQuery)")!)
    request.httpMethod = method
    request.timeoutInterval = 20
    for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
    if let body { request.httpBody = Data(body) }
    let (data, response) = try await session.data(for: request)
    let http = try #require(response as? HTTPURLResponse)
    var replyHeaders: [String: String] = [:]
    for (name, value) in http.allHeaderFields {
        if let name = name as? String, let value = value as? String { replyHeaders[name.lowercased()] = value }
    }
    return Reply(status: http.statusCode, headers: replyHeaders, body: Array(data))
}

func errorCode(_ body: [UInt8]) -> String? {
    let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: [String: String]]
    return object?["error"]?["code"]
}

func eventually(within limit: Duration = .seconds(10), _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + limit
    while ContinuousClock.now < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(5))
    }
    return condition()
}

/// What URLSession cannot send: chunked bodies written by hand, a head whose
/// body never follows, bytes that are not HTTP. One request per connection;
/// reads until the server closes or the response's Content-Length is in.
enum RawHTTPClient {
    struct Failure: Error { let what: String }

    static func exchange(port: UInt16, _ request: String) throws -> Reply {
        try exchange(port: port, bytes: Array(request.utf8))
    }

    /// As `exchange(port:_:)`, for bytes that are not text (a TLS handshake, a NUL).
    static func exchange(port: UInt16, bytes: [UInt8]) throws -> Reply {
        let fd = try connected(port: port)
        defer { close(fd) }

        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { break } // the server may answer and close before reading it all
            sent += n
        }

        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            if let reply = parse(received), reply.complete { return reply.reply }
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            received.append(contentsOf: buffer[0..<n])
        }
        guard let reply = parse(received) else { throw Failure(what: "no response") }
        return reply.reply
    }

    /// A socket connected to 127.0.0.1:port, with 10 s send and receive timeouts.
    static func connected(port: UInt16) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(what: "socket") }
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let status = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard status == 0 else {
            close(fd)
            throw Failure(what: "connect")
        }
        return fd
    }

    /// One connection kept open across requests, for what happens between them.
    final class Connection {
        private let fd: Int32
        private var received: [UInt8] = []

        init(port: UInt16) throws { fd = try RawHTTPClient.connected(port: port) }
        deinit { close(fd) }

        func send(_ text: String) throws {
            let bytes = Array(text.utf8)
            var sent = 0
            while sent < bytes.count {
                let n = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                guard n > 0 else { throw Failure(what: "send (errno \(errno))") }
                sent += n
            }
        }

        /// Ends this side's stream (the server reads its end); answers can still be read.
        func halfClose() { _ = shutdown(fd, Int32(SHUT_WR)) }

        /// The next whole response, or nil if none is complete within the wait.
        func receive(waitingMilliseconds wait: Int) throws -> Reply? {
            let deadline = ContinuousClock.now + .milliseconds(wait)
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                if let (reply, complete, used) = RawHTTPClient.parse(received), complete {
                    received.removeFirst(used)
                    return reply
                }
                let left = ContinuousClock.now.duration(to: deadline)
                guard left > .zero else { return nil }
                var ready = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                let milliseconds = Int32(left.components.seconds * 1_000 + left.components.attoseconds / 1_000_000_000_000_000)
                guard poll(&ready, 1, max(milliseconds, 1)) > 0 else { continue }
                let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                guard n > 0 else { throw Failure(what: "the server closed the connection") }
                received.append(contentsOf: buffer[0..<n])
            }
        }
    }

    /// Sends a request and closes the connection without reading anything.
    static func sendAndHangUp(port: UInt16, _ request: String) throws {
        let fd = try connected(port: port)
        let bytes = Array(request.utf8)
        _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        close(fd)
    }

    /// The response at the start of `bytes`, whether all its body is in, and
    /// how many bytes it takes.
    static func parse(_ bytes: [UInt8]) -> (reply: Reply, complete: Bool, used: Int)? {
        let separator = Array("\r\n\r\n".utf8)
        guard let end = bytes.indices.dropLast(3).first(where: { Array(bytes[$0..<$0 + 4]) == separator })
        else { return nil }
        let head = String(decoding: bytes[..<end], as: UTF8.self).components(separatedBy: "\r\n")
        let statusLine = head[0].split(separator: " ")
        guard statusLine.count >= 2, let status = Int(statusLine[1]) else { return nil }
        var headers: [String: String] = [:]
        for line in head.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        let body = Array(bytes[(end + 4)...])
        let length = headers["content-length"].flatMap(Int.init)
        let kept = Array(body.prefix(length ?? body.count))
        return (Reply(status: status, headers: headers, body: kept), length.map { body.count >= $0 } ?? false,
                end + 4 + kept.count)
    }
}
