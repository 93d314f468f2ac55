import ChronicleCore
import ChronicleServerStore
import ChronicleStore
import Dispatch
import Foundation

/// A library's newest snapshot frame, held weakly: it lives as long as a response sends it.
struct SharedSnapshotFrame: Sendable {
    let seq: Int64
    weak var frame: SharedBytes?
}
