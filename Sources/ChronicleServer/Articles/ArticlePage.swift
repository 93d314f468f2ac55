import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// How the server fetches saved pages (`ArticleFetcher`): off unless the operator turns it on
/// (`serve --fetch-articles`), since it makes the server open connections where its users' links
/// point.
public struct ArticleFetchPolicy: Sendable, Equatable {
    /// Fetch from loopback, private, link-local and other non-public addresses too. Off: a saved
    /// link cannot make the server reach its own network (tests and the demo serve pages on 127.0.0.1).
    public var allowsPrivateAddresses = false
    /// The most bytes of a page read; a longer one is not parsed.
    public var bodyBytesMax = 5 << 20
    /// The most a fetch may take, redirects included.
    public var timeoutSeconds: Double = 15
    public var redirectsMax = 5
    /// Tries for a page that fails in a way that may pass (timeouts, 5xx, 429, no route); then,
    /// as at once for one that fails for good (404, not HTML, too large), the article is given
    /// empty text, so that no server fetches it again.
    public var attemptsMax = 3
    /// Seconds before the second try, the third…
    public var retryDelaysSeconds: [Double] = [10, 120]
    /// Pages fetched at once.
    public var workers = 2

    public init() {}
}

/// One page fetched, or why not.
enum ArticlePage: Equatable {
    case page(bytes: [UInt8], charset: String?, finalURL: String)
    /// `permanent`: trying again will not help (the address is refused, 404, not HTML, too large).
    case failed(permanent: Bool, reason: String)

    static let userAgent = "Chronicle/1 (article fetcher; +https://github.com/chronicle)"

    /// Fetches `url` under `policy`: http or https only; every address its host resolves to must
    /// be public unless the policy allows others, at each redirect too (followed by hand, at most
    /// `redirectsMax`); only `text/html` and `application/xhtml+xml` are read, up to
    /// `bodyBytesMax` bytes. Blocks the calling thread.
    static func fetch(_ url: String, policy: ArticleFetchPolicy) -> ArticlePage {
        let deadline = Date().addingTimeInterval(policy.timeoutSeconds)
        var current = url
        for _ in 0...policy.redirectsMax {
            guard let target = URL(string: current), let scheme = target.scheme?.lowercased(), scheme == "http" || scheme == "https",
                  let host = target.host, !host.isEmpty else {
                return .failed(permanent: true, reason: "not an http(s) address: \(current.prefix(200))")
            }
            if !policy.allowsPrivateAddresses, let refusal = PublicAddress.refusal(host: host, port: target.port ?? (scheme == "https" ? 443 : 80)) {
                return .failed(permanent: refusal.permanent, reason: refusal.reason)
            }
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else { return .failed(permanent: false, reason: "timed out") }
            let answer = PageRequest(url: target, timeoutSeconds: left, bytesMax: policy.bodyBytesMax).run()
            switch answer {
            case .redirect(let location):
                guard let next = URL(string: location, relativeTo: target)?.absoluteURL.absoluteString else {
                    return .failed(permanent: true, reason: "a redirect to an unreadable address")
                }
                current = next
            case .done(let page):
                if case .page(let bytes, let charset, _) = page { return .page(bytes: bytes, charset: charset, finalURL: current) }
                return page
            }
        }
        return .failed(permanent: true, reason: "more than \(policy.redirectsMax) redirects")
    }
}

/// Whether a host is one a saved link may make the server reach.
enum PublicAddress {
    /// Nil where every address `host` resolves to is public; else why not (a name that does not
    /// resolve may resolve later: not permanent).
    static func refusal(host: String, port: Int) -> (permanent: Bool, reason: String)? {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        guard getaddrinfo(bare, String(port), &hints, &list) == 0, let first = list else {
            return (false, "the host \(host) does not resolve")
        }
        defer { freeaddrinfo(first) }
        var node: UnsafeMutablePointer<addrinfo>? = first
        while let entry = node {
            if let address = entry.pointee.ai_addr, !isPublic(address) {
                return (true, "the host \(host) is a loopback, private or otherwise non-public address")
            }
            node = entry.pointee.ai_next
        }
        return nil
    }

    static func isPublic(_ address: UnsafeMutablePointer<sockaddr>) -> Bool {
        switch Int32(address.pointee.sa_family) {
        case AF_INET:
            let v4 = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt32(bigEndian: $0.pointee.sin_addr.s_addr) }
            return isPublic(v4: v4)
        case AF_INET6:
            let bytes = address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { pointer in
                withUnsafeBytes(of: pointer.pointee.sin6_addr) { Array($0) }
            }
            return isPublic(v6: bytes)
        default:
            return false
        }
    }

    static func isPublic(v4 a: UInt32) -> Bool {
        func within(_ base: UInt32, _ bits: UInt32) -> Bool { bits == 0 || a >> (32 - bits) == base >> (32 - bits) }
        let private4: [(UInt32, UInt32)] = [
            (0x0000_0000, 8), (0x0A00_0000, 8), (0x6440_0000, 10), (0x7F00_0000, 8), (0xA9FE_0000, 16), (0xAC10_0000, 12),
            (0xC000_0000, 24), (0xC000_0200, 24), (0xC0A8_0000, 16), (0xC612_0000, 15), (0xC633_6400, 24), (0xCB00_7100, 24),
            (0xE000_0000, 4), (0xF000_0000, 4),
        ]
        return !private4.contains { within($0.0, $0.1) }
    }

    static func isPublic(v6 b: [UInt8]) -> Bool {
        guard b.count == 16 else { return false }
        if b[0..<10].allSatisfy({ $0 == 0 }) && b[10] == 0xFF && b[11] == 0xFF {   // ::ffff:a.b.c.d
            return isPublic(v4: UInt32(b[12]) << 24 | UInt32(b[13]) << 16 | UInt32(b[14]) << 8 | UInt32(b[15]))
        }
        if b[0..<15].allSatisfy({ $0 == 0 }) { return false }          // :: and ::1
        if b[0] & 0xFE == 0xFC { return false }                       // fc00::/7, unique local
        if b[0] == 0xFE && b[1] & 0xC0 == 0x80 { return false }        // fe80::/10, link-local
        if b[0] == 0xFF { return false }                              // multicast
        if b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0D && b[3] == 0xB8 { return false }   // documentation
        return true
    }
}

/// One HTTP GET that follows no redirect and reads at most `bytesMax` bytes.
private final class PageRequest: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    enum Answer { case redirect(String), done(ArticlePage) }

    let url: URL
    let timeoutSeconds: Double
    let bytesMax: Int
    private let lock = NSLock()
    private let finished = DispatchSemaphore(value: 0)
    private var body: [UInt8] = []
    private var answer: Answer?
    private var charset: String?

    init(url: URL, timeoutSeconds: Double, bytesMax: Int) {
        self.url = url
        self.timeoutSeconds = timeoutSeconds
        self.bytesMax = bytesMax
    }

    func run() -> Answer {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = timeoutSeconds
        configuration.timeoutIntervalForResource = timeoutSeconds
        configuration.httpAdditionalHeaders = ["User-Agent": ArticlePage.userAgent, "Accept": "text/html,application/xhtml+xml"]
        let session = URLSession(configuration: configuration, delegate: self, delegateQueue: nil)
        var request = URLRequest(url: url)
        request.timeoutInterval = timeoutSeconds
        session.dataTask(with: request).resume()
        if finished.wait(timeout: .now() + timeoutSeconds + 5) == .timedOut { session.invalidateAndCancel() } else { session.finishTasksAndInvalidate() }
        lock.lock()
        defer { lock.unlock() }
        return answer ?? .done(.failed(permanent: false, reason: "timed out"))
    }

    private func settle(_ value: Answer) {
        lock.lock()
        if answer == nil { answer = value }
        lock.unlock()
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                    newRequest request: URLRequest, completionHandler: @escaping (URLRequest?) -> Void) {
        completionHandler(nil)   // followed by hand, each address checked
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                    completionHandler: @escaping (URLSession.ResponseDisposition) -> Void) {
        guard let http = response as? HTTPURLResponse else {
            settle(.done(.failed(permanent: true, reason: "not an HTTP answer")))
            return completionHandler(.cancel)
        }
        let status = http.statusCode
        if (300..<400).contains(status), let location = http.value(forHTTPHeaderField: "Location") {
            settle(.redirect(location))
            return completionHandler(.cancel)
        }
        guard (200..<300).contains(status) else {
            let transient = status >= 500 || status == 429 || status == 408
            settle(.done(.failed(permanent: !transient, reason: "the page answered \(status)")))
            return completionHandler(.cancel)
        }
        let type = http.value(forHTTPHeaderField: "Content-Type") ?? ""
        let parts = type.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        guard let media = parts.first, media == "text/html" || media == "application/xhtml+xml" else {
            settle(.done(.failed(permanent: true, reason: "not a web page (\(type.isEmpty ? "no type" : type))")))
            return completionHandler(.cancel)
        }
        if http.expectedContentLength > Int64(bytesMax) {
            settle(.done(.failed(permanent: true, reason: "the page is over \(bytesMax >> 20) MiB")))
            return completionHandler(.cancel)
        }
        lock.lock()
        charset = parts.dropFirst().first { $0.hasPrefix("charset=") }.map { String($0.dropFirst(8)).trimmingCharacters(in: CharacterSet(charactersIn: "\"'")) }
        lock.unlock()
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        lock.lock()
        body.append(contentsOf: data)
        let over = body.count > bytesMax
        lock.unlock()
        if over {
            settle(.done(.failed(permanent: true, reason: "the page is over \(bytesMax >> 20) MiB")))
            dataTask.cancel()
        }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        if let error {
            let code = (error as? URLError)?.code
            settle(.done(.failed(permanent: false, reason: code == .timedOut ? "timed out" : "the fetch failed: \(error.localizedDescription)")))
        } else {
            lock.lock()
            let page = ArticlePage.page(bytes: body, charset: charset, finalURL: url.absoluteString)
            lock.unlock()
            settle(.done(page))
        }
        finished.signal()
    }
}
