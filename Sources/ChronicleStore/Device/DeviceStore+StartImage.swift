import CSQLite
import ChronicleCore
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Start images (`StartImageInfo`): a new device takes the store the server built from its
/// snapshot whole, instead of building the snapshot's indexes itself.
extension DeviceStore {
    /// The store format this build writes (a start image must be of it).
    public static var storeFormatVersion: Int64 { StoreFormat.currentVersion }

    /// Whether this store has never held anything: no confirmed op, sealed segment or snapshot,
    /// no op of its own (queued or not) and no file. Only such a store may take a start image:
    /// everything it holds is replaced.
    public func isPristine() throws -> Bool {
        try read { db in try Self.isPristine(in: db) }
    }

    static func isPristine(in db: Database) throws -> Bool {
        guard try LogTables.meta("cursor", in: db).integerValue ?? 0 == 0,
              try LogTables.meta("last_device_seq", in: db).integerValue ?? 0 == 0 else { return false }
        for table in ["chronicle_log_blocks", "chronicle_outbox", "chronicle_segments", "chronicle_snapshots", "chronicle_rejected", "chronicle_blobs"] {
            if try db.scalarInt("SELECT count(*) FROM (SELECT 1 FROM \(table) LIMIT 1)") ?? 0 > 0 { return false }
        }
        return true
    }

    /// Makes this store's file whole for shipping as a start image: the write-ahead log copied
    /// in and emptied. The server calls it before it compresses the file.
    package func prepareAsStartImage() throws {
        // `checkpoint()` already waits for readers a while (`Checkpointer.truncate`).
        guard !checkpoint() else { return }
        throw ChronicleError(.invariantViolated, "The start image's store at \(path) could not be checkpointed: a reader kept its log in use.")
    }

    /// Where a start image is decompressed before the store takes it: beside the store's file, on
    /// the same file system, so that taking it is a rename.
    public var startImagePath: String { path + ".start-image" }

    /// Whether a download was left beside the store (`removeLeftoverStartImage`).
    func hasLeftoverStartImage() -> Bool {
        ["", "-wal", "-shm", "-journal"].contains(where: { FileManager.default.fileExists(atPath: startImagePath + $0) })
            && (try? readers.read { db in try Self.isPristine(in: db) }) == false
    }

    /// A download left beside the store by a process that died taking a start image: once the
    /// store holds anything, no image can be taken any more and it goes. (While the store is
    /// pristine it stays: another process may be writing it, and the next download replaces it.)
    func removeLeftoverStartImage() {
        guard hasLeftoverStartImage() else { return }
        let scratch = startImagePath
        for suffix in ["", "-wal", "-shm", "-journal"] { try? FileManager.default.removeItem(atPath: scratch + suffix) }
    }

    /// Starts this (pristine) store from a server's start image: `imageFile` is the image's LZ4
    /// frame as downloaded, or the store file it holds, decompressed (at `startImagePath`, or
    /// anywhere else to be copied there). It is checked (a SQLite file of
    /// this store's format, schema, objects and library, made for no device), given this
    /// device's id, made durable, and then renamed over the store's file (`replaceFile`), so a
    /// crash leaves either the pristine store or the whole image. Returns the
    /// snapshot's seq, where the store's history now begins; pulling continues after it.
    ///
    /// Refused with `malformed_start_image` (the store unchanged): a damaged or truncated frame,
    /// a file that is not such a store. `invariant_violated` if this store is not pristine.
    ///
    /// `afterStep` runs after each step that leaves something on disk (fault tests stop the
    /// process there): 1, the image checked, given this device's id and synced beside the store;
    /// 2, the store's file taken out of WAL mode; 3, the image renamed over it. A throw from it
    /// stands for the process dying: the store must be opened again, not used further.
    @discardableResult
    public func adoptStartImage(_ imageFile: String, afterStep: ((Int, String) throws -> Void)? = nil) throws -> Int64 {
        guard try isPristine() else {
            throw ChronicleError(.invariantViolated, "Only a store that has never held anything can take a start image; \(path) has.")
        }
        let scratch = startImagePath
        for suffix in ["-wal", "-shm", "-journal"] { try? FileManager.default.removeItem(atPath: scratch + suffix) }
        defer { for suffix in ["", "-wal", "-shm", "-journal"] { try? FileManager.default.removeItem(atPath: scratch + suffix) } }
        if try Self.isFrame(imageFile) {
            if imageFile != scratch { try? FileManager.default.removeItem(atPath: scratch) }
            try Self.decompressImage(imageFile, to: scratch)
            if imageFile == scratch { throw ChronicleError(.invariantViolated, "A start image's frame cannot be decompressed onto itself (\(scratch)).") }
        } else if imageFile != scratch {
            try? FileManager.default.removeItem(atPath: scratch)
            do {
                try FileManager.default.copyItem(atPath: imageFile, toPath: scratch)
            } catch {
                throw ChronicleError(.fileUnreadable, "The start image \(imageFile) cannot be copied beside the store: \(error.localizedDescription)")
            }
        }

        let image: Database
        do {
            var options = Database.Options()
            options.create = false
            image = try Database(path: scratch, options: options)
        } catch {
            throw ChronicleError(.malformedStartImage, "The start image is not a store SQLite can open: \(error.message).")
        }
        let seq = try checkImage(image)
        let created = try read { db in try LogTables.meta("created_at", in: db) }
        do {
            try image.transaction { db in
                try LogTables.setMeta("device_id", .text(deviceID.lowercased), in: db)
                try LogTables.setMeta("created_at", created, in: db)
            }
            // Its log copied in and emptied, the file alone is the whole store.
            try image.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        } catch {
            throw ChronicleError(.malformedStartImage, "The start image cannot be written: \(error).")
        }
        image.closeNow()
        try Self.syncFile(scratch)
        try afterStep?(1, "the image checked, given this device's id and synced beside the store")
        try replaceFile(with: scratch, afterStep: afterStep)
        searchLayoutState.withLock { $0 = (nil, 0) }
        try? openPhraseIndexes()
        return seq
    }

    /// Replaces this store's file with the database at `replacement` (closed, durable, in WAL
    /// mode), by a rename, with the store open: every read connection is closed first (reads in
    /// progress are waited for, new ones wait), the writer takes the old file out of WAL mode,
    /// which SQLite does only when no other connection has it open, so nothing still open can
    /// touch the new file's log; then the writer opens the new file. The caller checked it.
    func replaceFile(with replacement: String, afterStep: ((Int, String) throws -> Void)? = nil) throws {
        try writer.withLock { db in
            // Checked again here, where no write can come in between: a write made while the image
            // was on its way must not be replaced.
            guard try Self.isPristine(in: db) else {
                throw ChronicleError(.invariantViolated, "Only a store that has never held anything can take a start image; \(path) took a write meanwhile.")
            }
            guard readers.pause(timeoutSeconds: 10) else {
                throw ChronicleError(.invariantViolated, "A read of \(path) did not end in 10 s; its file was left as it was.")
            }
            defer { readers.resume() }
            checkpointer.closeConnection()
            guard checkpointer.truncate(writer: db), try db.scalarText("PRAGMA journal_mode = DELETE") == "delete" else {
                _ = try? db.execute("PRAGMA journal_mode = WAL")
                throw ChronicleError(.invariantViolated, "Another connection holds \(path) open; its file was left as it was.")
            }
            try? FileManager.default.removeItem(atPath: path + "-shm")
            try afterStep?(2, "the store's file taken out of WAL mode")
            guard rename(replacement, path) == 0 else {
                let reason = String(cString: strerror(errno))
                _ = try? db.execute("PRAGMA journal_mode = WAL")
                throw ChronicleError(.fileUnreadable, "\(replacement) could not replace \(path): \(reason).")
            }
            try Self.syncFile((path as NSString).deletingLastPathComponent.isEmpty ? "." : (path as NSString).deletingLastPathComponent)
            try afterStep?(3, "the image renamed over the store's file")
            var options = Database.Options()
            options.create = false
            let fresh = try Database(path: path, options: options)
            try checkpointer.install(on: fresh)
            db = fresh
        }
    }

    /// fsync of a file or directory.
    static func syncFile(_ path: String) throws {
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw ChronicleError(.fileUnreadable, "\(path) cannot be opened: \(String(cString: strerror(errno))).") }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw ChronicleError(.fileUnreadable, "\(path) cannot be synced: \(String(cString: strerror(errno))).") }
    }

    /// Whether the file starts with the LZ4 frame magic number.
    static func isFrame(_ file: String) throws -> Bool {
        guard let handle = FileHandle(forReadingAtPath: file) else {
            throw ChronicleError(.fileUnreadable, "The start image \(file) cannot be read.")
        }
        defer { try? handle.close() }
        let head = [UInt8]((try? handle.read(upToCount: 4)) ?? Data())
        return head.count == 4 && head.reversed().reduce(UInt32(0)) { $0 << 8 | UInt32($1) } == LZ4Frame.magic   // little-endian
    }

    /// The image's frame, decompressed into a new file at `target`.
    static func decompressImage(_ imageFile: String, to target: String) throws {
        do {
            try LZ4FrameFileDecompressor.decompressFile(imageFile, to: target)
        } catch let error as ChronicleError where [.malformedFrame, .segmentChecksum, .segmentTooLarge].contains(error.code) {
            throw ChronicleError(.malformedStartImage, "The start image is damaged: \(error.message)")
        }
    }

    /// Checks that `image` is a store this one can become: this build's store format and schema,
    /// the same tables, indexes and triggers, this library, made for no device, started from a
    /// snapshot. Returns that snapshot's seq.
    func checkImage(_ image: Database) throws -> Int64 {
        func refuse(_ what: String) -> ChronicleError {
            ChronicleError(.malformedStartImage, "The server's start image cannot start this store: \(what).")
        }
        let schemaSQL = "SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_schema WHERE name NOT LIKE 'sqlite_stat%' ORDER BY type, name"
        do {
            let theirs = try image.query(schemaSQL) { [$0.text(0), $0.text(1), $0.text(2), $0.text(3)] }
            let ours = try read { db in try db.query(schemaSQL) { [$0.text(0), $0.text(1), $0.text(2), $0.text(3)] } }
            guard theirs == ours else {
                let differing = Set(theirs.map { $0[1] }).symmetricDifference(ours.map { $0[1] }).sorted().prefix(5)
                throw refuse("its tables, indexes or triggers are not this store's (\(differing.isEmpty ? "their definitions differ" : differing.joined(separator: ", ")))")
            }
            let meta = Dictionary(try image.query("SELECT key, value FROM chronicle_meta") { ($0.text(0), $0.value(1)) }, uniquingKeysWith: { a, _ in a })
            guard meta["format_version"]?.integerValue == StoreFormat.currentVersion else { throw refuse("it is of store format v\(meta["format_version"]?.integerValue ?? 0), not v\(StoreFormat.currentVersion)") }
            guard meta["schema_fingerprint"]?.textValue == schema.fingerprint else { throw refuse("it was made with another version of the schema") }
            guard meta["library_id"]?.textValue == libraryID.lowercased else { throw refuse("it is of another library") }
            guard meta["device_id"]?.textValue == StartImageInfo.placeholderDevice.lowercased,
                  meta["last_device_seq"]?.integerValue == 0 else { throw refuse("it was made for a device") }
            guard let seq = meta["cursor"]?.integerValue, seq > 0, meta["history_base_seq"]?.integerValue == seq,
                  try image.scalarInt("SELECT max(seq) FROM chronicle_snapshots") == seq,
                  try image.scalarInt("SELECT count(*) FROM (SELECT 1 FROM chronicle_outbox LIMIT 1)") == 0,
                  meta["search_stale"]?.integerValue ?? 0 == 0 else { throw refuse("it does not hold a store started from a snapshot") }
            return seq
        } catch let error as SQLiteError {
            throw refuse("SQLite cannot read it (\(error.message))")
        }
    }
}
