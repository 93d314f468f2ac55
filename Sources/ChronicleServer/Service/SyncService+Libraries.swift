import ChronicleCore
import ChronicleServerStore
import ChronicleStore
import Dispatch
import Foundation

// Who is asking, and the libraries a service holds open for them.
extension SyncService {
    func identify(_ token: String) throws(ProtocolError) -> DeviceIdentity {
        guard let identity = try accounts.authenticate(token) else {
            throw ProtocolError(401, .unauthorized, "The bearer token is missing, malformed or no longer valid; sign in again with `chronicle login`.")
        }
        return identity
    }

    /// The device behind `token`, which must belong to `library` (the library is not opened: blobs
    /// are kept apart from it).
    func identify(_ token: String, library: UUID) throws(ProtocolError) -> DeviceIdentity {
        let identity = try identify(token)
        guard identity.libraryID == library else {
            throw ProtocolError(403, .forbiddenLibrary, "This token belongs to library \(identity.libraryID.lowercased), not \(library.lowercased).")
        }
        return identity
    }

    func authorize(_ token: String, library: UUID) throws(ProtocolError) -> (DeviceIdentity, ServerLibrary) {
        (try identify(token, library: library), try self.library(library))
    }

    /// Libraries open now (at most `limits.openLibrariesMax` unless requests hold more).
    var openLibraryCount: Int { libraries.withLock { $0.count } }

    /// The `/metrics` lines of the open libraries: how many are open, and how many times one was
    /// opened (a count that climbs much faster than new users sign up says the cap is too low).
    func renderLibraryMetrics() -> String {
        let (open, opened, deleting, deleted) = libraries.withLock { ($0.count, $0.opened, $0.deleting.count, $0.deletions) }
        return """
            # HELP chronicle_libraries_open Libraries the server holds open now (serve --open-libraries caps them).
            # TYPE chronicle_libraries_open gauge
            chronicle_libraries_open \(open)
            # HELP chronicle_libraries_opened_total Times a library was opened: first use, or again after it was closed to stay under the cap.
            # TYPE chronicle_libraries_opened_total counter
            chronicle_libraries_opened_total \(opened)
            # HELP chronicle_library_deletions_waiting Libraries the operator asked to delete that a request or parked pull still holds (deleted once let go).
            # TYPE chronicle_library_deletions_waiting gauge
            chronicle_library_deletions_waiting \(deleting)
            # HELP chronicle_libraries_deleted_total Library files this server deleted (server remove-user --delete-library, server delete-library).
            # TYPE chronicle_libraries_deleted_total counter
            chronicle_libraries_deleted_total \(deleted)

            """
    }

    /// The library's store, opened on first use.
    public func library(_ id: UUID) throws(ProtocolError) -> ServerLibrary {
        while true {
            if let library = try openLibrary(id) { return library }
        }
    }

    /// The library, or nil where a library was deleted while its owner was being read (read again).
    func openLibrary(_ id: UUID) throws(ProtocolError) -> ServerLibrary? {
        let remake = shared?.needsRemaking(id) ?? false
        let (found, deletions) = libraries.withLock { open in
            // A replica that cannot catch up is closed once nothing holds it, and made anew below.
            if remake { _ = open.closeUnused(id) }
            return (open.use(id), open.deletions)
        }
        if let found { return found }
        let records: [UserRecord]
        do { records = try accounts.libraries() } catch {
            throw accounts.unavailable(error, "The server could not read its accounts")
        }
        do {
            guard let record = records.first(where: { $0.libraryID == id }) else {
                throw ProtocolError(404, .unknownLibrary, "The server has no library \(id.lowercased).")
            }
            guard let schema = schemas.first(where: { $0.name == record.schemaName }) ?? Schema.named(record.schemaName) else {
                throw ProtocolError(500, .unknownSchema, "Library \(id.lowercased) uses schema '\(record.schemaName)', which this server build does not include.")
            }
            let path = Accounts.libraryPath(dataDirectory, id)
            return try libraries.withLock { open -> ServerLibrary? in
                if let existing = open.use(id) { return existing }
                // A library deleted since its owner was read (the owner removed meanwhile) is not
                // made again, empty, under its old name.
                if open.deleting.contains(id) {
                    throw ProtocolError(404, .unknownLibrary, "The server has no library \(id.lowercased): it is being deleted.")
                }
                guard open.deletions == deletions else { return nil }
                let caps = limits.installsFreeTierCaps ? FreeTierCap.caps(of: schema, overriddenBy: limits.freeTierCaps) : nil
                let library = try shared?.library(id, schema: schema, caps: caps)
                    ?? ServerLibrary.openOrCreate(at: path, libraryID: id, schema: schema, clock: clock, caps: caps)
                if let migration = library.schemaMigration {
                    log.log("schema", ["library": .text(id.lowercased), "schema": .text(schema.name), "from": .integer(migration.fromVersion),
                                       "to": .integer(Int64(schema.version)), "rebuilt_s": .real((migration.seconds * 1000).rounded() / 1000)])
                }
                open.add(library, max: limits.openLibrariesMax)
                // Extensions catch up on what the library took while they did not run (the server stopped first).
                for each in extensions { each.opened(library: id) }
                return library
            }
        } catch let error as ProtocolError {
            throw error
        } catch {
            throw ProtocolError.serverStore("The server could not open library \(id.lowercased)", library: id, error)
        }
    }
}
