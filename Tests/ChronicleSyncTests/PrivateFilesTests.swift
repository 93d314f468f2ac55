import ChronicleCore
import ChronicleServer
import ChronicleStore
@testable import ChronicleSync
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Chronicle's files are their owner's alone (`PrivateFiles`), whatever the umask: a server's
/// data directory 0700 and every file in it 0600, backups alike, a device store with its WAL and
/// shared-memory files 0600; what an earlier build left wider is narrowed when opened.
/// (The umask is the process's: these tests run one at a time, and put it back.)
@Suite(.serialized) struct PrivateFilesTests {
    static func mode(_ path: String) -> mode_t? {
        var info = stat()
        return stat(path, &info) == 0 ? info.st_mode & 0o7777 : nil
    }

    /// Every file under `directory`, at any depth.
    static func files(under directory: String) -> [String] {
        let enumerator = FileManager.default.enumerator(atPath: directory)
        var found: [String] = []
        while let name = enumerator?.nextObject() as? String {
            let path = (directory as NSString).appendingPathComponent(name)
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue { found.append(path) }
        }
        return found
    }

    @Test func aServersAndADevicesFilesAreTheirOwnersAloneWhateverTheUmask() async throws {
        let previous = umask(0)
        defer { umask(previous) }
        let h = try SyncHarness(.inMemory)
        let a = try h.device("A")
        let audio = try a.store.addBlob(BlobSyncTests.file(70, bytes: 3_000))
        try a.store.write("episode.save", payload: ["title": .text("Private"), "audio_ref": .text(audio.description)])
        await a.sync()
        let data = h.directory + "/server"
        let backup = h.directory + "/backup"
        _ = try ServerBackup.run(dataDirectory: data, to: backup)
        let deviceBackup = h.directory + "/A.chronicle.backup"
        try Database(path: a.store.path).vacuum(into: deviceBackup)

        for directory in [data, data + "/libraries", data + "/blobs", backup, backup + "/libraries", backup + "/blobs"] {
            #expect(Self.mode(directory) == 0o700, "\(directory): \(Self.mode(directory).map(PrivateFiles.text) ?? "missing")")
        }
        let serverFiles = Self.files(under: data) + Self.files(under: backup)
        #expect(serverFiles.contains(data + "/server.sqlite") && serverFiles.contains { $0.hasPrefix(data + "/libraries/") }
                && serverFiles.contains { $0.hasPrefix(data + "/blobs/") } && serverFiles.contains { $0.hasPrefix(backup + "/blobs/") })
        let deviceFiles = ["", "-wal", "-shm"].map { a.store.path + $0 } + [deviceBackup]
        for file in serverFiles + deviceFiles {
            #expect(Self.mode(file) == 0o600, "\(file): \(Self.mode(file).map(PrivateFiles.text) ?? "missing")")
        }
    }

    /// A data directory an earlier build left 0755, with a 0644 `server.sqlite`, and a device
    /// store left 0644: opened, they are narrowed, and the server logs each narrowing.
    @Test func whatAnEarlierBuildLeftWiderIsNarrowedOnOpen() throws {
        let root = NSTemporaryDirectory() + "chronicle-modes-\(UUID().lowercased)"
        defer { try? FileManager.default.removeItem(atPath: root) }
        let data = root + "/data"
        do { _ = try SyncService(dataDirectory: data) }
        #expect(chmod(data, 0o755) == 0 && chmod(data + "/server.sqlite", 0o644) == 0)

        let logPath = root + "/server.log"
        #expect(FileManager.default.createFile(atPath: logPath, contents: nil))
        let handle = try #require(FileHandle(forWritingAtPath: logPath))
        do { _ = try SyncService(dataDirectory: data, log: ServerLog(to: handle)) }
        try handle.close()
        #expect(Self.mode(data) == 0o700 && Self.mode(data + "/server.sqlite") == 0o600)
        let log = try String(contentsOfFile: logPath, encoding: .utf8)
        #expect(log.contains(#""event":"file_mode_narrowed""#) && log.contains(#""mode_was":"0755""#) && log.contains(#""mode_was":"0644""#), "\(log)")

        let storePath = root + "/device.chronicle"
        do { _ = try DeviceStore.create(at: storePath, schema: .readItLater) }
        #expect(chmod(storePath, 0o644) == 0)
        _ = try DeviceStore.open(at: storePath)
        #expect(Self.mode(storePath) == 0o600)
    }
}
