import Foundation

/// One `GET` of a saved page over a `PageConnection`, following no redirect: the request the
/// fetcher sends, and what it makes of the answer (`PageResponseReader`).
struct PageExchange {
    enum Answer: Equatable {
        case redirect(String)
        case page(bytes: [UInt8], charset: String?)
    }

    let url: URL
    /// Without brackets for an IPv6 literal.
    let host: String
    let port: Int
    let tls: Bool
    let policy: ArticleFetchPolicy
    let deadline: DispatchTime

    /// The request's bytes: origin-form target, `Host`, no compression asked for, closed after.
    func request() throws(PageFailure) -> [UInt8] {
        guard let components = URLComponents(url: url, resolvingAgainstBaseURL: false) else {
            throw .permanent("not an http(s) address: \(url.absoluteString.prefix(200))")
        }
        var target = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        if let query = components.percentEncodedQuery { target += "?" + query }
        var authority = host.contains(":") ? "[\(host)]" : host
        if port != (tls ? 443 : 80) { authority += ":\(port)" }
        // A URL carries no spaces or line breaks; refused here rather than sent if one did.
        guard (target + authority).utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw .permanent("the address holds characters a request line cannot carry")
        }
        let text = "GET \(target) HTTP/1.1\r\nHost: \(authority)\r\nUser-Agent: \(ArticlePage.userAgent)\r\n"
            + "Accept: text/html,application/xhtml+xml\r\nAccept-Encoding: identity\r\nConnection: close\r\n\r\n"
        return Array(text.utf8)
    }

    /// Connects to the first of `addresses` that answers, sends the request and reads the answer.
    func run(_ addresses: [ResolvedAddress]) throws(PageFailure) -> Answer {
        let request = try request()
        let connection = try PageConnection.open(addresses, tlsHost: tls ? host : nil,
                                                 trustedCertificatesFile: policy.trustedCertificatesFile, deadline: deadline)
        try connection.send(request)
        var reader = PageResponseReader(bodyBytesMax: policy.bodyBytesMax)
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        var judged = false
        while !reader.isComplete {
            let count = try connection.receive(into: &buffer)
            var failure: PageResponseReader.Failure?
            do {
                if count == 0 { try reader.finish() } else { try reader.feed(buffer[..<count]) }
            } catch {
                failure = error
            }
            // The head decides before any failure in the body does: a redirect or a refusal needs no body.
            if !judged, let head = reader.head {
                judged = true
                if let answer = try judge(head) { return answer }
            }
            switch failure {
            case .bodyTooLarge?: throw .permanent("the page is over \(policy.bodyBytesMax >> 20) MiB")
            case .truncated?: throw .transient("the answer ended before its body did")
            case .malformed(let why)?: throw .permanent(why)
            case nil: break
            }
            if count == 0 { break }
        }
        guard let head = reader.head else { throw .transient("the server closed the connection without answering") }
        return .page(bytes: reader.body, charset: Self.charset(of: head))
    }

    /// What the head alone settles: a redirect, a refusal (thrown), or nil to read the body.
    private func judge(_ head: PageResponseReader.Head) throws(PageFailure) -> Answer? {
        let status = head.status
        if (300..<400).contains(status), let location = head.field("location") { return .redirect(location) }
        guard (200..<300).contains(status) else {
            let transient = status >= 500 || status == 429 || status == 408
            throw PageFailure(permanent: !transient, reason: "the page answered \(status)")
        }
        let type = head.field("content-type") ?? ""
        let media = Self.contentType(of: head).first
        guard media == "text/html" || media == "application/xhtml+xml" else {
            throw .permanent("not a web page (\(type.isEmpty ? "no type" : String(type.prefix(100))))")
        }
        if let coding = head.field("content-encoding"), coding.lowercased() != "identity" {
            throw .permanent("the page came compressed (\(coding.prefix(50))) though none was asked for")
        }
        return nil
    }

    /// The `Content-Type` field's media type and parameters, trimmed and lowercased.
    static func contentType(of head: PageResponseReader.Head) -> [String] {
        (head.field("content-type") ?? "").split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
    }

    static func charset(of head: PageResponseReader.Head) -> String? {
        contentType(of: head).dropFirst().first { $0.hasPrefix("charset=") }
            .map { String($0.dropFirst(8)).trimmingCharacters(in: CharacterSet(charactersIn: "\"'")) }
    }
}
