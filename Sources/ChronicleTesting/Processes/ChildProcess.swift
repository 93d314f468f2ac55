import CSpawn
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A program run as a child process through `posix_spawn`, for tests that start `chronicle`,
/// `sqlite3`, `lz4` or `openssl`.
///
/// Foundation's `Process.run()` on Linux (swift-corelibs-foundation #5472, in Swift 6.3.1) lists
/// `/proc/self/fd` by copying 256 bytes of every directory entry, past the end of the short
/// ones; when the last entry ends a mapped page, the parent crashes. Whether it does depends
/// only on how many descriptors are open, so one unlucky start could end the whole test run.
/// This starts the program without reading `/proc` at all: the child closes every descriptor
/// from 3 up (`posix_spawn_file_actions_addclosefrom_np`), as Foundation's did.
///
/// ```swift
/// let result = try ChildProcess.run("/usr/bin/sqlite3", [path], stdin: .file(dump))
/// #expect(result.status == 0)
/// ```
public final class ChildProcess: @unchecked Sendable {
    /// Where the child's standard input comes from.
    public enum Input: Sendable {
        case null
        case file(String)
        case bytes([UInt8])
    }

    /// Where the child's standard output or error goes.
    public enum Output: Sendable {
        /// This process's own (progress a child prints passes through).
        case inherit
        case null
        /// The file, created or emptied first.
        case file(String)
        /// Kept in memory: `output` / `errors` once the child ended.
        case capture
        /// A pipe the caller reads as the child writes (`standardOutput`); standard output only.
        case pipe
    }

    /// What a child that ended said and did.
    public struct Result: Sendable {
        /// Its exit status; for a child a signal ended, the signal's number (as Foundation's
        /// `terminationStatus`).
        public var status: Int32
        public var signaled: Bool
        public var output: [UInt8]
        public var errors: [UInt8]

        public var stdout: String { String(decoding: output, as: UTF8.self) }
        public var stderr: String { String(decoding: errors, as: UTF8.self) }
    }

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    public let pid: pid_t
    /// The read end of standard output's pipe, where it was `.pipe`.
    public let standardOutput: FileHandle?
    private let lock = NSLock()
    private var ended: (status: Int32, signaled: Bool)?
    private let finished = DispatchGroup()
    private var captured: [Int32: [UInt8]] = [:]

    /// Starts `executable` (a path) with `arguments`; `environment` replaces the parent's
    /// entirely when given (nil: the parent's).
    public init(_ executable: String, _ arguments: [String], environment: [String: String]? = nil,
                stdin: Input = .null, stdout: Output = .null, stderr: Output = .null) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var parentEnds: [(fd: Int32, target: Int32)] = []   // pipe ends this process keeps
        var childEnds: [Int32] = []                          // pipe ends the child gets, closed here after the spawn
        func pipeEnds() throws -> (read: Int32, write: Int32) {
            var ends: [Int32] = [0, 0]
            guard pipe2(&ends, O_CLOEXEC) == 0 else { throw Failure(description: "pipe2 failed: \(String(cString: strerror(errno)))") }
            return (ends[0], ends[1])
        }
        var input: [UInt8]?
        var streamed: Int32?
        switch stdin {
        case .null: posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        case .file(let path): posix_spawn_file_actions_addopen(&actions, 0, path, O_RDONLY, 0)
        case .bytes(let bytes):
            let ends = try pipeEnds()
            posix_spawn_file_actions_adddup2(&actions, ends.read, 0)
            childEnds.append(ends.read)
            parentEnds.append((ends.write, 0))
            input = bytes
        }
        for (output, target) in [(stdout, Int32(1)), (stderr, Int32(2))] {
            switch output {
            case .inherit: break
            case .null: posix_spawn_file_actions_addopen(&actions, target, "/dev/null", O_WRONLY, 0)
            case .file(let path): posix_spawn_file_actions_addopen(&actions, target, path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            case .capture, .pipe:
                let ends = try pipeEnds()
                posix_spawn_file_actions_adddup2(&actions, ends.write, target)
                childEnds.append(ends.write)
                if case .pipe = output, target == 1 { streamed = ends.read } else { parentEnds.append((ends.read, target)) }
            }
        }
        posix_spawn_file_actions_addclosefrom_np(&actions, 3)

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let pairs = (environment ?? ProcessInfo.processInfo.environment).map { "\($0.key)=\($0.value)" }
        let envp = pairs.map { strdup($0) } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var child: pid_t = 0
        let spawned = posix_spawn(&child, executable, &actions, nil, argv, envp)
        childEnds.forEach { close($0) }
        guard spawned == 0 else {
            parentEnds.forEach { close($0.fd) }
            if let streamed { close(streamed) }
            throw Failure(description: "could not start \(executable): \(String(cString: strerror(spawned)))")
        }
        pid = child
        standardOutput = streamed.map { FileHandle(fileDescriptor: $0, closeOnDealloc: true) }
        // Each pipe on a thread of its own, so that a child filling one never waits on another.
        let inputBytes = input ?? []
        for end in parentEnds {
            finished.enter()
            let thread = Thread { [self] in
                if end.target == 0 {
                    Self.write(inputBytes, to: end.fd)
                } else {
                    let bytes = Self.readAll(end.fd)
                    lock.withLock { captured[end.target] = bytes }
                }
                close(end.fd)
                finished.leave()
            }
            thread.start()
        }
    }

    /// Runs the program to its end.
    public static func run(_ executable: String, _ arguments: [String], environment: [String: String]? = nil,
                           stdin: Input = .null, stdout: Output = .capture, stderr: Output = .capture) throws -> Result {
        try ChildProcess(executable, arguments, environment: environment, stdin: stdin, stdout: stdout, stderr: stderr).wait()
    }

    /// Whether the child is still running (it is reaped here once it ended).
    public var isRunning: Bool {
        lock.withLock {
            guard ended == nil else { return false }
            var status: Int32 = 0
            let reaped = waitpid(pid, &status, WNOHANG)
            guard reaped == pid else { return reaped == 0 }
            ended = Self.decode(status)
            return false
        }
    }

    /// Waits for the child to end, and for its captured output.
    @discardableResult
    public func wait() -> Result {
        let outcome: (status: Int32, signaled: Bool) = lock.withLock {
            if let ended { return ended }
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            let decoded = Self.decode(status)
            ended = decoded
            return decoded
        }
        finished.wait()
        return lock.withLock {
            Result(status: outcome.status, signaled: outcome.signaled, output: captured[1] ?? [], errors: captured[2] ?? [])
        }
    }

    /// Sends `signal` to the child (nothing once it was reaped).
    public func signal(_ signal: Int32) {
        lock.withLock { if ended == nil { _ = kill(pid, signal) } }
    }

    /// SIGTERM, as Foundation's `terminate()`.
    public func terminate() { signal(SIGTERM) }

    private static func decode(_ status: Int32) -> (status: Int32, signaled: Bool) {
        let signal = status & 0x7F
        if signal == 0 { return ((status >> 8) & 0xFF, false) }
        return (signal, true)
    }

    /// Writes `bytes` to the child's input; one that exits without reading them ends it (EPIPE:
    /// SIGPIPE is blocked on this thread, so it never reaches the process).
    private static func write(_ bytes: [UInt8], to fd: Int32) {
        var blocked = sigset_t()
        sigemptyset(&blocked)
        sigaddset(&blocked, SIGPIPE)
        pthread_sigmask(SIG_BLOCK, &blocked, nil)
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if written > 0 { offset += written } else if written < 0 && errno == EINTR { continue } else { return }
        }
    }

    private static func readAll(_ fd: Int32) -> [UInt8] {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
            if count > 0 { bytes += buffer[..<count] } else if count < 0 && errno == EINTR { continue } else { return bytes }
        }
    }
}
