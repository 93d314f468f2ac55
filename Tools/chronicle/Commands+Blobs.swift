import ChronicleCore
import ChronicleStore
import ChronicleSync
import Foundation

extension Command {
    static let blob = Command(
        name: "blob", summary: "Large files (photos, signatures, audio): add one to upload, get one, list them.",
        usage: "chronicle blob add FILE [--type MEDIA-TYPE] | chronicle blob get BLOB --to PATH | chronicle blob list",
        details: """
            A blob is a file kept in the store beside the log and named by its content: sha256: and the 64 hex digits
            of its SHA-256. An op names it in a field such as a photo's blob_ref or an episode's audio_ref.
              add FILE    keeps a copy of FILE in the store and prints its address. `chronicle sync` uploads it after
                          the ops, a chunk at a time; an upload cut off goes on from what the server holds. Adding the
                          same bytes again changes nothing.
              get BLOB    writes the blob to --to PATH. One held here is written at once; otherwise it is fetched
                          from the server (signed in), in ranges that a later `get` resumes if this one is cut off,
                          with a progress bar on a terminal.
                          A blob its device has not uploaded yet is refused with blob_not_found or blob_incomplete.
              list        every blob the store knows: its address, size and state (queued, uploaded, refused and why,
                          fetching with the bytes so far, fetched).
            Exit codes as for other commands: 3 for an unknown or malformed address, 5 offline, 6 refused by the server.
            """) { args, ctx in
        let usage = "chronicle blob add FILE [--type MEDIA-TYPE] | chronicle blob get BLOB --to PATH | chronicle blob list"
        guard let action = args.takePositional() else { throw ChronicleError(.usage, "Say what to do. Usage: \(usage)") }
        switch action {
        case "add":
            guard let file = args.takePositional() else { throw ChronicleError(.usage, "Name the file to add. Usage: \(usage)") }
            let type = args.option("type")
            try args.finish(usage: usage)
            let store = try ctx.store()
            let ref = try store.addBlob(file: file, mediaType: type)
            let info = try store.blobInfo(ref)
            if ctx.output.json {
                ctx.output.emit(["blob": ref.description, "length": info?.length ?? 0, "state": info?.state.rawValue ?? "queued"])
            } else {
                ctx.output.line(ref.description)
                let size = ByteCountFormatter.string(fromByteCount: info?.length ?? 0, countStyle: .file)
                let state = info?.state == .queued ? "queued to upload with the next sync" : "held here already (\(info?.state.rawValue ?? "?"))"
                ctx.output.error("Added \(file) (\(size)): \(state). Put the address above in the op that names it.")
            }
            return ExitCode.success
        case "get":
            guard let text = args.takePositional() else { throw ChronicleError(.usage, "Name the blob (sha256:…). Usage: \(usage)") }
            guard let target = args.option("to") else { throw ChronicleError(.usage, "--to PATH says where to write it. Usage: \(usage)") }
            try args.finish(usage: usage)
            guard let ref = BlobRef(text) else { throw ChronicleError(.invalidValue, BlobRef.badRefMessage(text)) }
            let store = try ctx.store()
            var fetched = false
            if try store.blobInfo(ref)?.isHeld != true {
                let credentials: Credentials
                do {
                    credentials = try Credentials.load(forStore: store.path)
                } catch {
                    throw ChronicleError(.blobNotHeld, "\(ref) is not held on this device, and it is not signed in to a server to fetch it from; sign in with `chronicle login`.")
                }
                guard let url = URL(string: credentials.server) else { throw ChronicleError(.notSignedIn, "The saved server URL is malformed; sign in again.") }
                let engine = SyncEngine(store: store, transport: HTTPTransport(baseURL: url, library: store.libraryID, token: credentials.token))
                let bar = Locked(ProgressBar("Fetching \(ref.hex.prefix(12))…", unit: "bytes"))
                do {
                    try Blocking.run { () async throws -> Void in
                        _ = try await engine.fetchBlob(ref) { held, length in bar.withLock { $0.update(held, length) } }
                    }
                } catch let error as SyncError {
                    bar.withLock { $0.finish() }
                    throw refusal(error)
                }
                bar.withLock { $0.finish() }
                fetched = true
            }
            guard try store.writeBlob(ref, to: target) else { throw ChronicleError(.blobNotHeld, "\(ref) is not held on this device.") }
            let length = try store.blobInfo(ref)?.length ?? 0
            if ctx.output.json {
                ctx.output.emit(["blob": ref.description, "length": length, "to": target, "fetched": fetched])
            } else {
                ctx.output.line("Wrote \(ref) to \(target) (\(ByteCountFormatter.string(fromByteCount: length, countStyle: .file))\(fetched ? ", fetched from the server" : "")).")
            }
            return ExitCode.success
        case "list":
            try args.finish(usage: usage)
            let list = try ctx.store().blobs()
            if ctx.output.json {
                ctx.output.emit(list.map { info -> [String: Any] in
                    ["blob": info.ref.description, "length": info.length, "received": info.received, "uploaded": info.uploaded,
                     "state": info.state.rawValue, "media_type": info.mediaType as Any? ?? NSNull(), "added_at": info.addedAt,
                     "refusal": info.refusal as Any? ?? NSNull()]
                })
                return ExitCode.success
            }
            if list.isEmpty {
                ctx.output.line("No blobs in this store.")
                return ExitCode.success
            }
            for info in list {
                let size = ByteCountFormatter.string(fromByteCount: info.length, countStyle: .file)
                let state = switch info.state {
                case .queued: "queued to upload (the server holds \(info.uploaded) of \(info.length) bytes)"
                case .uploaded: "uploaded"
                case .refused: "refused: \(info.refusal ?? "no reason given")"
                case .fetching: "fetching (\(info.received) of \(info.length) bytes so far)"
                case .fetched: "fetched"
                }
                ctx.output.line("\(info.ref)  \(size.padding(toLength: 10, withPad: " ", startingAt: 0))  \(state)\(info.mediaType.map { "  \($0)" } ?? "")")
            }
            return ExitCode.success
        default:
            throw ChronicleError(.usage, "Unknown blob action '\(action)'. Usage: \(usage)")
        }
    }
}
