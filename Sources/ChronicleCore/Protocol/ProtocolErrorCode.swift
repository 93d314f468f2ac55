extension ProtocolError {
    /// The stable code of a refusal: what a server answers in an error body
    /// (`{"error":{"code":…}}`) and a device matches on. A code never changes meaning once shipped;
    /// `Schemas/api/openapi.yaml` lists them all (the `Error` schema's `code`; a test holds the two together).
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }
        /// The code of a store-side error carried as a refusal.
        public init(_ code: ChronicleError.Code) { rawValue = code.rawValue }

        // MARK: Signing in and access
        public static let unauthorized = Code(rawValue: "unauthorized")
        public static let badCredentials = Code(rawValue: "bad_credentials")
        public static let tokenExpired = Code(rawValue: "token_expired")
        public static let forbiddenLibrary = Code(rawValue: "forbidden_library")
        public static let wrongLibrary = Code(rawValue: "wrong_library")
        public static let wrongDevice = Code(rawValue: "wrong_device")
        public static let deviceTaken = Code(rawValue: "device_taken")
        public static let unknownLibrary = Code(rawValue: "unknown_library")
        public static let unknownSchema = Code(rawValue: "unknown_schema")

        // MARK: The request itself
        public static let badRequest = Code(rawValue: "bad_request")
        public static let badQuery = Code(rawValue: "bad_query")
        public static let badId = Code(rawValue: "bad_id")
        public static let badCursor = Code(rawValue: "bad_cursor")
        public static let badRange = Code(rawValue: "bad_range")
        public static let rangeRequired = Code(rawValue: "range_required")
        public static let rangeNotSatisfiable = Code(rawValue: "range_not_satisfiable")
        public static let limitTooLarge = Code(rawValue: "limit_too_large")
        public static let waitTooLong = Code(rawValue: "wait_too_long")
        public static let tooManyOps = Code(rawValue: "too_many_ops")
        public static let methodNotAllowed = Code(rawValue: "method_not_allowed")
        public static let notFound = Code(rawValue: "not_found")
        public static let unsupportedMediaType = Code(rawValue: "unsupported_media_type")
        public static let bodyTooLarge = Code(rawValue: "body_too_large")
        public static let badContentLength = Code(rawValue: "bad_content_length")
        public static let lengthRequired = Code(rawValue: "length_required")
        public static let nulByte = Code(rawValue: "nul_byte")
        public static let invalidHost = Code(rawValue: "invalid_host")
        public static let malformedPayload = Code(rawValue: "malformed_payload")

        // MARK: Pushing and pulling
        /// A push whose first op is not the next deviceSeq the server expects of the device: the
        /// server may have lost ops (restored from a backup), or the device's acknowledgements ran
        /// ahead of it. The device pushes from its outbox's head again.
        public static let deviceSeqGap = Code(rawValue: "device_seq_gap")
        /// A push that numbers a new op with a deviceSeq its device already used: the device's store
        /// is an older copy (restored from a backup, or copied to a second machine) of one that went
        /// on syncing. The device numbers its unsent ops after `lastDeviceSeq`
        /// (`DeviceStore.renumberOutbox`) and sends them again; nothing is written meanwhile.
        public static let deviceSeqReused = Code(rawValue: "device_seq_reused")
        public static let outOfOrder = Code(rawValue: "out_of_order")
        public static let opIdConflict = Code(rawValue: "op_id_conflict")
        public static let alreadyConfirmed = Code(rawValue: "already_confirmed")
        /// A pull whose cursor is past the library's last op: the server lost ops (its data restored
        /// from a backup). The device goes back to `serverHead` (`DeviceStore.rewind(toAgreedSeq:)`),
        /// queues its own lost ops again and pulls from there.
        public static let cursorAhead = Code(rawValue: "cursor_ahead")
        public static let cursorTooOld = Code(rawValue: "cursor_too_old")
        public static let cursorDiverged = Code(rawValue: "cursor_diverged")
        public static let noSnapshot = Code(rawValue: "no_snapshot")
        public static let noStartImage = Code(rawValue: "no_start_image")
        public static let startImageChanged = Code(rawValue: "start_image_changed")
        public static let replicaBehindHorizon = Code(rawValue: "replica_behind_horizon")
        public static let freeTierCap = Code(rawValue: "free_tier_cap")

        // MARK: Files (blobs)
        public static let badBlobRef = Code(rawValue: "bad_blob_ref")
        public static let badBlobLength = Code(rawValue: "bad_blob_length")
        public static let blobLengthMissing = Code(rawValue: "blob_length_missing")
        public static let blobLengthMismatch = Code(rawValue: "blob_length_mismatch")
        public static let blobOffsetMismatch = Code(rawValue: "blob_offset_mismatch")
        public static let blobTooLarge = Code(rawValue: "blob_too_large")
        public static let blobNotFound = Code(rawValue: "blob_not_found")
        public static let blobNotHeld = Code(rawValue: "blob_not_held")
        public static let blobIncomplete = Code(rawValue: "blob_incomplete")
        public static let blobDigestMismatch = Code(rawValue: "blob_digest_mismatch")
        public static let blobsNotCarried = Code(rawValue: "blobs_not_carried")
        public static let chunkOutOfRange = Code(rawValue: "chunk_out_of_range")
        public static let chunkTooLarge = Code(rawValue: "chunk_too_large")
        public static let emptyChunk = Code(rawValue: "empty_chunk")
        public static let blobStoreBusy = Code(rawValue: "blob_store_busy")
        public static let blobStoreFailed = Code(rawValue: "blob_store_failed")
        public static let blobStoreTooNew = Code(rawValue: "blob_store_too_new")

        // MARK: The server
        public static let serverError = Code(rawValue: "server_error")
        public static let serverBusy = Code(rawValue: "server_busy")
        public static let shuttingDown = Code(rawValue: "shutting_down")
        public static let unavailable = Code(rawValue: "unavailable")
        public static let serverDiskFull = Code(rawValue: "server_disk_full")
        public static let serverStore = Code(rawValue: "server_store")
        public static let serverStoreUnavailable = Code(rawValue: "server_store_unavailable")
        public static let accountsDamaged = Code(rawValue: "accounts_damaged")
        public static let libraryDamaged = Code(rawValue: "library_damaged")
        public static let blobStoreDamaged = Code(rawValue: "blob_store_damaged")

        /// Every code above, for tests and documents that list them.
        public static let all: [Code] = [
            .unauthorized,
            .badCredentials,
            .tokenExpired,
            .forbiddenLibrary,
            .wrongLibrary,
            .wrongDevice,
            .deviceTaken,
            .unknownLibrary,
            .unknownSchema,
            .badRequest,
            .badQuery,
            .badId,
            .badCursor,
            .badRange,
            .rangeRequired,
            .rangeNotSatisfiable,
            .limitTooLarge,
            .waitTooLong,
            .tooManyOps,
            .methodNotAllowed,
            .notFound,
            .unsupportedMediaType,
            .bodyTooLarge,
            .badContentLength,
            .lengthRequired,
            .nulByte,
            .invalidHost,
            .malformedPayload,
            .deviceSeqGap,
            .deviceSeqReused,
            .outOfOrder,
            .opIdConflict,
            .alreadyConfirmed,
            .cursorAhead,
            .cursorTooOld,
            .cursorDiverged,
            .noSnapshot,
            .noStartImage,
            .startImageChanged,
            .replicaBehindHorizon,
            .freeTierCap,
            .badBlobRef,
            .badBlobLength,
            .blobLengthMissing,
            .blobLengthMismatch,
            .blobOffsetMismatch,
            .blobTooLarge,
            .blobNotFound,
            .blobNotHeld,
            .blobIncomplete,
            .blobDigestMismatch,
            .blobsNotCarried,
            .chunkOutOfRange,
            .chunkTooLarge,
            .emptyChunk,
            .blobStoreBusy,
            .blobStoreFailed,
            .blobStoreTooNew,
            .serverError,
            .serverBusy,
            .shuttingDown,
            .unavailable,
            .serverDiskFull,
            .serverStore,
            .serverStoreUnavailable,
            .accountsDamaged,
            .libraryDamaged,
            .blobStoreDamaged,
        ]
    }
}
