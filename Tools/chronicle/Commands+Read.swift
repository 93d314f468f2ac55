import ChronicleCore
import ChronicleStore
import Foundation

extension Command {
    static let readCommands: [Command] = [
        Command(name: "list", summary: "List rows, newest first (articles unless --entity says otherwise).",
                usage: "chronicle list [--entity TYPE] [--tag TAG] [--all] [--limit N]",
                details: "--all includes deleted rows. Rows with queued local changes are marked '*'.") { args, ctx in
            let entity = args.option("entity") ?? "article"
            let tag = args.option("tag")
            let all = args.flag("all")
            let limit = try parseLimit(args.option("limit"), default: 100)
            try args.finish(usage: "chronicle list [--entity TYPE] [--tag TAG] [--all] [--limit N]")
            return try listRows(ctx, entity: entity, includeDeleted: all, limit: limit, tag: tag)
        },
        Command(name: "show", summary: "Show one row with everything attached to it.", usage: "chronicle show ID", details: "") { args, ctx in
            let id = try ctx.resolve(try args.requirePositional("ID", usage: "chronicle show ID"))
            try args.finish(usage: "chronicle show ID")
            let store = try ctx.store()
            guard let row = try store.row(id) else { throw ChronicleError(.unknownEntity, "No row with id \(id.lowercased).") }
            // Rows of other types that point at this one (an article's highlights and notes, collections holding it).
            var attached: [(String, [EntityRow])] = []
            for entity in store.schema.entities {
                for field in entity.scalarFields where field.references == row.entityType {
                    let rows = try store.rows(entity.name, where: "t.\(field.name) = ?1", [.text(row.id)])
                    if !rows.isEmpty { attached.append((entity.name, rows)) }
                }
                for field in entity.setFields where field.references == row.entityType {
                    let rows = try store.rows(entity.name, where: "EXISTS (SELECT 1 FROM \"\(entity.setTable(field))\" m WHERE m.id = t.id AND m.value = ?1)", [.text(row.id)])
                    if !rows.isEmpty { attached.append((entity.name, rows)) }
                }
            }
            if ctx.output.json {
                var object = rowJSON(row)
                for (name, rows) in attached { object[name] = rows.map(rowJSON) }
                ctx.output.emit(object)
            } else {
                ctx.output.line("\(row.entityType) \(row.id)\(row.pending ? "  (changes waiting to sync)" : "")")
                let spec = store.schema.entity(row.entityType)
                for (name, value) in row.fields where !value.isNull {
                    let type = spec?.field(name)?.type
                    let shown = name == "created_at" || type == .timestamp ? value.integerValue.map(Output.time) ?? value.display
                        : value.display
                    ctx.output.line("  \(name.padding(toLength: 12, withPad: " ", startingAt: 0)) \(shown.count > 200 ? String(shown.prefix(200)) + "…" : shown)")
                }
                for (name, values) in row.sets {
                    ctx.output.line("  \(name.padding(toLength: 12, withPad: " ", startingAt: 0)) \(values.isEmpty ? "—" : values.map { $0.textValue ?? $0.display }.joined(separator: ", "))")
                }
                for (name, rows) in attached {
                    ctx.output.line("  \(name)s:")
                    for other in rows {
                        let text = other.fields.first { ["quote", "body", "name", "title"].contains($0.name) }?.value.textValue ?? ""
                        ctx.output.line("    \(Output.short(other.id))  \(text.count > 70 ? String(text.prefix(70)) + "…" : text)")
                    }
                }
            }
            return ExitCode.success
        },
        Command(name: "search", summary: "Full-text search with ranking and snippets.",
                usage: "chronicle search QUERY… [--limit N]",
                details: """
                    Searches titles, tags, notes, highlights, transcripts, and article full text on a premium plan.
                    Words are ANDed; "two words" is a phrase; word* is a prefix. Anything you type is a valid query.
                    """) { args, ctx in
            var words: [String] = []
            while let word = args.takePositional() { words.append(word) }
            let limit = try parseLimit(args.option("limit"), default: 20)
            try args.finish(usage: "chronicle search QUERY… [--limit N]")
            guard !words.isEmpty else { throw ChronicleError(.usage, "Missing QUERY. Usage: chronicle search QUERY… [--limit N]") }
            let terminal = isatty(STDOUT_FILENO) == 1 && !ctx.output.json
            let hits = try ctx.store().search(words.joined(separator: " "), limit: limit,
                                              markers: terminal ? ("\u{1B}[1m", "\u{1B}[0m") : ("[", "]"))
            if ctx.output.json {
                ctx.output.emit(hits.map { ["kind": $0.kind, "id": $0.id, "title": $0.title as Any? ?? NSNull(), "snippet": $0.snippet,
                                            "score": $0.score, "matched_in": $0.matchedIn] })
            } else if hits.isEmpty {
                ctx.output.line("No matches.")
            } else {
                for hit in hits {
                    ctx.output.line("\(Output.short(hit.id))  \(hit.kind)  \(hit.title ?? "(untitled)")")
                    ctx.output.line("          \(hit.snippet.replacingOccurrences(of: "\n", with: " "))  [\(hit.matchedIn)]")
                }
            }
            return ExitCode.success
        },
        Command(name: "log", summary: "Show the op log: confirmed ops in server order, then ops waiting to sync.",
                usage: "chronicle log [--entity ID] [--limit N]", details: "") { args, ctx in
            let entity = try args.option("entity").map { try ctx.resolveAny($0) }
            let limit = try parseLimit(args.option("limit"), default: 1000)
            try args.finish(usage: "chronicle log [--entity ID] [--limit N]")
            let store = try ctx.store()
            let confirmed = try store.confirmedOps(entity: entity, limit: limit)
            let pending = try store.pendingOps().filter { entity == nil || $0.entityID == entity }
            let ops = Array((confirmed + pending).prefix(limit))
            if ctx.output.json {
                ctx.output.emit(ops.map { var o = Output.opJSON($0); o["pending"] = $0.serverSeq == nil; return o })
            } else {
                ctx.output.table(["SEQ", "DEVICE TIME", "DEVICE", "OP", "ENTITY", "PAYLOAD"], ops.map { op in
                    [op.serverSeq.map(String.init) ?? "pending", Output.time(op.deviceTime), ctx.deviceName(op.deviceID),
                     op.typeAndVersion, Output.short(op.entityID.lowercased), CanonicalJSON.encode(op.payload)]
                })
            }
            return ExitCode.success
        },
        Command(name: "audit", summary: "How one row reached its state: every op that touched it and what it did to each field.",
                usage: "chronicle audit ID [--at SEQ]",
                details: "--at SEQ shows the state as of that server sequence number (queued ops left out).") { args, ctx in
            let id = try ctx.resolveAny(try args.requirePositional("ID", usage: "chronicle audit ID [--at SEQ]"))
            let at = try args.option("at").map { text -> Int64 in
                guard let seq = Int64(text), seq >= 0 else { throw ChronicleError(.usage, "--at takes a server sequence number (got '\(text)').") }
                return seq
            }
            try args.finish(usage: "chronicle audit ID [--at SEQ]")
            let audit = try ctx.store().audit(id, asOf: at)
            if ctx.output.json {
                ctx.output.emit([
                    "entity": audit.entityType, "id": audit.id, "as_of": audit.asOf as Any? ?? NSNull(),
                    "history_begins_at": audit.historyBeginsAt as Any? ?? NSNull(),
                    "state": audit.state.map { $0.mapValues(Output.jsonValue) } as Any? ?? NSNull(),
                    "sets": audit.sets.mapValues { $0.map(Output.jsonValue) },
                    "history": audit.entries.map { entry -> [String: Any] in
                        var o = Output.opJSON(entry.op)
                        o["pending"] = entry.pending
                        o["effects"] = entry.effects.map { ["field": $0.field, "outcome": $0.outcome.rawValue, "detail": $0.detail] }
                        return o
                    },
                ])
                return ExitCode.success
            }
            ctx.output.line("\(audit.entityType) \(audit.id)\(audit.asOf.map { " as of seq \($0)" } ?? "")")
            if let begins = audit.historyBeginsAt {
                let when = audit.historyDroppedAt.map { " on \(Output.time($0))" } ?? ""
                ctx.output.line("History begins at seq \(begins): older ops were dropped\(when) by the compaction horizon; the row's state before seq \(begins) comes from the snapshot there.")
            }
            for entry in audit.entries {
                let op = entry.op
                let seq = op.serverSeq.map { "seq \($0)" } ?? "pending #\(op.deviceSeq)"
                let confirmed = op.serverTime.map { ", confirmed \(Output.time($0))" } ?? ""
                ctx.output.line("")
                ctx.output.line("\(seq)  \(op.typeAndVersion)  by \(ctx.deviceName(op.deviceID)) at \(Output.time(op.deviceTime))\(confirmed)")
                ctx.output.line("    payload \(CanonicalJSON.encode(op.payload))")
                for effect in entry.effects {
                    ctx.output.line("    \(effect.field): \(effect.outcome.rawValue) — \(effect.detail)")
                }
            }
            ctx.output.line("")
            if let state = audit.state {
                ctx.output.line("State:")
                let spec = try ctx.store().schema.entity(audit.entityType)
                for (name, value) in state.sorted(by: { $0.key < $1.key }) where !value.isNull {
                    let isTime = name == "created_at" || spec?.field(name)?.type == .timestamp
                    ctx.output.line("  \(name) = \(isTime ? value.integerValue.map(Output.time) ?? value.display : value.display)")
                }
                for (name, values) in audit.sets.sorted(by: { $0.key < $1.key }) {
                    ctx.output.line("  \(name) = {\(values.map(\.display).joined(separator: ", "))}")
                }
            } else {
                ctx.output.line("State: the row does not exist at this point.")
            }
            return ExitCode.success
        },
        Command(name: "status", summary: "What this store knows: ops confirmed, changes not yet synced, ids.",
                usage: "chronicle status", details: "") { args, ctx in
            try args.finish(usage: "chronicle status")
            let store = try ctx.store()
            let s = try store.status()
            let sync = try store.syncState()
            let credentials = try? Credentials.load(forStore: store.path)
            let phrases = try store.phraseIndexStatus()
            let backlog = try store.blobUploadBacklog()
            let headline = statusLine(unsent: s.unsentOps, sync: sync, signedIn: credentials != nil,
                                      now: Int64(Date().timeIntervalSince1970 * 1000), filesWaiting: backlog)
            if ctx.output.json {
                ctx.output.emit(["store": s.path, "format_version": s.formatVersion, "schema": s.schema, "library_id": s.libraryID,
                                 "device_id": s.deviceID, "cursor": s.cursor, "confirmed_ops": s.confirmedOps, "unsent_ops": s.unsentOps,
                                 "last_device_seq": s.lastDeviceSeq, "last_sync_at": s.lastSyncAt as Any? ?? NSNull(), "file_bytes": s.fileBytes,
                                 "signed_in": credentials != nil, "server": credentials?.server as Any? ?? NSNull(),
                                 "online": credentials != nil && !sync.isOffline, "last_error": sync.lastError as Any? ?? NSNull(),
                                 "server_head": sync.serverHead, "unseen_notices": sync.unseenNotices, "status_line": headline,
                                 "blobs_queued": backlog.count, "blob_bytes_to_upload": backlog.bytes,
                                 "phrase_indexes": phrases.map { ["index": $0.index, "rows_indexed": $0.rowsIndexed, "rows": $0.rows,
                                                                  "complete": $0.isComplete] as [String: Any] }])
                return ExitCode.success
            }
            ctx.output.line(headline)
            ctx.output.line("")
            ctx.output.line("  store      \(s.path) (format v\(s.formatVersion), \(ByteCountFormatter.string(fromByteCount: s.fileBytes, countStyle: .file)))")
            ctx.output.line("  schema     \(s.schema)")
            ctx.output.line("  library    \(s.libraryID)")
            ctx.output.line("  device     \(s.deviceID)")
            ctx.output.line("  confirmed  \(s.confirmedOps) ops (cursor \(s.cursor))")
            ctx.output.line("  unsent     \(s.unsentOps) ops (last device seq \(s.lastDeviceSeq))")
            for phrase in phrases {
                let state = phrase.isComplete ? "complete" : "filling in the background; phrases are searched without it meanwhile"
                ctx.output.line("  phrases    \(phrase.index): \(phrase.rowsIndexed) of \(phrase.rows) rows (\(state))")
            }
            return ExitCode.success
        },
    ]

    /// The honest one-line status: "Offline — 12 changes saved on this device; they will sync when you reconnect. Last synced 3 hours ago."
    static func statusLine(unsent: Int64, sync: SyncState, signedIn: Bool, now: Int64,
                           filesWaiting: (count: Int, bytes: Int64) = (0, 0)) -> String {
        let changes = "\(unsent) change\(unsent == 1 ? "" : "s")"
        let they = unsent == 1 ? "it" : "they"
        let last = sync.lastSyncAt.map { "Last synced \(RelativeTime.ago($0, now: now))." } ?? "Never synced."
        var line: String
        if !signedIn {
            line = unsent == 0 ? "Not signed in to a server; everything is kept on this device."
                : "Not signed in to a server — \(changes) saved on this device; \(they) will sync once you sign in with `chronicle login`."
        } else if sync.isOffline {
            line = unsent == 0 ? "Offline — nothing waiting to sync. \(last)"
                : "Offline — \(changes) saved on this device; \(they) will sync when you reconnect. \(last)"
        } else {
            line = unsent == 0 ? "Up to date. \(last)" : "Online — \(changes) waiting to sync. \(last)"
        }
        if filesWaiting.count > 0 {
            line += " \(filesWaiting.count) file\(filesWaiting.count == 1 ? "" : "s") (\(ByteCountFormatter.string(fromByteCount: filesWaiting.bytes, countStyle: .file))) waiting to upload."
        }
        if sync.unseenNotices > 0 {
            line += " \(sync.unseenNotices) change\(sync.unseenNotices == 1 ? " was" : "s were") not accepted by the server; see `chronicle notices`."
        }
        return line
    }

    static func parseLimit(_ text: String?, default value: Int) throws -> Int {
        guard let text else { return value }
        guard let n = Int(text), n > 0 else { throw ChronicleError(.usage, "--limit takes a positive whole number (got '\(text)').") }
        return n
    }

    static func rowJSON(_ row: EntityRow) -> [String: Any] {
        var object: [String: Any] = ["type": row.entityType, "id": row.id, "pending": row.pending]
        for (name, value) in row.fields { object[name] = Output.jsonValue(value) }
        for (name, values) in row.sets { object[name] = values.map(Output.jsonValue) }
        return object
    }

    static func listRows(_ ctx: Context, entity: String, includeDeleted: Bool, limit: Int, tag: String?) throws -> Int32 {
        let store = try ctx.store()
        var filter: String?
        var arguments: [Value] = []
        if let tag {
            guard let spec = store.schema.entity(entity), let tags = spec.field("tags"), tags.isSet else {
                throw ChronicleError(.usage, "--tag works only for entity types with tags.")
            }
            filter = "EXISTS (SELECT 1 FROM \"\(spec.setTable(tags))\" g WHERE g.id = t.id AND g.value = ?1)"
            arguments = [.text(tag)]
        }
        let rows = try store.rows(entity, where: filter, arguments, includeDeleted: includeDeleted, limit: limit)
        if ctx.output.json {
            ctx.output.emit(rows.map(rowJSON))
            return ExitCode.success
        }
        guard let spec = store.schema.entity(entity) else { return ExitCode.success }
        let shown = spec.scalarFields.filter { $0.name != "deleted_at" && $0.name != "text" && $0.name != "transcript" }.prefix(4).map(\.name)
        let setNames = spec.setFields.map(\.name)
        ctx.output.table(["ID"] + shown.map { $0.uppercased() } + setNames.map { $0.uppercased() }, rows.map { row in
            [Output.short(row.id) + (row.pending ? "*" : " ") + (row["deleted_at"].map { $0.isNull ? "" : " (deleted)" } ?? "")]
                + shown.map { name in row[name].map { $0.isNull ? "" : ($0.textValue ?? $0.display) } ?? "" }
                + setNames.map { name in (row.sets.first { $0.name == name }?.values ?? []).map { $0.textValue.map { String($0.prefix(12)) } ?? $0.display }.joined(separator: ",") }
        })
        if rows.isEmpty { ctx.output.line("(none)") }
        return ExitCode.success
    }
}

extension Context {
    /// A full id or any unambiguous prefix, also for rows that exist only in the log (e.g. audited after a rebuild).
    func resolveAny(_ text: String) throws -> UUID {
        if let uuid = UUID(uuidString: text) { return uuid }
        return try resolve(text)
    }

    func deviceName(_ device: UUID) -> String {
        if device == Op.serverDeviceID { return "server" }
        if let store = try? store(), store.deviceID == device { return "this device" }
        // The start of a UUIDv7 is its timestamp; the random end tells devices apart.
        return "device …" + String(device.lowercased.suffix(8))
    }
}
