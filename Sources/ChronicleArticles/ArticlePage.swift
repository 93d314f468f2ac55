import Foundation
#if canImport(Glibc)
import Glibc
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
    /// Addresses to use for these host names instead of asking DNS (lowercased name → numeric
    /// address, as curl's `--resolve`): the address is checked like any other. Tests name hosts
    /// this way; an operator can pin one.
    public var resolveOverrides: [String: String] = [:]
    /// A PEM file of the certificates https pages are trusted under, instead of the system's
    /// (`/etc/ssl/certs`): tests, or a network with its own certificate authority.
    public var trustedCertificatesFile: String?

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
    ///
    /// The host is looked up once per hop, and the connection goes to an address that lookup
    /// gave and the check passed (`PageConnection`): a client handed the name would look it up
    /// again, and a DNS server that answers differently the second time (rebinding) could
    /// point it at the server's own network.
    static func fetch(_ url: String, policy: ArticleFetchPolicy) -> ArticlePage {
        let deadline = DispatchTime.now() + policy.timeoutSeconds
        var current = url
        for _ in 0...policy.redirectsMax {
            guard let target = URL(string: current), let scheme = target.scheme?.lowercased(), scheme == "http" || scheme == "https",
                  let rawHost = target.host, !rawHost.isEmpty else {
                return .failed(permanent: true, reason: "not an http(s) address: \(current.prefix(200))")
            }
            let host = rawHost.hasPrefix("[") && rawHost.hasSuffix("]") ? String(rawHost.dropFirst().dropLast()) : rawHost
            let port = target.port ?? (scheme == "https" ? 443 : 80)
            guard (1...65_535).contains(port) else { return .failed(permanent: true, reason: "port \(port) is not a TCP port") }
            let answer: PageExchange.Answer
            do {
                let addresses = try PublicAddress.addresses(host: host, port: port, policy: policy, deadline: deadline)
                answer = try PageExchange(url: target, host: host, port: port, tls: scheme == "https", policy: policy, deadline: deadline)
                    .run(addresses)
            } catch {
                return .failed(permanent: error.permanent, reason: error.reason)
            }
            switch answer {
            case .redirect(let location):
                guard let next = URL(string: location, relativeTo: target)?.absoluteURL.absoluteString else {
                    return .failed(permanent: true, reason: "a redirect to an unreadable address")
                }
                current = next
            case .page(let bytes, let charset):
                return .page(bytes: bytes, charset: charset, finalURL: current)
            }
        }
        return .failed(permanent: true, reason: "more than \(policy.redirectsMax) redirects")
    }
}

/// Whether a host is one a saved link may make the server reach.
enum PublicAddress {
    /// The addresses `host` resolves to (or its override), each checked: where any is not public
    /// and the policy allows only public ones, the host is refused before anything connects.
    /// A name that does not resolve may resolve later: not permanent. The lookup ends at
    /// `deadline` (`lookUp`).
    static func addresses(host: String, port: Int, policy: ArticleFetchPolicy, deadline: DispatchTime) throws(PageFailure) -> [ResolvedAddress] {
        let found: [ResolvedAddress]
        if let override = policy.resolveOverrides[host.lowercased()] {
            guard let numeric = resolve(override, port: port, numeric: true), !numeric.isEmpty else {
                throw .permanent("the address given for \(host) is not a numeric address")
            }
            found = numeric
        } else {
            found = try lookUp(host, port: port, deadline: deadline)
        }
        if !policy.allowsPrivateAddresses, found.contains(where: { !isPublic($0) }) {
            throw .permanent("the host \(host) is a loopback, private or otherwise non-public address")
        }
        return found
    }

    /// `getaddrinfo` on a thread of its own, waited for until `deadline`: the system resolver
    /// keeps its own time (its timeouts and attempts, per server), which the fetch's deadline
    /// would not bound otherwise. A lookup given up on finishes on its thread and is dropped.
    /// `resolver` stands in for the system's in tests.
    static func lookUp(_ host: String, port: Int, deadline: DispatchTime,
                       resolver: @escaping @Sendable (String, Int) -> [ResolvedAddress]? = { resolve($0, port: $1, numeric: false) })
        throws(PageFailure) -> [ResolvedAddress] {
        final class Answer: @unchecked Sendable {
            let lock = NSLock()
            var addresses: [ResolvedAddress]??
            let done = DispatchSemaphore(value: 0)
        }
        let answer = Answer()
        Thread {
            let found = resolver(host, port)
            answer.lock.withLock { answer.addresses = .some(found) }
            answer.done.signal()
        }.start()
        guard answer.done.wait(timeout: deadline) == .success, let found = answer.lock.withLock({ answer.addresses }) else {
            throw .transient("timed out looking up \(host)")
        }
        guard let found, !found.isEmpty else { throw .transient("the host \(host) does not resolve") }
        return found
    }

    /// The IPv4 and IPv6 stream addresses `name` resolves to; nil where it does not.
    static func resolve(_ name: String, port: Int, numeric: Bool) -> [ResolvedAddress]? {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        if numeric { hints.ai_flags = AI_NUMERICHOST }
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(name, String(port), &hints, &list) == 0, let first = list else { return nil }
        defer { freeaddrinfo(first) }
        var found: [ResolvedAddress] = []
        var node: UnsafeMutablePointer<addrinfo>? = first
        while let entry = node {
            node = entry.pointee.ai_next
            guard let address = entry.pointee.ai_addr, [AF_INET, AF_INET6].contains(Int32(address.pointee.sa_family)),
                  Int(entry.pointee.ai_addrlen) <= MemoryLayout<sockaddr_storage>.size else { continue }
            var resolved = ResolvedAddress()
            resolved.length = entry.pointee.ai_addrlen
            withUnsafeMutableBytes(of: &resolved.storage) { $0.copyMemory(from: UnsafeRawBufferPointer(start: address, count: Int(entry.pointee.ai_addrlen))) }
            found.append(resolved)
        }
        return found
    }

    static func isPublic(_ address: ResolvedAddress) -> Bool {
        var storage = address.storage
        return withUnsafeMutablePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { isPublic($0) } }
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
        func v4(at offset: Int) -> UInt32 {
            UInt32(b[offset]) << 24 | UInt32(b[offset + 1]) << 16 | UInt32(b[offset + 2]) << 8 | UInt32(b[offset + 3])
        }
        if b[0..<10].allSatisfy({ $0 == 0 }) && b[10] == 0xFF && b[11] == 0xFF { return isPublic(v4: v4(at: 12)) }   // ::ffff:a.b.c.d
        if b[0..<12].allSatisfy({ $0 == 0 }) { return false }         // ::, ::1 and the deprecated ::a.b.c.d
        if b[0..<12] == [0x00, 0x64, 0xFF, 0x9B, 0, 0, 0, 0, 0, 0, 0, 0] { return isPublic(v4: v4(at: 12)) }   // NAT64 64:ff9b::/96
        if b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xFF && b[3] == 0x9B { return false }   // 64:ff9b:1::/48, local NAT64
        if b[0] == 0x20 && b[1] == 0x02 { return isPublic(v4: v4(at: 2)) }                // 6to4 2002::/16
        if b[0] == 0x20 && b[1] == 0x01 && b[2] == 0 && b[3] == 0 { return false }       // Teredo 2001::/32
        if b[0] == 0x01 && b[1] == 0x00 && b[2..<8].allSatisfy({ $0 == 0 }) { return false }   // discard 100::/64
        if b[0] & 0xFE == 0xFC { return false }                       // fc00::/7, unique local
        if b[0] == 0xFE && b[1] & 0xC0 == 0x80 { return false }        // fe80::/10, link-local
        if b[0] == 0xFE && b[1] & 0xC0 == 0xC0 { return false }        // fec0::/10, site-local (deprecated)
        if b[0] == 0xFF { return false }                              // multicast
        if b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0D && b[3] == 0xB8 { return false }   // documentation
        return true
    }
}

