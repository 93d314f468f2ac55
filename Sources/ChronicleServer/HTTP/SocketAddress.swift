import ChronicleCore
import CMicroHTTPD
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The two socket-address chores of the HTTP layer: parsing the configured
/// IPv4 literal for bind(2) and printing a peer's address for logs.
enum SocketAddress {
    /// `host:port` as a `sockaddr_in`; only dotted-quad IPv4 literals pass
    /// (no names, so binding never depends on a resolver).
    static func ipv4(_ host: String, port: UInt16) throws(ChronicleError) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        guard inet_pton(AF_INET, host, &address.sin_addr) == 1 else {
            throw ChronicleError(.invalidHost,
                                 "host must be an IPv4 literal such as 127.0.0.1 or 0.0.0.0, not \"\(host)\".")
        }
        return address
    }

    /// The numeric address ("127.0.0.1", "::1") of an IPv4 or IPv6 peer.
    static func describe(_ address: UnsafePointer<sockaddr>?) -> String? {
        guard let address else { return nil }
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        let family = Int32(address.pointee.sa_family)
        let ok: Bool
        switch family {
        case AF_INET:
            ok = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { v4 in
                var raw = v4.pointee.sin_addr
                return inet_ntop(AF_INET, &raw, &text, socklen_t(text.count)) != nil
            }
        case AF_INET6:
            ok = address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { v6 in
                var raw = v6.pointee.sin6_addr
                return inet_ntop(AF_INET6, &raw, &text, socklen_t(text.count)) != nil
            }
        default:
            ok = false
        }
        guard ok else { return nil }
        return text.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }
}
