import ChronicleCore
import Foundation

extension ProtocolError {
    /// The code of a library whose file on the server is damaged.
    public static let libraryDamagedCode = "library_damaged"

    /// What the server answers when its own store fails while it serves a library: the library's
    /// file damaged (`SQLiteError.isCorrupt`: 503 `library_damaged`, with a Retry-After; devices keep
    /// what they sent and try again, while the operator restores the library from a backup or salvages it), or
    /// anything else (500 `server_store`, with `what` and SQLite's message).
    public static func serverStore(_ what: String, library: UUID, _ error: any Error) -> ProtocolError {
        if let error = error as? SQLiteError, error.isCorrupt {
            return ProtocolError(503, libraryDamagedCode,
                                 "The server's copy of library \(library.lowercased) is damaged: SQLite cannot read part of its file (\(error.message)). "
                                 + "Nothing was written. The server's operator restores it from a backup (`chronicle server backup`) or salvages it "
                                 + "(`chronicle server salvage`); try again later.",
                                 retryAfterSeconds: 300)
        }
        return ProtocolError(500, "server_store", "\(what): \(error)")
    }
}
