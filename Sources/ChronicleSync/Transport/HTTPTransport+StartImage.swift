import ChronicleCore
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension HTTPTransport {
    public func startImage(storeFormat: Int64, schemaFingerprint: String, to target: String) async throws(SyncError) -> Bool {
        var request = request("v1/libraries/\(library.lowercased)/start-image",
                              query: [URLQueryItem(name: "format", value: String(storeFormat)), URLQueryItem(name: "schema", value: schemaFingerprint)],
                              timeout: requestTimeoutSeconds + 60)
        request.setValue("application/vnd.chronicle.store-image+lz4", forHTTPHeaderField: "Accept")
        let configuration = session.configuration
        do {
            try await authorized(request) { request async throws(SyncError) in
                try await Self.downloadDecompressing(request, configuration: configuration, to: target)
            }
            return true
        } catch .terminal(let refusal) where refusal.code == "no_start_image" {
            return false
        }
    }

    /// Downloads an LZ4 frame and decompresses it into a new file at `target` as it arrives (the
    /// decompression runs on the session's delegate queue while the next bytes come in). A
    /// damaged frame, a failed write or an answer that is not 2xx removes the file and throws as
    /// `send` does (the frame's faults as transient: the next round fetches it again).
    static func downloadDecompressing(_ request: URLRequest, configuration: URLSessionConfiguration, to target: String) async throws(SyncError) {
        let receiver: FrameReceiver
        do {
            receiver = try FrameReceiver(target: target)
        } catch {
            throw .transient(reason: "\(target) cannot be written: \(error)", retryAfterSeconds: nil)
        }
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        let session = URLSession(configuration: configuration, delegate: receiver, delegateQueue: queue)
        defer { session.finishTasksAndInvalidate() }
        let box = TaskBox()
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                receiver.done = { continuation.resume() }
                let task = session.dataTask(with: request)
                box.set(task)
                task.resume()
            }
        } onCancel: {
            box.cancel()
        }
        let outcome = receiver.outcome()
        if case .success = outcome { return }
        try? FileManager.default.removeItem(atPath: target)
        switch outcome {
        case .success: return
        case .refused(let http, let body): throw SyncError.from(Self.refusal(http, body: body))
        case .failed(let error as ChronicleError): throw .transient(reason: "The server's start image could not be read: \(error.message)", retryAfterSeconds: nil)
        case .failed(let error): throw .transient(reason: describe(error), retryAfterSeconds: nil)
        }
    }
}

/// Receives an answer's body on the session's (serial) delegate queue: a 2xx body goes through
/// an `LZ4FrameStream` into the target file, anything else is kept (its first 64 KiB) to be read
/// as a refusal.
private final class FrameReceiver: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    enum Outcome {
        case success
        case refused(HTTPURLResponse, [UInt8])
        case failed(Error)
    }

    private let output: LZ4FrameFileDecompressor
    private let lock = NSLock()
    private var response: HTTPURLResponse?
    private var errorBody: [UInt8] = []
    private var failure: Error?
    private var finished = false
    /// Called once, when the task has completed.
    var done: (() -> Void)?

    init(target: String) throws {
        output = try LZ4FrameFileDecompressor(creating: target)
    }

    func outcome() -> Outcome {
        lock.lock()
        defer { lock.unlock() }
        if let failure { return .failed(failure) }
        guard let response else { return .failed(URLError(.badServerResponse)) }
        guard (200..<300).contains(response.statusCode) else { return .refused(response, errorBody) }
        return finished ? .success : .failed(URLError(.networkConnectionLost))
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                    completionHandler: @escaping (URLSession.ResponseDisposition) -> Void) {
        lock.lock()
        self.response = response as? HTTPURLResponse
        lock.unlock()
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        lock.lock()
        defer { lock.unlock() }
        guard failure == nil, let response else { return }
        guard (200..<300).contains(response.statusCode) else {
            if errorBody.count < 64 << 10 { errorBody += data.prefix(64 << 10 - errorBody.count) }
            return
        }
        do {
            try data.withUnsafeBytes { try output.feed($0) }
        } catch {
            failure = error
            dataTask.cancel()
        }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        lock.lock()
        if failure == nil {
            if let error {
                failure = error
            } else if let response, (200..<300).contains(response.statusCode) {
                do {
                    try output.finish()
                    finished = true
                } catch {
                    failure = error
                }
            }
        }
        let done = self.done
        self.done = nil
        lock.unlock()
        done?()
    }
}
