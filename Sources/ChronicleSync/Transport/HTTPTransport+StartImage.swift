import ChronicleCore
import ChronicleStore
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension HTTPTransport {
    /// Bytes asked for per request of a start image.
    static let startImageRangeBytes: Int64 = 2 << 20
    /// Ranges asked for at once: one being decompressed, the next ones on their way.
    static let startImageRangesInFlight = 3

    public func startImage(storeFormat: Int64, schemaFingerprint: String, to target: String) async throws(SyncError) -> Bool {
        var request = request("v1/libraries/\(library.lowercased)/start-image",
                              query: [URLQueryItem(name: "format", value: String(storeFormat)), URLQueryItem(name: "schema", value: schemaFingerprint)],
                              timeout: requestTimeoutSeconds + 60)
        request.setValue("application/vnd.chronicle.store-image+lz4", forHTTPHeaderField: "Accept")
        let session = self.session
        do {
            try await authorized(request) { request async throws(SyncError) in
                try await Self.downloadDecompressing(request, session: session, to: target)
            }
            return true
        } catch .terminal(let refusal) where refusal.code == .noStartImage {
            return false
        }
    }

    /// Downloads an LZ4 frame in ranges of `startImageRangeBytes` and decompresses it into a new
    /// file at `target` as they arrive: the next ranges (`startImageRangesInFlight`) are on their
    /// way while one is decompressed, and no more are ever held, however large the image and
    /// however fast the link. (Streamed in one answer instead, URLSession kept whatever the
    /// writing had not caught up with: up to 138 MB over loopback for a 166 MB image.) Every
    /// range after the first must be of the same image (`If-Match` its ETag). A damaged frame,
    /// a failed write or an answer that is not 2xx removes the file and throws as `send` does
    /// (the frame's faults as transient: the next round fetches it again).
    static func downloadDecompressing(_ request: URLRequest, session: URLSession, to target: String,
                                      rangeBytes: Int64 = startImageRangeBytes) async throws(SyncError) {
        do {
            try await downloadRanges(request, session: session, to: target, rangeBytes: max(1, rangeBytes))
        } catch {
            try? FileManager.default.removeItem(atPath: target)
            throw error
        }
    }

    private static func downloadRanges(_ request: URLRequest, session: URLSession, to target: String, rangeBytes: Int64) async throws(SyncError) {
        let output: LZ4FrameFileDecompressor
        do {
            output = try LZ4FrameFileDecompressor(creating: target)
        } catch {
            throw .transient(reason: "\(target) cannot be written: \(error)", retryAfterSeconds: nil)
        }
        func fetch(from offset: Int64, etag: String?) -> Task<([UInt8], HTTPURLResponse), any Error> {
            var ranged = request
            ranged.setValue("bytes=\(offset)-\(offset + rangeBytes - 1)", forHTTPHeaderField: "Range")
            if let etag { ranged.setValue(etag, forHTTPHeaderField: "If-Match") }
            let asked = ranged
            return Task { try await send(asked, session: session) }
        }
        // The first range says how large the image is; then up to `startImageRangesInFlight` are asked for at once.
        var inFlight: [Task<([UInt8], HTTPURLResponse), any Error>] = [fetch(from: 0, etag: nil)]
        var etag: String?
        var expected: Int64 = 0    // where the next range handed over must start
        var asked = rangeBytes      // where the next request starts
        var total: Int64?
        defer { for task in inFlight { task.cancel() } }
        while !inFlight.isEmpty {
            let current = inFlight.removeFirst()
            let body: [UInt8], http: HTTPURLResponse
            do {
                (body, http) = try await current.value
            } catch let error as SyncError {
                throw error
            } catch {
                throw .transient(reason: describe(error), retryAfterSeconds: nil)
            }
            // `Content-Range: bytes a-b/total`; a server that sends the whole image at once (200) is taken as it comes.
            if http.statusCode == 206 {
                guard let (first, length) = contentRange(http), first == expected, total == nil || total == length else {
                    throw .transient(reason: "The server's start image range lacks its Content-Range, or is not the one asked for.", retryAfterSeconds: nil)
                }
                total = length
            } else {
                guard expected == 0 else {
                    throw .transient(reason: "The server sent the whole start image where a range was asked for.", retryAfterSeconds: nil)
                }
                total = Int64(body.count)
                asked = total!
            }
            if etag == nil { etag = http.value(forHTTPHeaderField: "ETag") }
            expected += Int64(body.count)
            if body.isEmpty && expected < total! {
                throw .transient(reason: "The server sent an empty range of the start image.", retryAfterSeconds: nil)
            }
            while inFlight.count < startImageRangesInFlight, asked < total! {
                inFlight.append(fetch(from: asked, etag: etag))
                asked += rangeBytes
            }
            do {
                try body.withUnsafeBytes { try output.feed($0) }
            } catch {
                throw .transient(reason: "The server's start image could not be read: \(error)", retryAfterSeconds: nil)
            }
        }
        do {
            try output.finish()
        } catch {
            throw .transient(reason: "The server's start image could not be read: \(error)", retryAfterSeconds: nil)
        }
    }
}
