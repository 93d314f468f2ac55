import ChronicleCore

/// One subcommand of `chronicle`.
struct Command: Sendable {
    let name: String
    let summary: String
    let usage: String
    let details: String
    let run: @Sendable (inout Arguments, Context) throws -> Int32

    var help: String {
        var text = "\(summary)\n\nUsage: \(usage)\n"
        if !details.isEmpty { text += "\n\(details)\n" }
        text += """

            Global options:
              --store PATH   the store file (or set CHRONICLE_STORE)
              --json         print JSON for scripts instead of text
              --help         show this help

            """
        return text
    }
}

/// Exit codes, stable for scripts.
enum ExitCode {
    static let success: Int32 = 0
    /// verify or rebuild --verify found a problem.
    static let verificationFailed: Int32 = 1
    /// The command line was wrong.
    static let usage: Int32 = 2
    /// The store refused the request (unknown id, invalid value, …).
    static let refused: Int32 = 3
    /// The store could not be opened (missing, not a store, future version) or is damaged.
    static let store: Int32 = 4
    /// `sync`: the server could not be reached (nothing is lost; try again later).
    static let offline: Int32 = 5
    /// `sync`, `login`: the server refused the request (signed out, bad password, wrong library).
    static let serverRefused: Int32 = 6
    /// An unexpected failure (SQLite error, disk full).
    static let failure: Int32 = 70

    static func of(_ error: ChronicleError) -> Int32 {
        switch error.code {
        case .usage: usage
        case .storeMissing, .storeExists, .futureStoreVersion, .notAChronicleStore, .schemaMismatch, .storeDamaged, .dataDirectoryInUse: store
        case .digestMismatch: verificationFailed
        case .offline: offline
        case .serverRefused: serverRefused
        case .database, .diskFull, .invariantViolated: failure
        default: refused
        }
    }
}
