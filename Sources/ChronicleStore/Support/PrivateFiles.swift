import ChronicleCore
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Chronicle's files are readable by their owner alone, whatever the process's umask: a
/// server's `server.sqlite` holds password and token hashes, and every library, blob, backup
/// and device store holds a person's data. Directories are 0700 and files 0600; whatever is
/// made goes through here, and what an earlier build left wider is narrowed when opened.
public enum PrivateFiles {
    public static let directoryMode: mode_t = 0o700
    public static let fileMode: mode_t = 0o600

    /// A mode as `ls` and the logs spell it: `0755`.
    public static func text(_ mode: mode_t) -> String {
        "0" + String(mode & 0o7777, radix: 8)
    }

    /// Makes the directory at `path` (and missing parents) 0700, or narrows an existing one
    /// that lets anyone else in. Returns the mode it had where it was narrowed, for a log line.
    @discardableResult
    public static func directory(_ path: String) throws -> mode_t? {
        if let mode = existingMode(path) { return try narrow(path, mode) }
        let parent = (path as NSString).deletingLastPathComponent
        if !parent.isEmpty, parent != path, existingMode(parent) == nil { try directory(parent) }
        // mkdir's mode passes through the umask; the chmod after it does not.
        if mkdir(path, directoryMode) != 0, errno != EEXIST { throw failure("make the directory", path) }
        guard chmod(path, directoryMode) == 0 else { throw failure("set the mode of", path) }
        return nil
    }

    /// Makes an empty file at `path` 0600 where there is none (SQLite then keeps the database it
    /// writes there, and gives its `-wal` and `-shm` files the same mode), or narrows an
    /// existing one. Returns the mode it had where it was narrowed.
    @discardableResult
    public static func file(_ path: String) throws -> mode_t? {
        if let mode = existingMode(path) { return try narrow(path, mode) }
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, fileMode)
        if fd < 0 {
            guard errno == EEXIST, let mode = existingMode(path) else { throw failure("make", path) }
            return try narrow(path, mode)   // made by another process meanwhile
        }
        defer { close(fd) }
        guard fchmod(fd, fileMode) == 0 else { throw failure("set the mode of", path) }
        return nil
    }

    /// Takes from what exists at `path` whatever it grants anyone but its owner; a missing path
    /// is left missing. Returns the mode it had where it was narrowed.
    @discardableResult
    public static func narrowIfPresent(_ path: String) throws -> mode_t? {
        guard let current = existingMode(path) else { return nil }
        return try narrow(path, current)
    }

    /// A database's file and the `-wal` and `-shm` files SQLite keeps beside it, narrowed to
    /// 0600 where present. Returns the paths that were wider and their modes.
    public static func narrowDatabase(_ path: String) throws -> [(path: String, mode: mode_t)] {
        var narrowed: [(path: String, mode: mode_t)] = []
        for suffix in ["", "-wal", "-shm"] {
            if let mode = try narrowIfPresent(path + suffix) { narrowed.append((path + suffix, mode)) }
        }
        return narrowed
    }

    /// Whether `path` names a file on disk rather than an in-memory or URI database.
    static func isPlainPath(_ path: String) -> Bool {
        !path.isEmpty && path != ":memory:" && !path.hasPrefix("file:")
    }

    private static func existingMode(_ path: String) -> mode_t? {
        var info = stat()
        return stat(path, &info) == 0 ? info.st_mode : nil
    }

    private static func narrow(_ path: String, _ current: mode_t) throws -> mode_t? {
        // Only the bits others hold go; the owner's stay as they were (a read-only file stays read-only).
        // A directory everyone shares on purpose (sticky, as /tmp) is never narrowed.
        guard current & 0o077 != 0, current & S_ISVTX == 0 else { return nil }
        guard chmod(path, current & 0o700) == 0 else { throw failure("narrow the mode of", path) }
        return current & 0o7777
    }

    private static func failure(_ what: String, _ path: String) -> ChronicleError {
        ChronicleError(.database, "Cannot \(what) \(path) (\(String(cString: strerror(errno)))).")
    }
}
