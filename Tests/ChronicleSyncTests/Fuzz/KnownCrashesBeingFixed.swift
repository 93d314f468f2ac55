import ChronicleCore
@testable import ChronicleServer
import Foundation

/// Inputs that trap today, from issue 56, while the fix is under way on another branch. A trap
/// kills the whole test process, so the fuzzers hold these back (and count them) rather than
/// send them. Each entry matches the class of input that reaches the overflow, a little wider
/// rather than narrower. Remove an entry once its fix is merged: the fuzzers then send those
/// inputs again and the suite shows the fix holds.
enum KnownCrashesBeingFixed {
    struct Known: Sendable {
        let name: String
        let matches: @Sendable (RawRequest) -> Bool
    }

    /// Requests that trap `chronicle serve`.
    static let requests: [Known] = [
        Known(name: "issue 56: GET …/blobs/{blob} with Range: bytes=0-9223372036854775807 (SyncRoutes.getBlob: end - start + 1)") { request in
            method(request) == "GET" && request.decodedPath.contains("/blobs/") && !request.decodedPath.hasSuffix("/status")
                && request.header("Range").flatMap(serverViews).contains { value in
                    guard let range = try? SyncRoutes.byteRange(value), let end = range.end else { return false }
                    let span = end.subtractingReportingOverflow(range.start)
                    return span.overflow || span.partialValue.addingReportingOverflow(1).overflow
                }
        },
        Known(name: "issue 56: PUT …/blobs/{blob}?offset=9223372036854775806&length=480 (BlobRules.check: offset + count)") { request in
            guard method(request) == "PUT", request.decodedPath.contains("/blobs/"),
                  let offset = request.queryValue("offset").flatMap({ serverViews($0).compactMap { Int64($0) }.max() }) else { return false }
            return offset > Int64.max - (64 << 20)
        },
    ]

    /// Requests the server leaves open after the client has half-closed its side (found by this
    /// fuzzer, reported on issue 56 for the HTTP layer): while libmicrohttpd waits for bytes the
    /// request announced (a body shorter than its Content-Length, two lengths, a bogus chunk, a
    /// body without a length that reads as a next request), the end of the stream is sometimes
    /// missed and the connection stays open until its idle timeout. Reproduce: send
    /// `GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 76\r\n\r\n`, then
    /// `shutdown(SHUT_WR)`: 4 of 50 sequential tries, 78 of 200 from 4 threads, got neither an
    /// answer nor a close within 3 s. Each would cost the fuzzer its whole wait, so they are held back.
    static let hangs: [Known] = [
        Known(name: "new (fuzzer): a request cut short of its announced framing, then a half-close, is sometimes left open until the idle timeout") { request in
            let framingHeaders: Set<String> = ["content-length", "transfer-encoding"]
            if method(request) == "CONNECT" || request.headers.contains(where: { framingHeaders.contains($0.0.trimmingCharacters(in: .whitespaces).lowercased()) }) {
                return true
            }
            switch request.framing {
            case .exact: return false
            case .none: return !request.body.isEmpty
            case .lie(let length): return Int(length) != request.body.count
            case .twoLengths, .chunked: return true
            }
        },
    ]

    /// Answers that trap the device's sync engine.
    static func trapsTheDevice(status: Int, code: String?, headers: [(String, String)]) -> String? {
        func number(_ name: String) -> Int64? {
            let values = headers.filter { $0.0.lowercased() == name.lowercased() }.map(\.1)
            return values.count == 1 ? Int64(values[0]) : nil
        }
        if status == 409, code == ProtocolError.deviceSeqReusedCode, let last = number(ProtocolError.lastDeviceSeqHeader),
           let reused = number(ProtocolError.reusedDeviceSeqHeader), reused >= 1, last >= reused, last > Int64.max - (1 << 20) {
            return "issue 56: 409 device_seq_reused with Chronicle-Last-Device-Seq: 9223372036854775807 (DeviceStore.moveQueue: last + 1 + rank)"
        }
        return nil
    }

    private static func method(_ request: RawRequest) -> String { request.method.trimmingCharacters(in: .whitespaces) }

    /// What the server may make of a value: libmicrohttpd hands over C strings, so a NUL (or a
    /// bare CR ending the line) can cut it short.
    private static func serverViews(_ value: String) -> [String] {
        [value, String(value.prefix { $0 != "\u{0}" }), String(value.prefix { $0 != "\r" })]
    }
}
