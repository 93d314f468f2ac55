import ChronicleCore
import ChronicleStore
import Foundation

/// Structured logs: one JSON object a line, keys sorted, to a file handle (stderr by default).
public final class ServerLog: Sendable {
    private let sink: Locked<FileHandle?>
    private let clock: any ChronicleClock

    public init(to handle: FileHandle? = .standardError, clock: any ChronicleClock = SystemClock()) {
        sink = Locked(handle)
        self.clock = clock
    }

    public func log(_ event: String, _ fields: [String: Value] = [:]) {
        var line = fields
        line["event"] = .text(event)
        line["ts"] = .integer(clock.nowMilliseconds())
        let text = CanonicalJSON.encode(line) + "\n"
        sink.withLock { $0?.write(Data(text.utf8)) }
    }
}
