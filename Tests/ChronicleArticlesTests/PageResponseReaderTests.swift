@testable import ChronicleArticles
import Testing

/// The article fetcher's reader of HTTP/1.1 answers, fed every answer three ways: whole, a byte
/// at a time, and in pieces of seven bytes; each way must read the same head and body, or fail
/// the same way.
@Suite struct PageResponseReaderTests {
    typealias Outcome = PageResponseContract.Outcome

    static func read(status: Int, fields: [String: String], body: String) -> Outcome {
        .read(status: status, fields: fields, body: Array(body.utf8))
    }

    static func read(_ text: String, bodyBytesMax: Int = 1_000, pieces: Int) -> Outcome {
        PageResponseContract.outcome(Array(text.utf8), bodyBytesMax: bodyBytesMax, pieces: pieces)
    }

    /// The same outcome however the bytes arrive.
    static func outcome(_ text: String, bodyBytesMax: Int = 1_000) -> Outcome {
        let whole = read(text, bodyBytesMax: bodyBytesMax, pieces: Int.max / 2)
        #expect(read(text, bodyBytesMax: bodyBytesMax, pieces: 1) == whole, "byte at a time")
        #expect(read(text, bodyBytesMax: bodyBytesMax, pieces: 7) == whole, "in pieces of seven")
        return whole
    }

    @Test func aBodyOfAGivenLengthIsReadAndWhatFollowsItIgnored() {
        #expect(Self.outcome("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 5\r\n\r\nhello and more")
            == Self.read(status: 200, fields: ["content-type": "text/html", "content-length": "5"], body: "hello"))
    }

    @Test func aChunkedBodyWithExtensionsAndTrailersIsJoined() {
        let text = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4;name=value\r\nWiki\r\n6\r\npedia \r\nE\r\nin \r\n\r\nchunks.\r\n0\r\nExpires: never\r\n\r\n"
        #expect(Self.outcome(text) == Self.read(status: 200, fields: ["transfer-encoding": "chunked"], body: "Wikipedia in \r\n\r\nchunks."))
    }

    @Test func aBodyWithoutLengthEndsWithTheConnection() {
        #expect(Self.outcome("HTTP/1.0 200 OK\nContent-Type: text/html\n\n<p>bare line feeds</p>")
            == Self.read(status: 200, fields: ["content-type": "text/html"], body: "<p>bare line feeds</p>"))
    }

    @Test func interimAnswersAreSkippedAndRepeatedFieldsJoined() {
        let text = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\nHTTP/1.1 204 No Content\r\nVary: a\r\nVary: b\r\n\r\n"
        #expect(Self.outcome(text) == Self.read(status: 204, fields: ["vary": "a, b"], body: ""))
        #expect(Self.outcome("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc")
            == Self.read(status: 200, fields: ["content-length": "3, 3"], body: "abc"))
    }

    @Test func aBodyPastTheCapIsRefusedHoweverItIsFramed() {
        #expect(Self.outcome("HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n0123456789a", bodyBytesMax: 10) == .failed(.bodyTooLarge))
        #expect(Self.outcome("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\n012345\r\n5\r\n6789a\r\n0\r\n\r\n", bodyBytesMax: 10)
            == .failed(.bodyTooLarge))
        #expect(Self.outcome("HTTP/1.1 200 OK\r\n\r\n0123456789a", bodyBytesMax: 10) == .failed(.bodyTooLarge))
        #expect(Self.outcome("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFF\r\n", bodyBytesMax: 10) == .failed(.bodyTooLarge))
    }

    @Test func anAnswerCutShortIsTruncated() {
        #expect(Self.outcome("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort") == .failed(.truncated))
        #expect(Self.outcome("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabc") == .failed(.truncated))
        #expect(Self.outcome("HTTP/1.1 200 OK\r\nContent-Type: text/") == .failed(.truncated))
        #expect(Self.outcome("") == .failed(.truncated))
    }

    @Test func bytesThatAreNotAnHTTPAnswerAreMalformed() {
        let cases = [
            "SSH-2.0-OpenSSH_9.2\r\n\r\n",
            "HTTP/2 200\r\n\r\n",
            "HTTP/1.1 20 OK\r\n\r\n",
            "HTTP/1.1 2000 OK\r\n\r\n",
            "HTTP/1.1 099 Low\r\n\r\n",
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n",
            "HTTP/1.1 200 OK\r\nX-Folded: a\r\n  continued\r\n\r\n",
            "HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
            "HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 3, 4\r\n\r\nabcd",
            "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 0x10\r\n\r\n",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcdef\r\n0\r\n\r\n",
        ]
        for text in cases {
            guard case .failed(.malformed) = Self.outcome(text) else {
                Issue.record("read as an answer: \(text.debugDescription)")
                continue
            }
        }
    }

    @Test func aHeadOrAChunkLineWithoutEndIsRefusedAtItsCap() {
        let endless = "HTTP/1.1 200 OK\r\nX-Long: " + String(repeating: "a", count: PageResponseReader.headBytesMax + 10)
        #expect(Self.read(endless, pieces: 4_096) == .failed(.malformed("the answer's header is over 64 KiB")))
        let line = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;" + String(repeating: "x", count: PageResponseReader.chunkLineBytesMax + 10)
        #expect(Self.read(line, pieces: 512) == .failed(.malformed("a chunk line is over 4 KiB")))
    }
}
