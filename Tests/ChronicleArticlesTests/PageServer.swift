import CTLS
import ChronicleTesting
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A web server for the article fetcher's tests that writes whatever bytes a test gives it, over
/// plain TCP or TLS (OpenSSL, with a certificate from `TestCertificate`), on 127.0.0.1. It records
/// each request's head. One thread serves one connection at a time; SIGPIPE is blocked on it.
final class PageServer: @unchecked Sendable {
    let port: UInt16
    private let listener: Int32
    private let context: OpaquePointer?
    private let answer: @Sendable (String) -> [UInt8]
    private let holdSeconds: Double
    private let lock = NSLock()
    private var heads: [String] = []
    private let stopped = DispatchSemaphore(value: 0)

    /// `answer` gets the request's head and returns the bytes to write back; the connection is
    /// then closed, after `holdSeconds` (a server that stalls).
    init(certificate: TestCertificate? = nil, holdSeconds: Double = 0, answer: @escaping @Sendable (String) -> [UInt8]) throws {
        self.answer = answer
        self.holdSeconds = holdSeconds
        if let certificate {
            guard let context = SSL_CTX_new(TLS_server_method()),
                  SSL_CTX_use_certificate_chain_file(context, certificate.certificateFile) == 1,
                  SSL_CTX_use_PrivateKey_file(context, certificate.keyFile, SSL_FILETYPE_PEM) == 1 else {
                throw TestCertificate.Failure("the test server could not load its certificate")
            }
            self.context = context
        } else {
            context = nil
        }
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard bound == 0, listen(fd, 16) == 0 else { throw TestCertificate.Failure("the test server could not listen") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        port = UInt16(bigEndian: address.sin_port)
        listener = fd
        let thread = Thread { [self] in serve() }
        thread.start()
    }

    deinit {
        if let context { SSL_CTX_free(context) }
    }

    /// The heads of the requests served so far.
    var requests: [String] { lock.lock(); defer { lock.unlock() }; return heads }

    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        stopped.wait()
        close(listener)
    }

    private func serve() {
        var blocked = sigset_t()
        sigemptyset(&blocked)
        sigaddset(&blocked, SIGPIPE)
        pthread_sigmask(SIG_BLOCK, &blocked, nil)
        defer { stopped.signal() }
        while true {
            let client = accept(listener, nil, nil)
            guard client >= 0 else { return }
            serve(client)
            close(client)
        }
    }

    private func serve(_ client: Int32) {
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var ssl: OpaquePointer?
        if let context {
            ssl = SSL_new(context)
            SSL_set_fd(ssl, client)
            guard SSL_accept(ssl) == 1 else { SSL_free(ssl); return }   // the fetcher refused the certificate
        }
        defer { if let ssl { SSL_shutdown(ssl); SSL_free(ssl) } }
        var head: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4_096)
        while !head.suffix(4).elementsEqual([13, 10, 13, 10]) {
            let count = buffer.withUnsafeMutableBytes { raw -> Int in
                if let ssl { return Int(SSL_read(ssl, raw.baseAddress!, Int32(raw.count))) }
                return recv(client, raw.baseAddress!, raw.count, 0)
            }
            guard count > 0 else { return }
            head += buffer[..<count]
        }
        let text = String(decoding: head, as: UTF8.self)
        lock.lock(); heads.append(text); lock.unlock()
        let bytes = answer(text)
        _ = bytes.withUnsafeBytes { raw -> Int in
            if let ssl { return Int(SSL_write(ssl, raw.baseAddress!, Int32(raw.count))) }
            return send(client, raw.baseAddress!, raw.count, 0)
        }
        if holdSeconds > 0 { Thread.sleep(forTimeInterval: holdSeconds) }
    }
}

/// A self-signed certificate and its key, made by the `openssl` tool in a temporary directory.
struct TestCertificate {
    struct Failure: Error, CustomStringConvertible { var description: String; init(_ text: String) { description = text } }

    let certificateFile: String
    let keyFile: String

    /// A certificate for DNS name `name`, valid for a day.
    static func make(for name: String) throws -> TestCertificate {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-tls-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let certificate = TestCertificate(certificateFile: directory + "/certificate.pem", keyFile: directory + "/key.pem")
        let made = try ChildProcess.run("/usr/bin/openssl", ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                                                             "-nodes", "-days", "1", "-subj", "/CN=\(name)", "-addext", "subjectAltName=DNS:\(name)",
                                                             "-keyout", certificate.keyFile, "-out", certificate.certificateFile])
        guard made.status == 0 else { throw Failure("openssl req exited \(made.status): \(made.stderr)") }
        return certificate
    }
}
