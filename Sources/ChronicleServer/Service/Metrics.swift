import ChronicleCore
import ChronicleStore
import Foundation

/// Counters and latency histograms, rendered in the Prometheus text format at `/metrics`.
public final class Metrics: Sendable {
    struct Histogram {
        static let bounds: [Double] = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30]
        var counts = [UInt64](repeating: 0, count: bounds.count)
        var sum = 0.0
        var count: UInt64 = 0

        mutating func observe(_ seconds: Double) {
            for (i, bound) in Self.bounds.enumerated() where seconds <= bound { counts[i] += 1 }
            sum += seconds
            count += 1
        }
    }

    struct State {
        var requests: [String: UInt64] = [:]      // "method route status"
        var ops: [String: UInt64] = ["accepted": 0, "duplicate": 0, "rejected": 0]
        var opsPulled: UInt64 = 0
        var pull = Histogram()
        var push = Histogram()
        var waiting = 0
        /// Long-polls that ended, by what ended them: a push that brought ops, or the wait (run out, or the client gone).
        var longPollsEnded: [String: UInt64] = ["push": 0, "wait": 0]
        /// Pushes held now for the device's push ahead, and how such waits ended.
        var heldForGap = 0
        var gapWaits: [String: UInt64] = ["filled": 0, "refused": 0]
        var compactions: [String: UInt64] = ["ok": 0, "failed": 0]
        var opsSealed: UInt64 = 0
        var compaction = Histogram()
        var blobBytes: [String: UInt64] = ["received": 0, "sent": 0]
    }

    private let state = Locked(State())

    public init() {}

    func request(method: String, route: String, status: Int) {
        state.withLock { $0.requests["\(method) \(route) \(status)", default: 0] += 1 }
    }

    func ops(accepted: Int, duplicate: Int, rejected: Int) {
        state.withLock {
            $0.ops["accepted", default: 0] += UInt64(accepted)
            $0.ops["duplicate", default: 0] += UInt64(duplicate)
            $0.ops["rejected", default: 0] += UInt64(rejected)
        }
    }

    func pulled(ops: Int, seconds: Double) { state.withLock { $0.opsPulled += UInt64(ops); $0.pull.observe(seconds) } }
    func pushed(seconds: Double) { state.withLock { $0.push.observe(seconds) } }
    func waiting(_ delta: Int) { state.withLock { $0.waiting += delta } }
    func longPollsEnded(_ count: Int, byPush: Bool) { state.withLock { $0.longPollsEnded[byPush ? "push" : "wait", default: 0] += UInt64(count) } }
    /// Pulls parked now, waiting for ops.
    public var longPollsWaiting: Int { state.withLock { $0.waiting } }
    /// Long-polls ended so far, by a push (`push`) or by their wait (`wait`).
    public var longPollEndings: [String: UInt64] { state.withLock { $0.longPollsEnded } }
    func heldForGap(_ delta: Int) { state.withLock { $0.heldForGap += delta } }
    func gapWaitEnded(filled: Bool) { state.withLock { $0.gapWaits[filled ? "filled" : "refused", default: 0] += 1 } }

    /// Pushes held right now for the device's push ahead of them (tests read this).
    public var pushesHeldForGap: Int { state.withLock { $0.heldForGap } }
    func compacted(ops: Int64, seconds: Double) {
        state.withLock { $0.compactions["ok", default: 0] += 1; $0.opsSealed += UInt64(max(0, ops)); $0.compaction.observe(seconds) }
    }
    func blobBytes(received: Int, sent: Int) {
        state.withLock { $0.blobBytes["received", default: 0] += UInt64(received); $0.blobBytes["sent", default: 0] += UInt64(sent) }
    }
    func compactionFailed() { state.withLock { $0.compactions["failed", default: 0] += 1 } }

    /// Ops answered so far by outcome (tests and benchmarks read these).
    public var opCounts: [String: UInt64] { state.withLock { $0.ops } }

    /// The server's own compactions so far: how many finished, the ops they sealed, and the
    /// seconds they took in all.
    public var compactionCounts: (compactions: UInt64, opsSealed: UInt64, seconds: Double) {
        state.withLock { ($0.compactions["ok", default: 0], $0.opsSealed, $0.compaction.sum) }
    }

    public func render() -> String {
        let s = state.withLock { $0 }
        var out = ""
        out += "# HELP chronicle_http_requests_total HTTP requests answered, by method, route and status.\n"
        out += "# TYPE chronicle_http_requests_total counter\n"
        for (key, value) in s.requests.sorted(by: { $0.key < $1.key }) {
            let parts = key.split(separator: " ")
            out += "chronicle_http_requests_total{method=\"\(parts[0])\",route=\"\(parts[1])\",status=\"\(parts[2])\"} \(value)\n"
        }
        out += Self.counter("chronicle_ops_total", "Pushed ops answered, by outcome.", label: "outcome", s.ops)
        out += Self.value("chronicle_ops_pulled_total", "Confirmed ops served to devices.", type: "counter", s.opsPulled)
        out += Self.value("chronicle_long_polls_waiting", "Pull requests parked until new ops arrive.", type: "gauge", UInt64(max(0, s.waiting)))
        out += Self.counter("chronicle_long_polls_total", "Parked pulls that ended, by what ended them: a push that brought ops, or the wait (run out, or the client gone).", label: "ended", s.longPollsEnded)
        out += Self.value("chronicle_pushes_held_for_gap", "Pushes that arrived ahead of their device's push before them, held until it lands.", type: "gauge", UInt64(max(0, s.heldForGap)))
        out += Self.counter("chronicle_push_gap_waits_total", "Pushes held for their device's push ahead, by how the wait ended: filled (taken after it) or refused (device_seq_gap).", label: "result", s.gapWaits)
        out += Self.counter("chronicle_compactions_total", "Compactions the server ran on its own, by result.", label: "result", s.compactions)
        out += Self.value("chronicle_ops_sealed_total", "Ops sealed into segments by the server's own compactions.", type: "counter", s.opsSealed)
        out += Self.counter("chronicle_blob_bytes_total", "Bytes of blobs (large files) received in uploaded chunks and sent in downloaded ranges.", label: "direction", s.blobBytes)
        out += Self.render("chronicle_compaction_duration_seconds", "Time of one compaction the server ran on its own.", s.compaction)
        out += Self.render("chronicle_pull_duration_seconds", "Time to answer a pull, long-poll wait included.", s.pull)
        out += Self.render("chronicle_push_duration_seconds", "Time to order and commit a pushed batch.", s.push)
        return out
    }

    /// A counter with one label, a line per label value in order.
    private static func counter(_ name: String, _ help: String, label: String, _ values: [String: UInt64]) -> String {
        var out = "# HELP \(name) \(help)\n# TYPE \(name) counter\n"
        for (key, value) in values.sorted(by: { $0.key < $1.key }) { out += "\(name){\(label)=\"\(key)\"} \(value)\n" }
        return out
    }

    private static func value(_ name: String, _ help: String, type: String, _ value: UInt64) -> String {
        "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n\(name) \(value)\n"
    }

    private static func render(_ name: String, _ help: String, _ h: Histogram) -> String {
        var out = "# HELP \(name) \(help)\n# TYPE \(name) histogram\n"
        for (i, bound) in Histogram.bounds.enumerated() { out += "\(name)_bucket{le=\"\(bound)\"} \(h.counts[i])\n" }
        out += "\(name)_bucket{le=\"+Inf\"} \(h.count)\n\(name)_sum \(h.sum)\n\(name)_count \(h.count)\n"
        return out
    }
}
