import ChronicleTesting
import Foundation
import Testing

/// The tests' way of starting programs (`ChildProcess`, on `posix_spawn`), which replaced
/// Foundation's `Process` after its `/proc/self/fd` scan crashed a full run of the suite.
@Suite struct ChildProcessTests {
    @Test func statusOutputAndErrorsComeBack() throws {
        let result = try ChildProcess.run("/bin/sh", ["-c", "echo out; echo err >&2; exit 3"])
        #expect(result.status == 3 && !result.signaled)
        #expect(result.stdout == "out\n" && result.stderr == "err\n")
    }

    @Test func inputOfAMebibyteGoesInAndComesBackWhole() throws {
        let bytes = (0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let result = try ChildProcess.run("/bin/cat", [], stdin: .bytes(bytes))
        #expect(result.status == 0 && result.output == bytes)
    }

    @Test func aChildThatReadsNoInputLeavesThisProcessStanding() throws {
        // 4 MiB is more than a pipe holds: the writer meets EPIPE, never SIGPIPE.
        let result = try ChildProcess.run("/bin/true", [], stdin: .bytes([UInt8](repeating: 7, count: 4 << 20)))
        #expect(result.status == 0)
    }

    @Test func aSignalThatEndsTheChildIsReported() throws {
        let child = try ChildProcess("/bin/sleep", ["30"])
        #expect(child.isRunning)
        child.signal(SIGKILL)
        let result = child.wait()
        #expect(result.signaled && result.status == SIGKILL)
        #expect(!child.isRunning)
    }

    @Test func theChildInheritsNoDescriptorButItsThree() throws {
        let fd = open("/dev/null", O_RDONLY)   // not close-on-exec: Foundation's Process closed such ones in the child too
        defer { close(fd) }
        #expect(fd > 2)
        let result = try ChildProcess.run("/bin/sh", ["-c", "ls /proc/$$/fd"])
        let open = Set(result.stdout.split(separator: "\n").compactMap { Int32($0) })
        #expect(!open.contains(fd), "\(open)")
        #expect(open.isSuperset(of: [0, 1, 2]), "\(open)")
    }

    @Test func environmentAndFilesAreTheCallersChoice() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("child-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let result = try ChildProcess.run("/bin/sh", ["-c", "echo $CHILD_PROCESS_TEST; echo to-file >&2"],
                                          environment: ["CHILD_PROCESS_TEST": "given", "PATH": "/usr/bin:/bin"], stderr: .file(path))
        #expect(result.stdout == "given\n" && result.errors.isEmpty)
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "to-file\n")
        #expect(throws: ChildProcess.Failure.self) { try ChildProcess.run("/nonexistent/program", []) }
    }
}
