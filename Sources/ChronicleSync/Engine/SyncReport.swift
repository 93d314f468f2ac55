import ChronicleCore
import ChronicleStore
import Foundation

/// What one sync round did.
public struct SyncReport: Sendable, Equatable {
    /// How the round ended: synced, offline, or blocked.
    public enum Outcome: Sendable, Equatable {
        /// Everything queued was answered and the log is caught up with the server.
        case synced
        /// The server could not be reached (or kept failing); queued ops are kept and will be retried.
        case offline(reason: String)
        /// The server refused the request itself (signed out, wrong library…); a person must act.
        case blocked(reason: String)
    }

    public var outcome: Outcome = .synced
    /// Ops the server accepted (or already had) in this round.
    public var pushed = 0
    /// Ops the server refused for good in this round (each left a notice).
    public var rejected = 0
    /// Confirmed ops folded into the store.
    public var pulled = 0
    /// Transport failures retried along the way.
    public var retries = 0
    /// Set when the store started over from the server's snapshot at this seq.
    public var bootstrappedAt: Int64?
    /// Whether that start took the server's start image (`DeviceStore.adoptStartImage`) rather
    /// than building the store from the snapshot.
    public var startedFromImage = false
    /// Ops sealed into segments after the round (`Configuration.compaction`).
    public var sealed: Int64 = 0
    /// Queued ops numbered again after the server's deviceSeq for this device, because the
    /// store is an older copy of one that went on syncing (`DeviceStore.renumberOutbox`).
    public var renumbered = 0
    /// This device's ops the server lost (its data restored from a backup) whose content this
    /// store had already dropped past its retention horizon: they cannot be sent again, and the
    /// queue took their numbers (`DeviceStore.closeOutboxGap`). Gone with the server's data.
    public var lostWithServer = 0
    /// Set when the server's log ended before this store's cursor (it lost ops: its data was
    /// restored from a backup) and the store went back to what the server holds, queueing its
    /// own lost ops again (`DeviceStore.rewind(toAgreedSeq:)`).
    public var rewound: RewindReport?
    /// Blobs added here that the server came to hold in this round (`DeviceStore.addBlob`).
    public var blobsUploaded = 0
    /// Bytes of blobs sent in this round.
    public var blobBytesSent: Int64 = 0
    /// Blobs the server refused for good in this round (`BlobInfo.refusal` says why).
    public var blobsRefused = 0
    /// Why the blob uploads stopped before the queue was empty (tried again next round); nil when
    /// they did not, or the round did not reach them (ops go first).
    public var blobError: String?
}
