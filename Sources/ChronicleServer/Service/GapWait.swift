import ChronicleCore
import ChronicleServerStore
import ChronicleStore
import Dispatch
import Foundation

/// One push's wait for its device's push ahead: how long it may still wait, and its place in
/// the metrics (held while it waits; filled or refused when it ends).
struct GapWait {
    private let deadline: UInt64
    private let metrics: Metrics
    private var held = false

    init(milliseconds: Int, metrics: Metrics) {
        deadline = DispatchTime.now().uptimeNanoseconds + UInt64(max(0, milliseconds)) * 1_000_000
        self.metrics = metrics
    }

    var nanosecondsLeft: UInt64 {
        let now = DispatchTime.now().uptimeNanoseconds
        return deadline > now ? deadline - now : 0
    }

    /// Whether a push refused with `error` waits and is tried again: a gap, with time left.
    mutating func holds(after error: ProtocolError) -> Bool {
        guard error.code == ProtocolError.Code.deviceSeqGap, nanosecondsLeft > 0 else { return false }
        if !held { held = true; metrics.heldForGap(1) }
        return true
    }

    /// The push was taken (`filled`) or refused after all.
    func ended(filled: Bool) {
        guard held else { return }
        metrics.gapWaitEnded(filled: filled)
        metrics.heldForGap(-1)
    }
}
