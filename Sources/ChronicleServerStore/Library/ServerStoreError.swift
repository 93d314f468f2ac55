import ChronicleCore
import ChronicleStore
import Foundation

extension ProtocolError {
    /// What the server answers when its own store fails while it serves a library: the library's
    /// file damaged (`SQLiteError.isCorrupt`: 503 `library_damaged`, with a Retry-After; devices keep
    /// what they sent and try again, while the operator restores the library from a backup or salvages it), or
    /// anything else (500 `server_store`, with `what`). SQLite's own message goes to the
    /// server's log (`detail`), never into the answer.
    public static func serverStore(_ what: String, library: UUID, _ error: any Error) -> ProtocolError {
        if let error = error as? SQLiteError, error.isCorrupt {
            return ProtocolError(503, .libraryDamaged,
                                 "The server's copy of library \(library.lowercased) is damaged: SQLite cannot read part of its file. "
                                 + "Nothing was written. The server's operator restores it from a backup (`chronicle server backup`) or salvages it "
                                 + "(`chronicle server salvage`); try again later.",
                                 detail: error.message, retryAfterSeconds: 300)
        }
        return internalFailure(what, error)
    }

    /// 500 `server_store`: the server's own store failed in a way nothing expected. The sentence
    /// says what was being done; the error itself goes to the log under the request's id.
    public static func internalFailure(_ what: String, _ error: any Error) -> ProtocolError {
        ProtocolError(500, .serverStore, "\(what); the server's log has the reason under this request's id.", detail: "\(error)")
    }
}
