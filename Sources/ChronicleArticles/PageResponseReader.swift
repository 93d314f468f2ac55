import Foundation

/// Reads the answer to one HTTP/1.1 `GET` (RFC 9112) as its bytes arrive: the status line, the
/// header fields, then the body however it is delimited (`Content-Length`, `chunked`, or the
/// connection's close). No I/O: `PageConnection` feeds it what it reads from the socket.
///
/// ```swift
/// var reader = PageResponseReader(bodyBytesMax: 5 << 20)
/// try reader.feed(bytes)          // as often as bytes arrive
/// if let head = reader.head { … } // the status and fields, once they are whole
/// try reader.finish()             // at the end of the stream: a body cut short is an error
/// ```
///
/// Every length is capped (the head, a chunk-size line, the body), so a server that sends
/// without end costs at most those bytes. Interim answers (`1xx`) are skipped.
struct PageResponseReader {
    /// The most bytes of the status line and header fields together.
    static let headBytesMax = 64 << 10
    /// The most bytes of one chunk-size line (with its extensions) or trailer line.
    static let chunkLineBytesMax = 4 << 10

    struct Head: Equatable {
        var status: Int
        /// Field names lowercased; a name given more than once has its values joined by ", ".
        var fields: [String: String]

        func field(_ name: String) -> String? { fields[name.lowercased()] }
    }

    enum Failure: Error, Equatable {
        /// Bytes that are not an HTTP/1.1 answer; the sentence says what was wrong.
        case malformed(String)
        /// The body goes past `bodyBytesMax` (or says it will).
        case bodyTooLarge
        /// The stream ended before the body did.
        case truncated
    }

    private enum Framing { case length(Int), chunked, untilClose, none }
    private enum State {
        case head
        case body(Framing)
        case chunkSize
        case chunkData(remaining: Int)
        case chunkEnd
        case trailers
        case done
    }

    let bodyBytesMax: Int
    private(set) var head: Head?
    private(set) var body: [UInt8] = []
    private var state = State.head
    private var pending: [UInt8] = []
    /// How far into `pending` the end of the head has been looked for (bytes that arrive one
    /// at a time are not searched again from the start each time).
    private var headSearched = 0

    init(bodyBytesMax: Int) {
        self.bodyBytesMax = bodyBytesMax
    }

    /// The body has ended as its framing says (not yet for one delimited by the close).
    var isComplete: Bool {
        if case .done = state { return true }
        return false
    }

    mutating func feed<Bytes: Collection>(_ bytes: Bytes) throws(Failure) where Bytes.Element == UInt8 {
        guard !isComplete else { return }
        pending.append(contentsOf: bytes)
        try advance()
    }

    /// The stream ended: a body delimited by the close is whole now; any other one cut short is `.truncated`.
    mutating func finish() throws(Failure) {
        switch state {
        case .done: return
        case .body(.untilClose): state = .done
        default: throw .truncated
        }
    }

    // MARK: - The state machine

    private mutating func advance() throws(Failure) {
        var start = 0
        defer {
            pending.removeFirst(start)
            headSearched = max(0, headSearched - start)
        }
        while true {
            switch state {
            case .head:
                guard let end = Self.headEnd(pending, from: max(start, headSearched)) else {
                    if pending.count - start > Self.headBytesMax { throw .malformed("the answer's header is over \(Self.headBytesMax >> 10) KiB") }
                    headSearched = max(start, pending.count - 2)
                    return
                }
                guard end.bodyStart - start <= Self.headBytesMax else { throw .malformed("the answer's header is over \(Self.headBytesMax >> 10) KiB") }
                let parsed = try Self.parseHead(pending[start..<end.headEnd])
                start = end.bodyStart
                headSearched = start
                // Interim answers (100 Continue, 103 Early Hints) precede the real one.
                if (100..<200).contains(parsed.status) {
                    guard parsed.status != 101 else { throw .malformed("the server switched protocols") }
                    continue
                }
                head = parsed
                state = .body(try Self.framing(parsed, bodyBytesMax: bodyBytesMax))
            case .body(.none):
                state = .done
            case .body(.length(let length)):
                let take = min(length - body.count, pending.count - start)
                body.append(contentsOf: pending[start..<(start + take)])
                start += take
                if body.count == length { state = .done }
                return
            case .body(.untilClose):
                let count = pending.count - start
                guard body.count + count <= bodyBytesMax else { throw .bodyTooLarge }
                body.append(contentsOf: pending[start...])
                start = pending.count
                return
            case .body(.chunked), .chunkSize:
                guard let line = try line(from: &start) else { return }
                let size = try Self.chunkSize(line)
                guard size <= bodyBytesMax - body.count else { throw .bodyTooLarge }
                state = size == 0 ? .trailers : .chunkData(remaining: size)
            case .chunkData(let remaining):
                let take = min(remaining, pending.count - start)
                body.append(contentsOf: pending[start..<(start + take)])
                start += take
                guard take == remaining else { state = .chunkData(remaining: remaining - take); return }
                state = .chunkEnd
            case .chunkEnd:
                guard let line = try line(from: &start) else { return }
                guard line.isEmpty else { throw .malformed("a chunk is longer than its size says") }
                state = .chunkSize
            case .trailers:
                guard let line = try line(from: &start) else { return }
                if line.isEmpty { state = .done }
            case .done:
                return
            }
        }
    }

    /// The next line (without its CRLF or bare LF) from `start`, moving `start` past it; nil until one is whole.
    private func line(from start: inout Int) throws(Failure) -> ArraySlice<UInt8>? {
        guard let newline = pending[start...].firstIndex(of: 0x0A) else {
            if pending.count - start > Self.chunkLineBytesMax { throw .malformed("a chunk line is over \(Self.chunkLineBytesMax >> 10) KiB") }
            return nil
        }
        guard newline - start <= Self.chunkLineBytesMax else { throw .malformed("a chunk line is over \(Self.chunkLineBytesMax >> 10) KiB") }
        var end = newline
        if end > start, pending[end - 1] == 0x0D { end -= 1 }
        let line = pending[start..<end]
        start = newline + 1
        return line
    }

    /// Where the head ends: the blank line after the fields (CRLF CRLF, or bare LFs).
    private static func headEnd(_ bytes: [UInt8], from start: Int) -> (headEnd: Int, bodyStart: Int)? {
        var index = start
        while let newline = bytes[index...].firstIndex(of: 0x0A) {
            let next = newline + 1
            if next < bytes.count, bytes[next] == 0x0A { return (newline, next + 1) }
            if next + 1 < bytes.count, bytes[next] == 0x0D, bytes[next + 1] == 0x0A { return (newline, next + 2) }
            if next >= bytes.count || (bytes[next] == 0x0D && next + 1 >= bytes.count) { return nil }
            index = next
        }
        return nil
    }

    private static func parseHead(_ bytes: ArraySlice<UInt8>) throws(Failure) -> Head {
        var lines = bytes.split(separator: 0x0A, omittingEmptySubsequences: false).map { line -> ArraySlice<UInt8> in
            line.last == 0x0D ? line.dropLast() : line
        }
        guard !lines.isEmpty else { throw .malformed("the answer is empty") }
        let statusLine = lines.removeFirst()
        // HTTP/1.x SP 3DIGIT [SP reason]
        let prefix = Array("HTTP/1.".utf8)
        guard statusLine.count >= 12, Array(statusLine.prefix(7)) == prefix,
              let minor = statusLine.dropFirst(7).first, minor == 0x30 || minor == 0x31,
              statusLine[statusLine.startIndex + 8] == 0x20 else {
            throw .malformed("the answer does not begin with an HTTP/1.0 or HTTP/1.1 status line")
        }
        let digits = statusLine[(statusLine.startIndex + 9)..<(statusLine.startIndex + 12)]
        guard digits.allSatisfy({ (0x30...0x39).contains($0) }), statusLine.count == 12 || statusLine[statusLine.startIndex + 12] == 0x20 else {
            throw .malformed("the answer's status is not three digits")
        }
        let status = digits.reduce(0) { $0 * 10 + Int($1 - 0x30) }
        guard status >= 100 else { throw .malformed("the answer's status \(status) is not one HTTP knows") }

        var fields: [String: String] = [:]
        for line in lines {
            guard let first = line.first else { continue }
            if first == 0x20 || first == 0x09 { throw .malformed("the answer folds a header field over lines") }
            guard let colon = line.firstIndex(of: 0x3A), colon > line.startIndex else {
                throw .malformed("a header line of the answer has no field name")
            }
            let name = line[..<colon]
            guard name.allSatisfy(Self.isTokenByte) else { throw .malformed("a header field name of the answer is not a token") }
            let key = String(decoding: name, as: UTF8.self).lowercased()
            let value = String(decoding: line[(colon + 1)...], as: UTF8.self).trimmingCharacters(in: [" ", "\t"])
            fields[key] = fields[key].map { $0 + ", " + value } ?? value
        }
        return Head(status: status, fields: fields)
    }

    /// How the body is delimited (RFC 9112, 6.3), or why it cannot be read.
    private static func framing(_ head: Head, bodyBytesMax: Int) throws(Failure) -> Framing {
        if head.status == 204 || head.status == 304 { return .none }
        if let coding = head.field("transfer-encoding") {
            let codings = coding.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            guard codings == ["chunked"] else {
                throw .malformed("the answer's transfer coding '\(coding.prefix(100))' is not one the fetcher reads (only chunked)")
            }
            return .chunked
        }
        if let length = head.field("content-length") {
            // "12, 12" (a repeated field) is one length; differing ones are refused.
            let values = Set(length.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) })
            guard values.count == 1, let text = values.first, !text.isEmpty, text.utf8.count <= 18,
                  text.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let bytes = Int(text) else {
                throw .malformed("the answer's Content-Length '\(length.prefix(100))' is not one number")
            }
            guard bytes <= bodyBytesMax else { throw .bodyTooLarge }
            return bytes == 0 ? .none : .length(bytes)
        }
        return .untilClose
    }

    private static func chunkSize(_ line: ArraySlice<UInt8>) throws(Failure) -> Int {
        let digits = line.prefix { $0 != 0x3B && $0 != 0x20 && $0 != 0x09 }   // before any ";extension"
        guard !digits.isEmpty, digits.count <= 15 else { throw .malformed("a chunk size is not a hexadecimal number") }
        var size = 0
        for byte in digits {
            let value: Int
            switch byte {
            case 0x30...0x39: value = Int(byte - 0x30)
            case 0x41...0x46: value = Int(byte - 0x41 + 10)
            case 0x61...0x66: value = Int(byte - 0x61 + 10)
            default: throw .malformed("a chunk size is not a hexadecimal number")
            }
            size = size << 4 | value
        }
        return size
    }

    /// RFC 9110 `tchar`.
    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: return true
        case 0x21, 0x23, 0x24, 0x25, 0x26, 0x27, 0x2A, 0x2B, 0x2D, 0x2E, 0x5E, 0x5F, 0x60, 0x7C, 0x7E: return true
        default: return false
        }
    }
}
