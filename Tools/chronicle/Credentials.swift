import ChronicleCore
import Foundation

/// Where a signed-in store keeps its server and bearer token: `<store>.credentials`,
/// JSON, file mode 0600. The token is never printed.
struct Credentials: Codable {
    var server: String
    var user: String
    var library: String
    var token: String

    static func path(forStore store: String) -> String { store + ".credentials" }

    static func load(forStore store: String) throws -> Credentials {
        let path = path(forStore: store)
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ChronicleError(.notSignedIn, "This store is not signed in to a server. Run `chronicle login --server URL --user NAME` first.")
        }
        do {
            return try JSONDecoder().decode(Credentials.self, from: data)
        } catch {
            throw ChronicleError(.notSignedIn, "\(path) is damaged; sign in again with `chronicle login`.")
        }
    }

    /// Writes atomically: a 0600 temporary file renamed over the old one.
    func save(forStore store: String) throws {
        let path = Self.path(forStore: store)
        let temporary = path + ".tmp"
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        let data = try encoder.encode(self)
        try? FileManager.default.removeItem(atPath: temporary)
        guard FileManager.default.createFile(atPath: temporary, contents: data, attributes: [.posixPermissions: 0o600]) else {
            throw ChronicleError(.database, "Could not write \(temporary).")
        }
        guard rename(temporary, path) == 0 else {
            throw ChronicleError(.database, "Could not move the credentials into place at \(path).")
        }
    }
}

extension ChronicleError.Code {
    static let notSignedIn = ChronicleError.Code(rawValue: "not_signed_in")
    static let offline = ChronicleError.Code(rawValue: "offline")
    static let serverRefused = ChronicleError.Code(rawValue: "server_refused")
}

/// Runs async work from the synchronous command functions and waits for it.
final class Blocking<T: Sendable>: @unchecked Sendable {
    private var result: Result<T, Error>?
    private let done = DispatchSemaphore(value: 0)

    static func run(_ body: @escaping @Sendable () async throws -> T) throws -> T {
        let box = Blocking<T>()
        Task.detached {
            do { box.result = .success(try await body()) } catch { box.result = .failure(error) }
            box.done.signal()
        }
        box.done.wait()
        return try box.result!.get()
    }
}

/// Relative times for people: "3 hours ago".
enum RelativeTime {
    static func ago(_ milliseconds: Int64, now: Int64) -> String {
        let seconds = max(0, (now - milliseconds) / 1000)
        func unit(_ n: Int64, _ name: String) -> String { "\(n) \(name)\(n == 1 ? "" : "s") ago" }
        switch seconds {
        case ..<10: return "just now"
        case ..<60: return unit(seconds, "second")
        case ..<3600: return unit(seconds / 60, "minute")
        case ..<86_400: return unit(seconds / 3600, "hour")
        default: return unit(seconds / 86_400, "day")
        }
    }
}
