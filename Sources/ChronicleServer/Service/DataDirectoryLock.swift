import ChronicleCore
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
    public init(dataDirectory: String, purpose: String) throws {
        try FileManager.default.createDirectory(atPath: dataDirectory, withIntermediateDirectories: true)
        let path = (dataDirectory as NSString).appendingPathComponent("server.lock")
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            throw ChronicleError(.database, "Cannot open \(path) (\(String(cString: strerror(errno)))).")
        }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let code = errno
            let holder = (try? String(contentsOfFile: path, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
            close(fd)
            guard code == EWOULDBLOCK else { throw ChronicleError(.database, "Cannot lock \(path) (\(String(cString: strerror(code)))).") }
            throw ChronicleError(.dataDirectoryInUse, "\(dataDirectory) is in use by another process\(holder.isEmpty ? "" : " (\(holder))"); stop it first.")
        }
        // Who holds it, for the sentence above (the lock itself is what counts, not this text).
        let text = "pid \(getpid()): \(purpose)\n"
        _ = ftruncate(fd, 0)
        _ = text.withCString { pwrite(fd, $0, strlen($0), 0) }
        descriptor = fd
    }

    deinit {
        _ = ftruncate(descriptor, 0)
        close(descriptor)   // lets go of the lock
    }
}
