@testable import ChronicleArticles
import Foundation
import Testing

/// How the fetcher reaches a saved page (`ArticlePage.fetch`), against real servers on
/// 127.0.0.1, plain and TLS. Host names come from `resolveOverrides` and end in `.invalid` or
/// `.test`, which no DNS server answers: a fetch that reads a page connected to the address the
/// fetcher looked up and checked, and asked nobody else.
@Suite(.serialized) struct ArticlePageTests {
    static let html = "<html><title>Pinned</title><p>read from the address that was checked</p></html>"

    static func answer(_ head: String, body: String = html) -> [UInt8] {
        Array((head + "\r\n\r\n" + body).utf8)
    }

    static func policy(_ overrides: [String: String], private allowed: Bool = true) -> ArticleFetchPolicy {
        var policy = ArticleFetchPolicy()
        policy.allowsPrivateAddresses = allowed
        policy.resolveOverrides = overrides
        policy.timeoutSeconds = 10
        return policy
    }

    @Test func theFetcherConnectsToTheAddressItCheckedAndAsksNoResolverAgain() throws {
        let server = try PageServer { _ in
            Self.answer("HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=ISO-8859-1\r\nContent-Length: \(Self.html.utf8.count)")
        }
        defer { server.stop() }
        let page = ArticlePage.fetch("http://pages.invalid:\(server.port)/zeppelin?from=test#part",
                                     policy: Self.policy(["pages.invalid": "127.0.0.1"]))
        #expect(page == .page(bytes: Array(Self.html.utf8), charset: "iso-8859-1",
                              finalURL: "http://pages.invalid:\(server.port)/zeppelin?from=test#part"))
        let head = try #require(server.requests.first)
        #expect(head.hasPrefix("GET /zeppelin?from=test HTTP/1.1\r\n"), "\(head)")
        #expect(head.contains("\r\nHost: pages.invalid:\(server.port)\r\n") && head.contains("\r\nAccept-Encoding: identity\r\n"), "\(head)")
    }

    /// The check is made on the addresses the connection will use: one that is not public is
    /// refused before anything connects, whatever name led to it.
    @Test func anAddressThatIsNotPublicIsRefusedBeforeAnythingConnects() throws {
        let server = try PageServer { _ in Self.answer("HTTP/1.1 200 OK\r\nContent-Type: text/html") }
        defer { server.stop() }
        for address in ["127.0.0.1", "10.1.2.3", "169.254.169.254", "::1", "::ffff:127.0.0.1", "fd00::1", "::127.0.0.1",
                        "64:ff9b::a9fe:a9fe", "2002:c0a8:101::1", "2001:0:4136:e378::1", "fec0::1"] {
            let page = ArticlePage.fetch("http://rebound.invalid:\(server.port)/", policy: Self.policy(["rebound.invalid": address], private: false))
            guard case .failed(permanent: true, let reason) = page else {
                Issue.record("\(address): \(page)")
                continue
            }
            #expect(reason.contains("non-public address"), "\(address): \(reason)")
        }
        #expect(server.requests.isEmpty)
        // Public addresses, IPv4 inside IPv6 included, pass the same check.
        for address in ["93.184.216.34", "2606:2800:220:1::1", "64:ff9b::5db8:d822", "2002:5db8:d822::1", "::ffff:8.8.8.8"] {
            var bytes = in6_addr(), v4 = in_addr()
            let reachable = inet_pton(AF_INET6, address, &bytes) == 1
                ? PublicAddress.isPublic(v6: withUnsafeBytes(of: bytes) { Array($0) })
                : inet_pton(AF_INET, address, &v4) == 1 && PublicAddress.isPublic(v4: UInt32(bigEndian: v4.s_addr))
            #expect(reachable, "\(address)")
        }
        #expect(ArticlePage.fetch("http://bad.invalid/", policy: Self.policy(["bad.invalid": "not-an-address"]))
            == .failed(permanent: true, reason: "the address given for bad.invalid is not a numeric address"))
    }

    @Test func anHTTPSPageIsReadUnderACertificateValidForItsHost() throws {
        let certificate = try TestCertificate.make(for: "pages.test")
        let server = try PageServer(certificate: certificate) { _ in
            Self.answer("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked",
                        body: "5\r\n<p>in\r\n11\r\n chunks, over TLS\r\n0\r\n\r\n")
        }
        defer { server.stop() }
        var policy = Self.policy(["pages.test": "127.0.0.1"])
        policy.trustedCertificatesFile = certificate.certificateFile
        let page = ArticlePage.fetch("https://pages.test:\(server.port)/secure", policy: policy)
        #expect(page == .page(bytes: Array("<p>in chunks, over TLS".utf8), charset: nil, finalURL: "https://pages.test:\(server.port)/secure"))
        #expect(server.requests.first?.hasPrefix("GET /secure HTTP/1.1\r\nHost: pages.test:\(server.port)\r\n") == true)
    }

    @Test func aCertificateForAnotherNameOrUnderNoTrustedAuthorityIsRefused() throws {
        let certificate = try TestCertificate.make(for: "pages.test")
        let server = try PageServer(certificate: certificate) { _ in Self.answer("HTTP/1.1 200 OK\r\nContent-Type: text/html") }
        defer { server.stop() }
        var policy = Self.policy(["pages.test": "127.0.0.1", "other.test": "127.0.0.1"])
        policy.trustedCertificatesFile = certificate.certificateFile
        let wrongName = ArticlePage.fetch("https://other.test:\(server.port)/", policy: policy)
        policy.trustedCertificatesFile = nil   // the system's authorities, which never signed it
        let untrusted = ArticlePage.fetch("https://pages.test:\(server.port)/", policy: policy)
        for (page, reason) in [(wrongName, "the page's certificate is not trusted for other.test: hostname mismatch"),
                               (untrusted, "the page's certificate is not trusted for pages.test: self-signed certificate")] {
            #expect(page == .failed(permanent: true, reason: reason))
        }
        #expect(server.requests.isEmpty, "no request is sent over a connection whose certificate failed")
    }

    @Test func aServerThatStopsSendingTimesOutAndMayBeTriedAgain() throws {
        let server = try PageServer(holdSeconds: 3) { _ in
            Self.answer("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 100", body: "<p>a start")
        }
        defer { server.stop() }
        var policy = Self.policy(["slow.invalid": "127.0.0.1"])
        policy.timeoutSeconds = 0.5
        let started = Date()
        let page = ArticlePage.fetch("http://slow.invalid:\(server.port)/", policy: policy)
        #expect(page == .failed(permanent: false, reason: "timed out reading the answer"))
        #expect(Date().timeIntervalSince(started) < 2.5, "the fetch ends at its deadline, not the server's")
    }

    /// A resolver that does not answer is given up on at the fetch's deadline, not its own.
    @Test func aLookupThatDoesNotAnswerEndsAtTheDeadline() throws {
        let started = Date()
        let timedOut = #expect(throws: PageFailure.self) {
            _ = try PublicAddress.lookUp("slow.invalid", port: 80, deadline: .now() + 0.2) { _, _ in
                Thread.sleep(forTimeInterval: 3)
                return []
            }
        }
        #expect(Date().timeIntervalSince(started) < 2, "the lookup is given up at its deadline")
        #expect(timedOut?.reason == "timed out looking up slow.invalid" && timedOut?.permanent == false)
        let answered = try PublicAddress.lookUp("quick.invalid", port: 80, deadline: .now() + 5) { _, port in
            PublicAddress.resolve("127.0.0.1", port: port, numeric: true)
        }
        #expect(answered.map(\.text) == ["127.0.0.1"])
        let unknown = #expect(throws: PageFailure.self) {
            _ = try PublicAddress.lookUp("none.invalid", port: 80, deadline: .now() + 5) { _, _ in nil }
        }
        #expect(unknown?.reason == "the host none.invalid does not resolve" && unknown?.permanent == false)
    }

    @Test func answersTheFetcherCannotUseAreRefusedWithTheirReason() throws {
        let answers: [(String, ArticlePage)] = [
            ("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Encoding: gzip\r\nContent-Length: 3",
             .failed(permanent: true, reason: "the page came compressed (gzip) though none was asked for")),
            ("HTTP/1.1 200 OK\r\nContent-Type: application/pdf", .failed(permanent: true, reason: "not a web page (application/pdf)")),
            ("HTTP/1.1 503 Busy", .failed(permanent: false, reason: "the page answered 503")),
            ("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 99999999", .failed(permanent: true, reason: "the page is over 5 MiB")),
            ("SSH-2.0-OpenSSH_9.2", .failed(permanent: true, reason: "the answer does not begin with an HTTP/1.0 or HTTP/1.1 status line")),
            ("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: br", .failed(permanent: true,
             reason: "the answer's transfer coding 'br' is not one the fetcher reads (only chunked)")),
        ]
        for (head, expected) in answers {
            let server = try PageServer { _ in Self.answer(head, body: "") }
            defer { server.stop() }
            #expect(ArticlePage.fetch("http://odd.invalid:\(server.port)/", policy: Self.policy(["odd.invalid": "127.0.0.1"])) == expected, "\(head)")
        }
    }
}
