import ChronicleCore
import ChronicleStore
import Foundation

extension Command {
    static let writeCommands: [Command] = [
        Command(name: "init", summary: "Create a new, empty store.",
                usage: "chronicle init [--schema readitlater|fieldservice] [--library ID] [--device ID]",
                details: "Makes a store file holding the log, outbox, projection and search indexes.\nIds default to fresh random ones.") { args, ctx in
            let schemaName = args.option("schema") ?? "readitlater"
            let library = try args.option("library").map { try parseUUID($0, "--library") }
            let device = try args.option("device").map { try parseUUID($0, "--device") }
            try args.finish(usage: "chronicle init [--schema NAME] [--library ID] [--device ID]")
            guard let schema = Schema.named(schemaName) else {
                throw ChronicleError(.usage, "Unknown schema '\(schemaName)'; choose readitlater or fieldservice.")
            }
            let path = try ctx.requirePath()
            let store = try DeviceStore.create(at: path, schema: schema, libraryID: library, deviceID: device)
            if ctx.output.json {
                ctx.output.emit(["store": path, "schema": schema.name, "schema_version": schema.version,
                                 "library_id": store.libraryID.lowercased, "device_id": store.deviceID.lowercased])
            } else {
                ctx.output.line("Created \(path) (schema \(schema.name) v\(schema.version), library \(store.libraryID.lowercased), device \(store.deviceID.lowercased)).")
            }
            return ExitCode.success
        },
        Command(name: "save", summary: "Save a link as a new article.",
                usage: "chronicle save URL [--title TITLE] [--author AUTHOR]", details: "Prints the new article's id.") { args, ctx in
            let url = try args.requirePositional("URL", usage: "chronicle save URL [--title TITLE]")
            var payload: Payload = ["url": .text(url)]
            if let title = args.option("title") { payload["title"] = .text(title) }
            if let author = args.option("author") ?? args.option("byline") { payload["author"] = .text(author) }
            try args.finish(usage: "chronicle save URL [--title TITLE] [--author AUTHOR]")
            try ctx.write("article.save", payload: payload) { "Saved article \($0.entityID.lowercased)" }
            return ExitCode.success
        },
        Command(name: "update", summary: "Change an article's title, author, status or favorite flag.",
                usage: "chronicle update ID [--title T] [--author A] [--status saved|archived] [--favorite true|false]", details: "") { args, ctx in
            let usage = "chronicle update ID [--title T] [--author A] [--status saved|archived] [--favorite true|false]"
            let id = try ctx.resolve(try args.requirePositional("ID", usage: usage), expecting: "article")
            var payload: Payload = [:]
            if let title = args.option("title") { payload["title"] = .text(title) }
            if let author = args.option("author") ?? args.option("byline") { payload["author"] = .text(author) }
            if let status = args.option("status") { payload["status"] = .text(status) }
            if let favorite = args.option("favorite") {
                guard let flag = Bool(favorite.lowercased()) else { throw ChronicleError(.usage, "--favorite takes true or false.") }
                payload["favorite"] = .bool(flag)
            }
            try args.finish(usage: usage)
            try ctx.write("article.update", entity: id, payload: payload) { "Updated article \($0.entityID.lowercased)" }
            return ExitCode.success
        },
        tagCommand("tag", summary: "Add a tag to an article.") { "Tagged \($0) with \($1)" },
        tagCommand("untag", summary: "Remove a tag from an article.") { "Removed tag \($1) from \($0)" },
        Command(name: "highlight", summary: "Highlight a passage of an article.",
                usage: "chronicle highlight ID --quote TEXT [--color yellow|green|blue|pink|purple] [--note TEXT] [--position N]",
                details: "Prints the new highlight's id.") { args, ctx in
            let usage = "chronicle highlight ID --quote TEXT [--color C] [--note TEXT] [--position N]"
            let article = try ctx.resolve(try args.requirePositional("ID", usage: usage), expecting: "article")
            guard let quote = args.option("quote") else { throw ChronicleError(.usage, "Missing --quote. Usage: \(usage)") }
            var payload: Payload = ["article_id": .text(article.lowercased), "quote": .text(quote)]
            if let color = args.option("color") { payload["color"] = .text(color) }
            if let note = args.option("note") { payload["note"] = .text(note) }
            if let position = args.option("position") {
                guard let n = Int64(position) else { throw ChronicleError(.usage, "--position takes a whole number.") }
                payload["position"] = .integer(n)
            }
            try args.finish(usage: usage)
            try ctx.write("highlight.create", payload: payload) { "Highlighted in \(article.lowercased): highlight \($0.entityID.lowercased)" }
            return ExitCode.success
        },
        Command(name: "note", summary: "Attach a note to an article.", usage: "chronicle note ID TEXT", details: "Prints the new note's id.") { args, ctx in
            let article = try ctx.resolve(try args.requirePositional("ID", usage: "chronicle note ID TEXT"), expecting: "article")
            let text = try args.requirePositional("TEXT", usage: "chronicle note ID TEXT")
            try args.finish(usage: "chronicle note ID TEXT")
            try ctx.write("note.create", payload: ["article_id": .text(article.lowercased), "body": .text(text)]) { "Added note \($0.entityID.lowercased)" }
            return ExitCode.success
        },
        Command(name: "progress", summary: "Record reading progress (0 to 1) for an article.",
                usage: "chronicle progress ID FRACTION",
                details: "Progress is forward-only: a lower value from another device is ignored,\nbut re-reading on the same device within 5 minutes may move it back.") { args, ctx in
            let id = try ctx.resolve(try args.requirePositional("ID", usage: "chronicle progress ID FRACTION"), expecting: "article")
            let text = try args.requirePositional("FRACTION", usage: "chronicle progress ID FRACTION")
            try args.finish(usage: "chronicle progress ID FRACTION")
            guard let fraction = Double(text), fraction.isFinite else {
                throw ChronicleError(.invalidValue, "Progress must be a number from 0 to 1 (got '\(text)').")
            }
            try ctx.write("article.progress", entity: id, payload: ["progress": .real(fraction)]) { "Progress of \($0.entityID.lowercased) is \(text)" }
            return ExitCode.success
        },
        Command(name: "collection", summary: "Create and change collections of articles and episodes.",
                usage: "chronicle collection create NAME [--position N] | add COLLECTION ID | remove COLLECTION ID | rename COLLECTION NAME | delete COLLECTION | restore COLLECTION | list",
                details: "") { args, ctx in
            let usage = "chronicle collection create|add|remove|rename|delete|restore|list …"
            let action = try args.requirePositional("an action (create, add, remove, rename, delete, restore, list)", usage: usage)
            switch action {
            case "create":
                let name = try args.requirePositional("NAME", usage: "chronicle collection create NAME [--position N]")
                var payload: Payload = ["name": .text(name)]
                if let position = args.option("position") {
                    guard let p = Double(position) else { throw ChronicleError(.usage, "--position takes a number.") }
                    payload["position"] = .real(p)
                }
                try args.finish(usage: "chronicle collection create NAME [--position N]")
                try ctx.write("collection.create", payload: payload) { "Created collection \($0.entityID.lowercased)" }
            case "add", "remove":
                let u = "chronicle collection \(action) COLLECTION ID"
                let collection = try ctx.resolve(try args.requirePositional("COLLECTION", usage: u), expecting: "collection")
                let memberText = try args.requirePositional("ID (an article or an episode)", usage: u)
                try args.finish(usage: u)
                // Articles and episodes have their own ops since schema v3 (collection.add_article / add_episode).
                let member = try ctx.resolveAny(memberText)
                let kind = try ctx.store().entityType(of: member)?.name
                guard kind == "article" || kind == "episode" else {
                    throw ChronicleError(.invalidValue, "\(memberText) is not an article or an episode; collections hold those.")
                }
                try ctx.write("collection.\(action)_\(kind!)", entity: collection, payload: ["\(kind!)_id": .text(member.lowercased)]) { _ in
                    action == "add" ? "Added \(kind!) \(member.lowercased) to \(collection.lowercased)" : "Removed \(kind!) \(member.lowercased) from \(collection.lowercased)"
                }
            case "rename":
                let u = "chronicle collection rename COLLECTION NAME"
                let collection = try ctx.resolve(try args.requirePositional("COLLECTION", usage: u), expecting: "collection")
                let name = try args.requirePositional("NAME", usage: u)
                try args.finish(usage: u)
                try ctx.write("collection.update", entity: collection, payload: ["name": .text(name)]) { "Renamed \($0.entityID.lowercased) to \(name)" }
            case "delete", "restore":
                let u = "chronicle collection \(action) COLLECTION"
                let collection = try ctx.resolve(try args.requirePositional("COLLECTION", usage: u), expecting: "collection")
                try args.finish(usage: u)
                try ctx.write("collection.\(action)", entity: collection, payload: [:]) { "\(action == "delete" ? "Deleted" : "Restored") collection \($0.entityID.lowercased)" }
            case "list":
                try args.finish(usage: "chronicle collection list")
                return try listRows(ctx, entity: "collection", includeDeleted: false, limit: 1000, tag: nil)
            default:
                throw ChronicleError(.usage, "Unknown collection action '\(action)'. Usage: \(usage)")
            }
            return ExitCode.success
        },
        Command(name: "delete", summary: "Delete a row (soft delete: it can be restored).", usage: "chronicle delete ID",
                details: "Works for any entity type with a deleted_at field: articles, highlights, notes, collections, episodes.") { args, ctx in
            try deleteOrRestore(&args, ctx, action: "delete")
        },
        Command(name: "restore", summary: "Restore a deleted row.", usage: "chronicle restore ID", details: "") { args, ctx in
            try deleteOrRestore(&args, ctx, action: "restore")
        },
        Command(name: "op", summary: "Write any op type of the store's schema.",
                usage: "chronicle op TYPE [ID] [--payload JSON]",
                details: "For op types without a command of their own, e.g.\n  chronicle op episode.save --payload '{\"title\":\"Ep 1\",\"audio_ref\":\"sha256:…\"}'\n  chronicle op part.adjust 1b2c --payload '{\"delta\":-2}'\nOmit ID to create a new row. A file's address (sha256:…) comes from `chronicle blob add FILE`.") { args, ctx in
            let usage = "chronicle op TYPE [ID] [--payload JSON]"
            let type = try args.requirePositional("TYPE", usage: usage)
            let id = try args.takePositional().map { try ctx.resolve($0) }
            let payload = try CanonicalJSON.decodePayload(args.option("payload") ?? "{}")
            try args.finish(usage: usage)
            try ctx.write(type, entity: id, payload: payload) { "Wrote \($0.typeAndVersion) for \($0.entityID.lowercased) (device seq \($0.deviceSeq))" }
            return ExitCode.success
        },
    ]

    /// `tag` and `untag`: the same arguments, op types `article.tag` / `article.untag`.
    static func tagCommand(_ name: String, summary: String, say: @escaping @Sendable (String, String) -> String) -> Command {
        let usage = "chronicle \(name) ID TAG"
        return Command(name: name, summary: summary, usage: usage, details: "") { args, ctx in
            let id = try ctx.resolve(try args.requirePositional("ID", usage: usage), expecting: "article")
            let tag = try args.requirePositional("TAG", usage: usage)
            try args.finish(usage: usage)
            try ctx.write("article.\(name)", entity: id, payload: ["tag": .text(tag)]) { say($0.entityID.lowercased, tag) }
            return ExitCode.success
        }
    }

    static func deleteOrRestore(_ args: inout Arguments, _ ctx: Context, action: String) throws -> Int32 {
        let usage = "chronicle \(action) ID"
        let id = try ctx.resolve(try args.requirePositional("ID", usage: usage))
        try args.finish(usage: usage)
        guard let entity = try ctx.store().entityType(of: id) else {
            throw ChronicleError(.unknownEntity, "No row with id \(id.lowercased).")
        }
        guard entity.hasSoftDelete else { throw ChronicleError(.invalidValue, "A \(entity.name) cannot be deleted.") }
        try ctx.write("\(entity.name).\(action)", entity: id, payload: [:]) { _ in
            "\(action == "delete" ? "Deleted" : "Restored") \(entity.name) \(id.lowercased)"
        }
        return ExitCode.success
    }

    static func parseUUID(_ text: String, _ what: String) throws -> UUID {
        guard let uuid = UUID(uuidString: text) else { throw ChronicleError(.usage, "\(what) takes a UUID (got '\(text)').") }
        return uuid
    }
}
