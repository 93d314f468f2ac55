// chronicle-test-server: a real sync server for fault tests, with a fault wrapped around its
// routes through `SyncServer`'s `wrapping` seam. Test support only: `chronicle serve` has no
// faults in it.
//
//   chronicle-test-server --data DIR [--port N] --fault-503-rate R
//
// The first line on stdout says where it listens (`… http://127.0.0.1:PORT`); the server's log goes
// to stderr, one JSON object a line; SIGTERM or SIGINT stops it.
import ChronicleCore
import ChronicleServer
import ChronicleTesting
import Foundation

func option(_ name: String) -> String? {
    let args = CommandLine.arguments
    guard let index = args.firstIndex(of: "--" + name), index + 1 < args.count else { return nil }
    return args[index + 1]
}

let usage = "usage: chronicle-test-server --data DIR [--port N] --fault-503-rate R"
if CommandLine.arguments.contains("--help") {
    print(usage + "\n  answers the fraction R (0…1) of /v1/libraries requests 503, half before and half after handling them")
    exit(0)
}
guard let data = option("data"), let rate = option("fault-503-rate").flatMap(Double.init), (0...1).contains(rate),
      let port = UInt16(option("port") ?? "0") else {
    FileHandle.standardError.write(Data((usage + "\n").utf8))
    exit(64)
}

for number in [SIGTERM, SIGINT] { signal(number, SIG_IGN) }
let stop = DispatchSemaphore(value: 0)
let sources = [SIGTERM, SIGINT].map { number in
    let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
    source.setEventHandler { stop.signal() }
    source.resume()
    return source
}

do {
    var configuration = HTTPServer.Configuration()
    configuration.port = port
    let server = try SyncServer(dataDirectory: data, configuration: configuration, log: ServerLog(to: .standardError)) { routes in
        FaultInjectingHandler(wrapping: routes, rate: rate)
    }
    FileHandle.standardOutput.write(Data("chronicle-test-server: \(server.url), answering \(rate) of library requests 503\n".utf8))
    stop.wait()
    server.stop()
    withExtendedLifetime(sources) {}
} catch {
    FileHandle.standardError.write(Data("chronicle-test-server: \(error)\n".utf8))
    exit(70)
}
