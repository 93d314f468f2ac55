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

/// The two socket chores that let the server close a TLS handshake sent to its plain HTTP port
/// at once, instead of letting libmicrohttpd wait for a request line that never comes.
enum PlainPort {
    /// Asks the kernel to hand over a new connection only once its first bytes have arrived
    /// (Linux's `TCP_DEFER_ACCEPT`), so that ``looksLikeTLS(_:)`` sees them when MHD reports the
    /// connection. Elsewhere nothing changes, and a TLS handshake waits for the idle timeout.
    static func deferAccept(listenSocket: Int32) {
        #if os(Linux)
        guard listenSocket >= 0 else { return }
        var seconds: Int32 = 2
        _ = setsockopt(listenSocket, Int32(IPPROTO_TCP), TCP_DEFER_ACCEPT, &seconds, socklen_t(MemoryLayout<Int32>.size))
        #endif
    }

    /// Whether the bytes waiting on `socket` begin a TLS record of the handshake (0x16, then
    /// major version 3): no HTTP/1.1 request line starts so. Peeks; reads nothing.
    static func looksLikeTLS(_ socket: Int32) -> Bool {
        guard socket >= 0 else { return false }
        var head: (UInt8, UInt8) = (0, 0)
        let count = withUnsafeMutableBytes(of: &head) { recv(socket, $0.baseAddress, 2, Int32(MSG_PEEK | MSG_DONTWAIT)) }
        return count == 2 && head.0 == 0x16 && head.1 == 0x03
    }

    /// Whether the peer of `socket` has ended its stream and no byte of it is left to read.
    /// Peeks; reads nothing.
    static func peerEnded(_ socket: Int32) -> Bool {
        var byte: UInt8 = 0
        return recv(socket, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT)) == 0
    }

    /// Ends both directions of `socket`; libmicrohttpd then sees the connection closed and
    /// frees it as its own (closing the descriptor under it would not be safe).
    static func shutDown(_ socket: Int32) {
        _ = shutdown(socket, Int32(SHUT_RDWR))
    }
}
