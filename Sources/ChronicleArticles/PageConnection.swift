import CTLS
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// One address a host name resolved to, as `connect(2)` takes it.
struct ResolvedAddress: @unchecked Sendable {
    var storage = sockaddr_storage()
    var length: socklen_t = 0

    var family: Int32 { Int32(storage.ss_family) }

    /// The numeric form ("93.184.216.34", "2606:2800::1").
    var text: String {
        var copy = storage
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        let written = withUnsafePointer(to: &copy) { pointer -> Bool in
            switch family {
            case AF_INET:
                return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { v4 in
                    var raw = v4.pointee.sin_addr
                    return inet_ntop(AF_INET, &raw, &text, socklen_t(text.count)) != nil
                }
            case AF_INET6:
                return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { v6 in
                    var raw = v6.pointee.sin6_addr
                    return inet_ntop(AF_INET6, &raw, &text, socklen_t(text.count)) != nil
                }
            default:
                return false
            }
        }
        return written ? text.withUnsafeBufferPointer { String(cString: $0.baseAddress!) } : "?"
    }
}

/// Why a fetch failed, and whether trying again may help.
struct PageFailure: Error {
    var permanent: Bool
    var reason: String

    static func transient(_ reason: String) -> PageFailure { PageFailure(permanent: false, reason: reason) }
    static func permanent(_ reason: String) -> PageFailure { PageFailure(permanent: true, reason: reason) }
}

/// A TCP connection the article fetcher opened itself to one of the addresses it checked, plain
/// or inside TLS (OpenSSL: the system's trusted certificates or the policy's, the host name
/// verified, SNI sent). The fetcher does not hand the host name to a client that would look it
/// up again: a second answer from DNS (rebinding) could point at the server's own network.
///
/// Every wait (connect, send, receive, the handshake) ends at the fetch's deadline. TLS runs over
/// memory BIOs and the socket is written with `MSG_NOSIGNAL`, so a peer that hangs up never
/// raises SIGPIPE in the server.
final class PageConnection {
    private let socket: Int32
    private let deadline: DispatchTime
    private var tls: (ssl: OpaquePointer, input: OpaquePointer, output: OpaquePointer)?

    private init(socket: Int32, deadline: DispatchTime) {
        self.socket = socket
        self.deadline = deadline
    }

    deinit {
        if let tls { SSL_free(tls.ssl) }   // frees both BIOs
        close(socket)
    }

    /// Connects to the first of `addresses` that answers; with `tlsHost`, completes a TLS
    /// handshake whose certificate must be valid for that host.
    static func open(_ addresses: [ResolvedAddress], tlsHost: String?, trustedCertificatesFile: String?,
                     deadline: DispatchTime) throws(PageFailure) -> PageConnection {
        var last = PageFailure.transient("the host has no address")
        for address in addresses {
            do {
                let connection = try connect(address, deadline: deadline)
                if let tlsHost { try connection.startTLS(host: tlsHost, trustedCertificatesFile: trustedCertificatesFile) }
                return connection
            } catch {
                last = error
                if error.permanent || DispatchTime.now() >= deadline { break }
            }
        }
        throw last
    }

    private static func connect(_ address: ResolvedAddress, deadline: DispatchTime) throws(PageFailure) -> PageConnection {
        let fd = Glibc.socket(address.family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw .transient("no socket: \(String(cString: strerror(errno)))") }
        let connection = PageConnection(socket: fd, deadline: deadline)
        var storage = address.storage
        let result = withUnsafePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, address.length) }
        }
        if result != 0 {
            guard errno == EINPROGRESS else { throw .transient("could not connect to \(address.text): \(String(cString: strerror(errno)))") }
            try connection.wait(for: Int16(POLLOUT), doing: "connecting to \(address.text)")
            var error: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length)
            guard error == 0 else { throw .transient("could not connect to \(address.text): \(String(cString: strerror(error)))") }
        }
        return connection
    }

    // MARK: - Sending and receiving

    /// Sends all of `bytes` (inside TLS when it was started).
    func send(_ bytes: [UInt8]) throws(PageFailure) {
        guard let tls else { return try sendRaw(bytes[...]) }
        var written = 0
        while written < bytes.count {
            let count = try drive(doing: "sending the request") {
                bytes.withUnsafeBytes { SSL_write(tls.ssl, $0.baseAddress! + written, Int32(bytes.count - written)) }
            }
            guard count > 0 else { throw .transient("the server closed the connection before the request was sent") }
            written += Int(count)
        }
    }

    /// Reads what has arrived into `buffer` (waiting for some); 0 at the end of the stream.
    func receive(into buffer: inout [UInt8]) throws(PageFailure) -> Int {
        guard let tls else { return try receiveRaw(into: &buffer) }
        let count = try drive(doing: "reading the answer", endsAtClose: true) {
            buffer.withUnsafeMutableBytes { SSL_read(tls.ssl, $0.baseAddress!, Int32($0.count)) }
        }
        return max(0, Int(count))
    }

    private func sendRaw(_ bytes: ArraySlice<UInt8>) throws(PageFailure) {
        var rest = bytes
        while !rest.isEmpty {
            let sent = rest.withUnsafeBytes { Glibc.send(socket, $0.baseAddress!, $0.count, Int32(MSG_NOSIGNAL)) }
            if sent > 0 { rest = rest.dropFirst(sent); continue }
            guard sent < 0, errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR else {
                throw .transient("the connection broke while sending: \(String(cString: strerror(errno)))")
            }
            try wait(for: Int16(POLLOUT), doing: "sending the request")
        }
    }

    private func receiveRaw(into buffer: inout [UInt8]) throws(PageFailure) -> Int {
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(socket, $0.baseAddress!, $0.count, 0) }
            if count >= 0 { return count }
            guard errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR else {
                throw .transient("the connection broke while reading: \(String(cString: strerror(errno)))")
            }
            try wait(for: Int16(POLLIN), doing: "reading the answer")
        }
    }

    /// Waits until the socket is ready for `events`, or throws "timed out" at the deadline.
    private func wait(for events: Int16, doing what: String) throws(PageFailure) {
        while true {
            let now = DispatchTime.now()
            guard now < deadline else { throw .transient("timed out \(what)") }
            let milliseconds = Int32(min(Double(deadline.uptimeNanoseconds - now.uptimeNanoseconds) / 1e6 + 1, 60_000))
            var descriptor = pollfd(fd: socket, events: events, revents: 0)
            let ready = poll(&descriptor, 1, milliseconds)
            if ready > 0 { return }
            if ready < 0, errno != EINTR { throw .transient("the connection broke while \(what): \(String(cString: strerror(errno)))") }
        }
    }

    // MARK: - TLS

    private func startTLS(host: String, trustedCertificatesFile: String?) throws(PageFailure) {
        guard let context = SSL_CTX_new(TLS_client_method()) else { throw .transient("no TLS context: \(Self.tlsErrors())") }
        defer { SSL_CTX_free(context) }   // the connection holds its own reference
        _ = chronicle_tls_min_tls12(context)
        let loaded = trustedCertificatesFile.map { SSL_CTX_load_verify_locations(context, $0, nil) } ?? SSL_CTX_set_default_verify_paths(context)
        guard loaded == 1 else { throw .permanent("the trusted certificates could not be loaded: \(Self.tlsErrors())") }
        SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
        guard let ssl = SSL_new(context), let input = BIO_new(BIO_s_mem()), let output = BIO_new(BIO_s_mem()) else {
            throw .transient("no TLS connection: \(Self.tlsErrors())")
        }
        SSL_set_bio(ssl, input, output)
        tls = (ssl, input, output)
        // A name is checked against the certificate's names and sent as SNI; an address literal against its addresses.
        if Self.isAddressLiteral(host) {
            guard X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host) == 1 else { throw .permanent("\(host) is not an address TLS can check") }
        } else {
            guard SSL_set1_host(ssl, host) == 1, chronicle_tls_set_sni(ssl, host) == 1 else { throw .permanent("\(host) is not a name TLS can check") }
        }
        do {
            _ = try drive(doing: "the TLS handshake") { SSL_connect(ssl) }
        } catch {
            let verified = SSL_get_verify_result(ssl)
            if verified != Int(X509_V_OK) {
                throw .permanent("the page's certificate is not trusted for \(host): \(String(cString: X509_verify_cert_error_string(verified)))")
            }
            throw error
        }
    }

    /// Runs one OpenSSL call until it completes: the bytes it wrote go to the socket, and when it
    /// wants more, bytes are read from the socket into it. Its result (> 0), or 0 at a close.
    /// `endsAtClose`: a peer that closes the connection without TLS's close_notify ends the
    /// stream (as browsers take it; the answer's own framing says whether the body was whole).
    private func drive(doing what: String, endsAtClose: Bool = false, _ call: () -> Int32) throws(PageFailure) -> Int32 {
        guard let tls else { return 0 }
        var buffer = [UInt8](repeating: 0, count: 16 << 10)
        while true {
            ERR_clear_error()
            let result = call()
            try flushTLS(buffer: &buffer)
            if result > 0 { return result }
            switch SSL_get_error(tls.ssl, result) {
            case SSL_ERROR_WANT_READ:
                let count = try receiveRaw(into: &buffer)
                guard count > 0 else {
                    if endsAtClose { return 0 }
                    throw .transient("the server closed the connection during \(what)")
                }
                _ = buffer.withUnsafeBytes { BIO_write(tls.input, $0.baseAddress!, Int32(count)) }
            case SSL_ERROR_WANT_WRITE:
                continue
            case SSL_ERROR_ZERO_RETURN:
                return 0
            default:
                throw .transient("TLS failed during \(what): \(Self.tlsErrors())")
            }
        }
    }

    /// Sends what OpenSSL has written into the output BIO.
    private func flushTLS(buffer: inout [UInt8]) throws(PageFailure) {
        guard let tls else { return }
        while chronicle_tls_pending_out(tls.output) > 0 {
            let count = buffer.withUnsafeMutableBytes { BIO_read(tls.output, $0.baseAddress!, Int32($0.count)) }
            guard count > 0 else { return }
            try sendRaw(buffer[..<Int(count)])
        }
    }

    private static func tlsErrors() -> String {
        var reasons: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            var text = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &text, text.count)
            reasons.append(text.withUnsafeBufferPointer { String(cString: $0.baseAddress!) })
        }
        return reasons.isEmpty ? "no reason given" : reasons.joined(separator: "; ")
    }

    static func isAddressLiteral(_ host: String) -> Bool {
        var v4 = in_addr(), v6 = in6_addr()
        return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
    }
}
