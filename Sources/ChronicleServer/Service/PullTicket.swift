import ChronicleCore
import ChronicleServerStore
import ChronicleStore
import Dispatch
import Foundation

/// A parked pull: `answerNow()` ends its wait early (it is answered with whatever is there).
public struct PullTicket: Sendable {
    private let release: @Sendable () -> Void
    init(_ release: @escaping @Sendable () -> Void) { self.release = release }
    public func answerNow() { release() }
}
