import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// An answer read off the socket: the status and headers as sent, and the body.
struct RawAnswer: Sendable {
    var status: Int
    var headers: [(String, String)]
    var body: [UInt8]

    func header(_ name: String) -> String? { headers.first { $0.0.lowercased() == name.lowercased() }?.1 }

    var errorCode: String? {
        guard let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any],
              let error = object["error"] as? [String: Any] else { return nil }
        return error["code"] as? String
    }
}

/// One TCP connection to 127.0.0.1 over POSIX sockets (URLSession cannot send a malformed
/// request), with a deadline on every read so that a server that never answers is seen as a
/// hang, not waited for.
final class RawHTTPConnection {
    enum Read { case answer(RawAnswer), closed, timedOut, malformed(String) }
    struct Failure: Error, CustomStringConvertible { let description: String }

    private let fd: Int32
    private var received: [UInt8] = []
    private var eof = false

    init(port: UInt16) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket: errno \(errno)") }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let status = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard status == 0 else {
            let code = errno
            close(fd)
            throw Failure(description: "connect: errno \(code)")
        }
    }

    deinit { close(fd) }

    /// Sends all of `bytes`; false if the server closed (it may answer and close before reading a body).
    @discardableResult
    func write(_ bytes: [UInt8]) -> Bool {
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { return false }
            sent += n
        }
        return true
    }

    /// Tells the server nothing more is coming: a request whose body is shorter than announced
    /// then ends at once, and the server must answer or close rather than wait.
    func finishSending() { shutdown(fd, Int32(SHUT_WR)) }

    /// The next final answer (interim 1xx ones are skipped), within `deadline`.
    func readAnswer(until deadline: ContinuousClock.Instant, bodyless: Bool = false) -> Read {
        while true {
            switch parse(bodyless: bodyless) {
            case .answer(let answer) where (100..<200).contains(answer.status): continue
            case .answer(let answer): return .answer(answer)
            case .malformed(let why): return .malformed(why)
            case .closed, .timedOut, nil: break
            }
            if eof { return received.isEmpty ? .closed : .malformed("closed inside an answer (\(received.count) bytes)") }
            guard fill(until: deadline) else { return .timedOut }
        }
    }

    /// Reads until the server closes, within `deadline`; false if it did not.
    func drainUntilClosed(until deadline: ContinuousClock.Instant) -> Bool {
        while !eof { guard fill(until: deadline) else { return false } }
        return true
    }

    private func fill(until deadline: ContinuousClock.Instant) -> Bool {
        let left = ContinuousClock.now.duration(to: deadline)
        guard left > .zero else { return false }
        var ready = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let milliseconds = Int32(clamping: left.components.seconds * 1_000 + left.components.attoseconds / 1_000_000_000_000_000)
        guard poll(&ready, 1, max(milliseconds, 1)) > 0 else { return ContinuousClock.now < deadline }
        var buffer = [UInt8](repeating: 0, count: 65_536)
        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n <= 0 { eof = true } else { received.append(contentsOf: buffer[0..<n]) }
        return true
    }

    /// One answer from the front of what was received, removed from it; nil if incomplete.
    private func parse(bodyless: Bool) -> Read? {
        guard let end = Self.headEnd(in: received) else {
            return received.count > 1 << 20 ? .malformed("a head over 1 MiB") : nil
        }
        let lines = String(decoding: received[..<end], as: UTF8.self).components(separatedBy: "\r\n")
        let statusParts = lines[0].split(separator: " ", maxSplits: 2)
        guard statusParts.count >= 2, statusParts[0].hasPrefix("HTTP/1."), let status = Int(statusParts[1]) else {
            return .malformed("status line '\(lines[0].prefix(80))'")
        }
        let headers = lines.dropFirst().compactMap { line -> (String, String)? in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        let answer = RawAnswer(status: status, headers: headers, body: [])
        let start = end + 4
        if bodyless || (100..<200).contains(status) || status == 204 || status == 304 {
            received.removeFirst(start)
            return .answer(answer)
        }
        if answer.header("transfer-encoding")?.lowercased().contains("chunked") == true {
            return .malformed("a chunked answer (the server sends lengths)")
        }
        guard let lengthText = answer.header("content-length") else {
            // Without a length the body runs to the close.
            guard eof else { return nil }
            var whole = answer
            whole.body = Array(received[start...])
            received.removeAll()
            return .answer(whole)
        }
        guard let length = Int(lengthText), length >= 0 else { return .malformed("Content-Length '\(lengthText)'") }
        guard received.count >= start + length else { return nil }
        var whole = answer
        whole.body = Array(received[start..<(start + length)])
        received.removeFirst(start + length)
        return .answer(whole)
    }

    /// Where the first CRLFCRLF begins.
    private static func headEnd(in bytes: [UInt8]) -> Int? {
        bytes.withUnsafeBufferPointer { buffer -> Int? in
            guard buffer.count >= 4 else { return nil }
            for i in 0...(buffer.count - 4) where buffer[i] == 13 && buffer[i + 1] == 10 && buffer[i + 2] == 13 && buffer[i + 3] == 10 {
                return i
            }
            return nil
        }
    }
}
