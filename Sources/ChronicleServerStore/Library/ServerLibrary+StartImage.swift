import ChronicleCore
import ChronicleStore
import Foundation

extension ServerLibrary {
    /// The image file (one LZ4 frame) and the JSON file that describes it, beside the library's file.
    public var startImagePath: String { path + ".start-image.lz4" }
    public var startImageInfoPath: String { path + ".start-image.json" }

    /// The start image on disk, if it is of this file's newest snapshot (and of its incarnation).
    public func currentStartImage() throws -> StartImageInfo? {
        guard let data = FileManager.default.contents(atPath: startImageInfoPath),
              let info = try? JSONDecoder().decode(StartImageInfo.self, from: data),
              info.libraryID == libraryID, info.incarnation == incarnation,
              info.seq == (try latestSnapshotSeq()),
              let attributes = try? FileManager.default.attributesOfItem(atPath: startImagePath),
              (attributes[.size] as? NSNumber)?.int64Value == info.imageBytes else { return nil }
        return info
    }

    /// Builds the start image of the newest snapshot, unless the one on disk is of it already
    /// (or there is no snapshot: nil). The library is only read (pushes and pulls go on); the
    /// work happens in a scratch directory beside it and the image replaces the old one by
    /// renames, the image first, so a reader never finds a description of another file.
    @discardableResult
    public func buildStartImage(progress: ((String) -> Void)? = nil) throws -> StartImageInfo? {
        if let current = try currentStartImage() { return current }
        let start = DispatchTime.now().uptimeNanoseconds
        guard let (seq, frame) = try latestSnapshot() else { return nil }
        let baseOpID = try read { db in try Self.opID(at: seq, in: db) }
        let scratch = path + ".start-image-build"
        try? FileManager.default.removeItem(atPath: scratch)
        try PrivateFiles.directory(scratch)
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let storePath = scratch + "/store.chronicle"
        do {
            let store = try DeviceStore.create(at: storePath, schema: schema, libraryID: libraryID,
                                               deviceID: StartImageInfo.placeholderDevice, clock: clock)
            progress?("starting a store from the snapshot at seq \(seq)")
            try store.bootstrap(from: SnapshotFrame(bytes: frame), baseOpID: baseOpID, incarnation: incarnation)
            progress?("filling its phrase indexes")
            try store.completePhraseIndexes()
            _ = store.waitForPhraseIndexing(timeoutSeconds: 600)
            try store.prepareAsStartImage()
        }
        let storeBytes = (try FileManager.default.attributesOfItem(atPath: storePath)[.size] as? NSNumber)?.int64Value ?? 0
        progress?("compressing it")
        // LZ4's high-compression mode: a fifth fewer bytes to download than its fast one (SQLite's
        // pages; the snapshot's frame inside is compressed already), at no cost to the reading.
        let imageBytes = try LZ4FrameWriter.compressFile(storePath, to: scratch + "/image.lz4", level: 3)
        let info = StartImageInfo(libraryID: libraryID, seq: seq, baseOpID: baseOpID, incarnation: incarnation,
                                  storeFormat: StoreFormat.currentVersion, schemaName: schema.name, schemaVersion: schema.version,
                                  schemaFingerprint: schema.fingerprint, imageBytes: imageBytes, storeBytes: storeBytes,
                                  buildSeconds: Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9,
                                  builtAt: clock.nowMilliseconds())
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        guard FileManager.default.createFile(atPath: scratch + "/image.json", contents: try encoder.encode(info),
                                             attributes: [.posixPermissions: Int(PrivateFiles.fileMode)]) else {
            throw ChronicleError(.database, "Cannot write \(scratch)/image.json.")
        }
        try? FileManager.default.removeItem(atPath: startImageInfoPath)
        try? FileManager.default.removeItem(atPath: startImagePath)
        try FileManager.default.moveItem(atPath: scratch + "/image.lz4", toPath: startImagePath)
        try FileManager.default.moveItem(atPath: scratch + "/image.json", toPath: startImageInfoPath)
        return info
    }

    /// Deletes the start image (the library is deleted, or its history was rewritten).
    public func removeStartImage() {
        try? FileManager.default.removeItem(atPath: startImageInfoPath)
        try? FileManager.default.removeItem(atPath: startImagePath)
    }
}
