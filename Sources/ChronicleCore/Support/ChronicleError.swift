/// The error Chronicle's own code throws at its boundaries: a stable,
/// machine-readable code and one sentence a person can act on.
///
/// Codes never change meaning once shipped; scripts match on them
/// (`chronicle … --json` prints `{"error":{"code":…,"message":…}}`).
public struct ChronicleError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A stable, machine-readable code: scripts and apps match on it.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        public static let malformedPayload = Code(rawValue: "malformed_payload")
        public static let unknownOpType = Code(rawValue: "unknown_op_type")
        public static let unknownField = Code(rawValue: "unknown_field")
        public static let missingField = Code(rawValue: "missing_field")
        public static let invalidValue = Code(rawValue: "invalid_value")
        public static let serverOnlyField = Code(rawValue: "server_only_field")
        public static let unknownEntity = Code(rawValue: "unknown_entity")
        public static let entityExists = Code(rawValue: "entity_exists")
        public static let entityDeleted = Code(rawValue: "entity_deleted")
        public static let invalidSchema = Code(rawValue: "invalid_schema")
        public static let storeMissing = Code(rawValue: "store_missing")
        public static let storeExists = Code(rawValue: "store_exists")
        public static let futureStoreVersion = Code(rawValue: "future_store_version")
        public static let notAChronicleStore = Code(rawValue: "not_a_chronicle_store")
        /// SQLite cannot read part of the store's file (a page is malformed): the disk, the file
        /// system or a copy damaged it. `chronicle salvage` (`DeviceStore.salvage`) keeps what can be read.
        public static let storeDamaged = Code(rawValue: "store_damaged")
        /// A server's data directory is held by a running server (`chronicle serve`); the command
        /// asked for needs it stopped (`chronicle server salvage`), or a second server was started on it.
        public static let dataDirectoryInUse = Code(rawValue: "data_directory_in_use")
        /// A library's file is to be deleted (`chronicle server remove-user --delete-library`,
        /// `server delete-library`): it cannot be given to a user until it is gone.
        public static let libraryBeingDeleted = Code(rawValue: "library_being_deleted")
        /// A server's data directory whose libraries are ordered in PostgreSQL (`chronicle serve
        /// --postgres` marked it): a command that reads or writes library files there is refused.
        public static let librariesInPostgreSQL = Code(rawValue: "libraries_in_postgresql")
        public static let schemaMismatch = Code(rawValue: "schema_mismatch")
        /// Something (a snapshot, a server's history) was made by a later version of the schema
        /// than this build knows: update the app (or server) to read it.
        public static let updateRequired = Code(rawValue: "update_required")
        /// The store's schema changed since its projection was built: `DeviceStore.performUpkeep`
        /// (which the CLI and the sync engine call) rebuilds it from the log before it is read or written.
        public static let upkeepRequired = Code(rawValue: "upkeep_required")
        public static let logGap = Code(rawValue: "log_gap")
        public static let duplicateOp = Code(rawValue: "duplicate_op")
        public static let wrongLibrary = Code(rawValue: "wrong_library")
        public static let invariantViolated = Code(rawValue: "invariant_violated")
        public static let digestMismatch = Code(rawValue: "digest_mismatch")
        public static let database = Code(rawValue: "database_error")
        public static let diskFull = Code(rawValue: "disk_full")
        public static let usage = Code(rawValue: "usage")
        public static let freeTierCap = Code(rawValue: "free_tier_cap")
        public static let historyDropped = Code(rawValue: "history_dropped")
        /// A file named on the command line (or given to `addBlob(file:)`) cannot be read or written.
        public static let fileUnreadable = Code(rawValue: "file_unreadable")
        /// A blob is not held here and cannot be fetched now.
        public static let blobNotHeld = Code(rawValue: "blob_not_held")
        /// A server's start image (a device store it built from its snapshot) that this store
        /// cannot take: another store format, schema or library, or a damaged file.
        public static let malformedStartImage = Code(rawValue: "malformed_start_image")
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(message) [\(code.rawValue)]" }
}
