import ChronicleCore
import ChronicleStore
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Holds a server's data directory for one process: `chronicle serve` for as long as it runs,
/// and the commands that need no server running on it (`chronicle server salvage`). An advisory
/// lock (`flock`) on `DIR/server.lock`, which the kernel lets go of when the process ends,
/// however it ends: a server killed with SIGKILL leaves no stale lock behind.
///
/// The other administrative commands (add-user, set-plan, compact, backup) work beside a
/// running server and do not take it.
public final class DataDirectoryLock: Sendable {
    private let descriptor: Int32

    /// Takes the lock, or throws `data_directory_in_use` saying what holds it. `purpose` names
    /// what this process does with the directory, for the sentence another one gets.
    ///
    /// `shared`: servers whose libraries are ordered in a database they share (`serve --postgres`)
    /// hold the directory together, and keep out everything that needs it alone.
    public convenience init(dataDirectory: String, purpose: String, shared: Bool = false) throws {
        // Made private where missing; an existing one is narrowed by the server that opens it
        // (`SyncService`), which logs it.
        if !FileManager.default.fileExists(atPath: dataDirectory) { try PrivateFiles.directory(dataDirectory) }
        let path = (dataDirectory as NSString).appendingPathComponent("server.lock")
        try self.init(path: path, what: dataDirectory, purpose: purpose, shared: shared)
    }

    /// The lock on the file at `path` (made if missing); `what` names what it guards in the refusal.
    public init(path: String, what: String, purpose: String, shared: Bool = false) throws {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, PrivateFiles.fileMode)
        guard fd >= 0 else {
            throw ChronicleError(.database, "Cannot open \(path) (\(String(cString: strerror(errno)))).")
        }
        let dataDirectory = what
        guard flock(fd, (shared ? LOCK_SH : LOCK_EX) | LOCK_NB) == 0 else {
            let code = errno
            let holder = (try? String(contentsOfFile: path, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
            close(fd)
            guard code == EWOULDBLOCK else { throw ChronicleError(.database, "Cannot lock \(path) (\(String(cString: strerror(code)))).") }
            throw ChronicleError(.dataDirectoryInUse, "\(dataDirectory) is in use by another process\(holder.isEmpty ? "" : " (\(holder))"); stop it first.")
        }
        // Who holds it, for the sentence above (the lock itself is what counts, not this text);
        // holders of a shared lock leave the text to each other.
        let text = "pid \(getpid()): \(purpose)\n"
        if !shared {
            _ = ftruncate(fd, 0)
            _ = text.withCString { pwrite(fd, $0, strlen($0), 0) }
        }
        descriptor = fd
        self.shared = shared
    }

    private let shared: Bool

    deinit {
        if !shared { _ = ftruncate(descriptor, 0) }
        close(descriptor)   // lets go of the lock
    }

    /// The first of `DIR/1`, `DIR/2`… no other process holds (made if missing), held until this lock
    /// goes: a directory of this process's own that its next run finds again.
    public static func claimSubdirectory(of directory: String, purpose: String) throws -> (path: String, lock: DataDirectoryLock) {
        try PrivateFiles.directory(directory)
        for index in 1...1_000 {
            let path = (directory as NSString).appendingPathComponent(String(index))
            try PrivateFiles.directory(path)
            do {
                let lock = try DataDirectoryLock(path: path + "/claim.lock", what: path, purpose: purpose)
                return (path, lock)
            } catch let error as ChronicleError where error.code == .dataDirectoryInUse {
                continue
            }
        }
        throw ChronicleError(.dataDirectoryInUse, "Every directory under \(directory) is in use by another process.")
    }
}
