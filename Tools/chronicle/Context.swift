import ChronicleCore
import ChronicleStore
import Foundation

/// What every command gets: where the store is, how to print, and the store once opened.
final class Context {
    let output: Output
    let storePath: String?
    private var opened: DeviceStore?

    init(output: Output, storePath: String?) {
        self.output = output
        self.storePath = storePath
    }

    func requirePath() throws -> String {
        guard let storePath, !storePath.isEmpty else {
            throw ChronicleError(.usage, "No store given. Pass --store PATH or set CHRONICLE_STORE.")
        }
        return storePath
    }

    func store() throws -> DeviceStore {
        if let opened { return opened }
        let store = try DeviceStore.open(at: try requirePath())
        // What the store needs before use (a rebuild for a changed schema, indexes a catch-up
        // left stale, a leftover download), with a progress bar on a terminal for the rebuild.
        let bar = ProgressBar("Rebuilding for the app's new schema")
        try store.performUpkeep { bar.update($0, $1) }
        bar.finish()
        opened = store
        return store
    }

    /// Resolves a full id or an unambiguous prefix (at least 4 characters) to a row id.
    func resolve(_ text: String, expecting entity: String? = nil) throws -> UUID {
        let store = try store()
        if let uuid = UUID(uuidString: text) { return uuid }
        guard text.count >= 4 else {
            throw ChronicleError(.usage, "'\(text)' is not an id; give the full id or at least its first 4 characters.")
        }
        var matches = try store.rows(matchingIDPrefix: text)
        if let entity { matches = matches.filter { $0.entity == entity } }
        guard let first = matches.first else {
            throw ChronicleError(.unknownEntity, "No \(entity ?? "row") has an id starting with '\(text)'.")
        }
        guard matches.count == 1 else {
            throw ChronicleError(.usage, "'\(text)' matches \(matches.count) rows (\(matches.prefix(3).map { "\($0.entity) \($0.id)" }.joined(separator: ", "))); give more characters.")
        }
        return UUID(uuidString: first.id)!
    }

    /// Writes an op and reports it.
    @discardableResult
    func write(_ type: String, entity: UUID? = nil, payload: Payload, say: (Op) -> String) throws -> Op {
        let op = try store().write(type, entity: entity, payload: payload)
        if output.json {
            output.emit(["id": op.entityID.lowercased, "op": Output.opJSON(op)])
        } else {
            output.line(say(op))
        }
        return op
    }
}
