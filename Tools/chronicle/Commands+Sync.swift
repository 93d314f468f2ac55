import ChronicleCore
import ChronicleArticles
import ChroniclePostgres
import ChronicleServer
import ChronicleStore
import ChronicleSync
import Dispatch
import Foundation
import ChronicleServerStore

extension Command {
    static let syncCommands: [Command] = [serve, server, login, sync, notices, conflicts, resolve, blob]

    static let conflicts = Command(
        name: "conflicts", summary: "Concurrent edits to merge-or-ask fields: what won, and what it replaced.",
        usage: "chronicle conflicts [--all]",
        details: """
            A merge-or-ask field (e.g. a field-service job's notes) takes the edit the server ordered last, like any
            field, but when that edit did not see the one before it (both devices edited offline), the value it replaced
            is kept here. Sync never waits for this. Settle one with `chronicle resolve`; --all includes settled ones.
            """) { args, ctx in
        let all = args.flag("all")
        try args.finish(usage: "chronicle conflicts [--all]")
        let list = try ctx.store().conflicts(includeResolved: all)
        if ctx.output.json {
            ctx.output.emit(list.map { c -> [String: Any] in
                ["id": c.opID.lowercased, "field": c.field, "entity": c.entity, "entity_id": c.entityID.lowercased,
                 "kept": Output.jsonValue(c.kept), "replaced": Output.jsonValue(c.replaced), "winning_seq": c.winningSeq,
                 "replaced_seq": c.replacedSeq as Any? ?? NSNull(), "resolved_seq": c.resolvedSeq as Any? ?? NSNull()]
            })
            return ExitCode.success
        }
        if list.isEmpty {
            ctx.output.line(all ? "No concurrent edits have been recorded." : "No open conflicts.")
            return ExitCode.success
        }
        for c in list {
            let state = c.resolvedSeq.map { "settled at seq \($0)" } ?? "open"
            ctx.output.line("\(Output.short(c.opID.lowercased))  \(c.entity) \(Output.short(c.entityID.lowercased)) \(c.field) (\(state))")
            ctx.output.line("    kept      \(c.kept.display)  (seq \(c.winningSeq))")
            ctx.output.line("    replaced  \(c.replaced.display)  (seq \(c.replacedSeq.map(String.init) ?? "?"))")
        }
        ctx.output.line("Settle one with `chronicle resolve ID --keep kept|replaced` or `--value TEXT`.")
        return ExitCode.success
    }

    static let resolve = Command(
        name: "resolve", summary: "Settle a merge-or-ask conflict by choosing a value.",
        usage: "chronicle resolve ID (--keep kept|replaced | --value TEXT) [--field NAME]",
        details: """
            ID is the conflict's id from `chronicle conflicts` (or a unique prefix of it). The choice is written as an
            ordinary edit, so it syncs like any other and settles the conflict on every device once the server orders it.
            """) { args, ctx in
        let usage = "chronicle resolve ID (--keep kept|replaced | --value TEXT) [--field NAME]"
        let id = try args.requirePositional("the conflict id", usage: usage).lowercased()
        let keep = args.option("keep")
        let value = args.option("value")
        let field = args.option("field")
        try args.finish(usage: usage)
        let store = try ctx.store()
        let matches = try store.conflicts().filter { $0.opID.lowercased.hasPrefix(id) && (field == nil || $0.field == field) }
        guard let conflict = matches.first else { throw ChronicleError(.unknownEntity, "No open conflict has an id starting with '\(id)'.") }
        guard matches.count == 1 else { throw ChronicleError(.usage, "'\(id)' matches \(matches.count) open conflicts; give more characters or --field.") }
        let chosen: Value
        switch (keep, value) {
        case ("kept"?, nil): chosen = conflict.kept
        case ("replaced"?, nil): chosen = conflict.replaced
        case (nil, let text?): chosen = .text(text)
        default: throw ChronicleError(.usage, "Choose with --keep kept, --keep replaced or --value TEXT. Usage: \(usage)")
        }
        let op = try store.resolve(conflict, with: chosen)
        if ctx.output.json {
            ctx.output.emit(["id": conflict.opID.lowercased, "field": conflict.field, "value": Output.jsonValue(chosen), "op": Output.opJSON(op)])
        } else {
            ctx.output.line("\(conflict.entity).\(conflict.field) set to \(chosen.display); the conflict is settled once this syncs.")
        }
        return ExitCode.success
    }

    static let serveUsage = "chronicle serve (--data DIR | --postgres CONNINFO (--data DIR | --replicas DIR) [--postgres-pool N] [--postgres-timeout S]) [--port N] [--host 127.0.0.1] [--threads N] [--body-memory-mb N] [--open-libraries N] [--free-caps LIST] [--compact-keep-ops N] [--compact-keep-days D] [--compact-segment-ops N] [--compact-snapshot-ops N] [--horizon-days D] [--compact-every SECONDS] [--no-compact] [--upload-expiry-days D] [--unnamed-file-days D] [--start-image-ops N] [--access-token-minutes N] [--fetch-articles [--fetch-private-addresses] [--fetch-ca-file PEM]]"

    static let serve = Command(
        name: "serve", summary: "Run the sync server (HTTP/1.1 on libmicrohttpd; embedded SQLite store, or PostgreSQL shared by several servers).",
        usage: serveUsage,
        details: """
            DIR holds server.sqlite (users, devices) and libraries/<id>.sqlite (one per library); it is created if missing.
            --port 0 (the default is 8080) picks a free port. The first line on stdout says where it listens;
            logs go to stderr, one JSON object a line. SIGINT or SIGTERM stops it cleanly.
            Add users with `chronicle server add-user`. Endpoints: /v1/… (Schemas/api/openapi.yaml), and for the operator's
            network /healthz (liveness; lists files found damaged), /readyz (503 while server.sqlite is damaged) and /metrics.
            --free-caps sets the limits free libraries live under (premium ones have none), enforced by triggers in each
            library's database: e.g. --free-caps article=1000,highlight.article_id=50 (at most 1,000 articles, and 50
            highlights per article). An op past a cap is refused with free_tier_cap and the device shows why. A schema file may
            declare caps of its own ("caps"); one given here for the same entity (and field) replaces it. Default: none.
            The server compacts each library on its own once it has taken pushes: when a whole segment's worth of ops
            (--compact-segment-ops, default 10,000) lies past what it keeps hot (--compact-keep-ops, default 100,000;
            --compact-keep-days D also keeps the last D days), it seals them into LZ4 segments (pulls and audits read
            them as before). A snapshot new devices start from is written once --compact-snapshot-ops ops (default
            100,000) lie between the newest one and the sealed end, not at every seal: a snapshot costs about as much
            as the library's whole state; a new device pulls the ops after it. Changed libraries are looked at every
            --compact-every seconds (default 60). --horizon-days D drops history older than D days where a snapshot
            covers it; devices whose cursor is older start from the snapshot (HTTP 410) and keep and push their queued
            changes. Default: history is kept whole. --upload-expiry-days D (default 7; 0 keeps them) deletes uploads of
            files left unfinished for D days, looked for every hour; their devices send them again from the start.
            --unnamed-file-days D (default 30; 0 keeps them) deletes, once a day, the files no row names any more:
            completed more than D days ago, and named by no row (rows deleted more than D days ago do not count). The file keeps its size and reuses the freed pages;
            `chronicle server compact` gives the space back. --start-image-ops N (default 100,000; 0: never): a library
            whose newest snapshot holds at least N ops also gets a start image of it, built after the compaction that
            wrote the snapshot: the device store a new device would make from it, indexes and all, as one LZ4 frame
            beside the library's file (about 3 times the snapshot's size); a new device takes it whole, several times
            faster than building the store from the snapshot. --no-compact turns all of this off. A stop (SIGINT,
            SIGTERM) waits for the compaction step in progress, never longer. The same thread deletes, every second,
            the library files an operator asked to delete (`chronicle server remove-user --delete-library`,
            `chronicle server delete-library`) once no request holds them, --no-compact or not.
            Requests past a cap are refused with a 4xx and a stable code: a body over \(HTTPServer.Configuration().maxBodyBytes >> 20) MiB
            (413 body_too_large), more than \(grouped(ServiceLimits().pushOpsMax)) ops in a push (413 too_many_ops), an op over
            \(ServiceLimits().opBytesMax >> 10) KiB (413 segment_too_large), more than \(grouped(ServiceLimits().pullOpsMax)) ops in a pull page
            (400 limit_too_large), a long-poll over \(ServiceLimits().waitMillisecondsMax / 1000) s (400 wait_too_long), a file (blob) over
            \(BlobLimits.blobBytesMax >> 30) GiB (413 blob_too_large), an uploaded chunk over \(BlobLimits.chunkBytesMax >> 20) MiB (413 chunk_too_large).
            Files go in blobs/<library>.sqlite beside each library's file (with --postgres: in PostgreSQL).
            Request bodies held in memory at once, across all connections, are capped by --body-memory-mb (default
            \(HTTPServer.Configuration().bufferedBodyBytesMax >> 20), at least the body cap): one past it is read, dropped and answered 503 server_busy with
            Retry-After: 1, and the device sends it again. At most --open-libraries libraries (default
            \(ServiceLimits().openLibrariesMax)) are kept open at once: past it the least recently used one no request is using is
            closed and opened again when next asked for. serve raises its limit of open files to the system's hard limit.
            A device keeps two pushes in flight; one that arrives ahead of the push before it is held up to
            \(grouped(ServiceLimits().pushGapWaitMilliseconds)) ms for it, then refused (409 device_seq_gap; the device sends it again).
            --fetch-articles reads the pages people save: each article.save the server takes has its URL fetched
            (http or https, at most \(ArticleFetchPolicy().bodyBytesMax >> 20) MiB of text/html, \(Int(ArticleFetchPolicy().timeoutSeconds)) s, \(ArticleFetchPolicy().redirectsMax) redirects) and read with libxml2, and the
            server appends an article.parsed op with the text and word count (and the title and author where the row has
            none); devices get it with their next pull, and the premium text index searches it. A page not found, not a
            web page, too large, or failing \(ArticleFetchPolicy().attemptsMax) tries gets empty text and is not fetched again. Addresses that are
            loopback, private or link-local are refused unless --fetch-private-addresses (for a server whose users are
            trusted, and for testing against pages on this machine). Each host is looked up once and the connection goes
            to an address that lookup gave and the check passed, so a DNS answer that changes in between (rebinding)
            cannot point the fetch at this machine's network; for the same reason http_proxy and https_proxy are not used.
            https pages must present a certificate valid for their host under the system's authorities (/etc/ssl/certs,
            the ca-certificates package), or under --fetch-ca-file PEM instead. Pages saved while no server fetched are
            read when a fetching server next opens their library. Off by default: the server then opens no connection a
            link asks for.
            A device sends its device token (from `chronicle login`) only to get an access token (POST /v1/session), good
            for --access-token-minutes N (default \(ServiceLimits().accessTokenSeconds! / 60)), and sends that on every request; past it a
            request is refused 401 token_expired and the device gets the next. An access token stops at once when its device
            is revoked or signs in again. 0 gives none: devices send their device token on every request.
            --postgres CONNINFO (or CHRONICLE_POSTGRES) keeps every library's order and the users and devices in a
            PostgreSQL database instead of DIR's files, so that several servers, on one machine or many, share it: each
            push takes its library's row lock there and commits there first, and a pull parked on one server answers as
            soon as another commits (LISTEN/NOTIFY). CONNINFO is a libpq connection string ("host=db.internal
            dbname=chronicle user=chronicle") or a postgresql:// URI; keep the password in PGPASSWORD or ~/.pgpass. The
            tables are made on first use (Schemas/store/server-postgres-v3.md). Each server keeps replicas of the
            libraries it serves in --replicas DIR (or the first of DIR/replicas/1, /2… that no other server holds, where
            servers on one machine share --data DIR), made from PostgreSQL where missing; nothing else of a server's is
            kept on its disk. Users and devices are administered with `chronicle server ACTION --postgres CONNINFO`; a
            revocation there stops the token on every server at once. A --data DIR with a server.sqlite (users added with
            `server add-user --data DIR`) has them copied to PostgreSQL on the first start, and the file is kept as it
            was; a DIR holding a lone server's libraries is refused until `server move-to-postgres` moved them. A server that cannot
            reach PostgreSQL answers 503 server_store_unavailable and writes nothing; so does a request whose statement
            runs past --postgres-timeout S (default \(PostgresServerStore.defaultStatementTimeoutMilliseconds / 1000) s; a wait for a library's row lock
            included), so a stalled database never holds requests longer. Each server keeps up to --postgres-pool N
            (default 8) connections for libraries, 4 for accounts and 2 listening; connections left silent are found
            dead by TCP keepalives within about a minute. Each server compacts its replicas as above, and PostgreSQL
            seals with them: the segments a replica sealed take the place of their ops' log rows there (checked op by
            op first; the first server to seal a segment hands it over). With --horizon-days, history past the horizon
            leaves PostgreSQL too, behind a snapshot of the state there, with the ids of its ops kept; replicas made
            afterwards start from that snapshot. `server backup` and `salvage` work on library files only (use pg_dump).
            """) { args, ctx in
        // Belt and braces behind `PrivateFiles`: whatever a library or SQLite makes on its own
        // (a temporary file, a journal) is the server's alone too.
        umask(0o077)
        let usage = serveUsage
        let dataOption = args.option("data")
        var limits = ServiceLimits()
        if let list = args.option("free-caps"), list != "none" {
            for item in list.split(separator: ",") {
                guard let cap = FreeTierCap(String(item)) else {
                    throw ChronicleError(.usage, "--free-caps takes entity=N or entity.id_field=N, comma-separated (got '\(item)').")
                }
                try cap.validate(against: Schema.builtIn)
                limits.freeTierCaps.append(cap)
            }
        }
        var configuration = HTTPServer.Configuration()
        configuration.port = try parsePort(args.option("port") ?? "8080")
        configuration.host = args.option("host") ?? "127.0.0.1"
        if let threads = args.option("threads") {
            guard let n = Int(threads), (1...256).contains(n) else { throw ChronicleError(.usage, "--threads takes 1 to 256 (got '\(threads)').") }
            configuration.threadPoolSize = n
        }
        if let text = args.option("body-memory-mb") {
            let floor = configuration.maxBodyBytes >> 20
            guard let n = Int(text), (floor...65_536).contains(n) else {
                throw ChronicleError(.usage, "--body-memory-mb takes \(floor) to 65536 (MiB; at least the \(floor) MiB body cap) (got '\(text)').")
            }
            configuration.bufferedBodyBytesMax = n << 20
        }
        if let text = args.option("open-libraries") {
            guard let n = Int(text), (1...1_000_000).contains(n) else {
                throw ChronicleError(.usage, "--open-libraries takes 1 to 1000000 (got '\(text)').")
            }
            limits.openLibrariesMax = n
        }
        if let text = args.option("access-token-minutes") {
            guard let n = Int(text), (0...10_080).contains(n) else {
                throw ChronicleError(.usage, "--access-token-minutes takes 0 to 10080 (a week; 0 gives none) (got '\(text)').")
            }
            limits.accessTokenSeconds = n == 0 ? nil : n * 60
        }
        let maintenance = try maintenancePolicy(&args)
        let extensions = try serverExtensions(&args)
        let postgres = args.option("postgres") ?? ProcessInfo.processInfo.environment["CHRONICLE_POSTGRES"].flatMap { $0.isEmpty ? nil : $0 }
        let replicasOption = args.option("replicas")
        var pool = (size: 8, timeoutMilliseconds: PostgresServerStore.defaultStatementTimeoutMilliseconds)
        let poolText = args.option("postgres-pool"), timeoutText = args.option("postgres-timeout")
        if let text = poolText {
            guard let n = Int(text), (1...256).contains(n) else { throw ChronicleError(.usage, "--postgres-pool takes 1 to 256 connections (got '\(text)').") }
            pool.size = n
        }
        if let text = timeoutText {
            guard let seconds = Double(text), seconds.isFinite, (0.1...3_600).contains(seconds) else {
                throw ChronicleError(.usage, "--postgres-timeout takes 0.1 to 3600 seconds (got '\(text)').")
            }
            pool.timeoutMilliseconds = Int(seconds * 1000)
        }
        try args.finish(usage: usage)
        if postgres == nil, poolText != nil || timeoutText != nil {
            throw ChronicleError(.usage, "--postgres-pool and --postgres-timeout go with --postgres.")
        }
        if postgres == nil, replicasOption != nil { throw ChronicleError(.usage, "--replicas goes with --postgres.") }
        guard let data = dataOption ?? (postgres != nil ? replicasOption : nil) else {
            throw ChronicleError(.usage, "--data DIR is required (with --postgres, --replicas DIR will do). Usage: \(usage)")
        }
        // Each open library holds a few connections of three descriptors each; Debian's default
        // soft limit (1,024) would run out long before --open-libraries does.
        raiseOpenFileLimit()
        let termination = TerminationSignal()
        let server: SyncServer
        let where_: String
        var held: [DataDirectoryLock] = []
        defer { withExtendedLifetime(held) {} }
        if let postgres {
            let served = try servePostgres(conninfo: postgres, data: dataOption, replicas: replicasOption, pool: pool)
            held = served.locks
            server = try SyncServer(dataDirectory: served.store.cacheDirectory, configuration: configuration, limits: limits, maintenance: maintenance,
                                    log: ServerLog(to: .standardError), shared: served.store, accounts: served.accounts, extensions: extensions)
            where_ = "order and accounts in \(served.store.label), replicas in \(served.store.cacheDirectory)"
                + (served.moved.map { "; moved \($0.users) users and \($0.devices) devices there from \(data)/server.sqlite" } ?? "")
        } else {
            // One server on a data directory at a time; `server salvage` waits for it to stop.
            held = [try DataDirectoryLock(dataDirectory: data, purpose: "chronicle serve")]
            try Accounts(dataDirectory: data).refuseIfOrderedElsewhere("`chronicle serve` without --postgres")
            server = try SyncServer(dataDirectory: data, configuration: configuration, limits: limits, maintenance: maintenance,
                                    log: ServerLog(to: .standardError), extensions: extensions)
            where_ = "data in \(data)"
        }
        FileHandle.standardOutput.write(Data("Chronicle server listening on \(server.url.absoluteString) (\(where_))\n".utf8))
        termination.wait()
        server.stop()
        return ExitCode.success
    }

    /// What `serve --postgres` runs on: PostgreSQL's order and accounts, this server's replicas,
    /// and the locks that keep them its own.
    struct PostgresServing {
        var store: PostgresServerStore
        var accounts: Accounts
        var locks: [DataDirectoryLock]
        /// Users and device registrations copied from the data directory's server.sqlite, the first time.
        var moved: (users: Int, devices: Int)?
    }

    /// Connects `serve --postgres` to PostgreSQL. Servers on one machine share `data` (a shared
    /// lock), each in a replicas directory of its own; its server.sqlite, if any, has its users and
    /// devices copied to PostgreSQL once, and is kept as it was, marked as no longer used. A data
    /// directory holding a lone server's library files is refused until `server move-to-postgres`
    /// has moved them.
    static func servePostgres(conninfo: String, data: String?, replicas: String?,
                              pool: (size: Int, timeoutMilliseconds: Int)) throws -> PostgresServing {
        var locks: [DataDirectoryLock] = []
        var local: Accounts?
        if let data {
            locks.append(try DataDirectoryLock(dataDirectory: data, purpose: "chronicle serve --postgres", shared: true))
            if FileManager.default.fileExists(atPath: (data as NSString).appendingPathComponent("server.sqlite")) {
                let accounts = try Accounts(dataDirectory: data)
                if try accounts.librariesOrderedIn() == nil, !Accounts.libraryFiles(in: data).isEmpty {
                    throw ChronicleError(.librariesInPostgreSQL, "\(data) holds a lone server's libraries (\(data)/libraries), which are not in PostgreSQL yet. Move them there first with `chronicle server move-to-postgres --data \(data) --postgres CONNINFO` (stop the lone server), or serve it without --postgres.")
                }
                local = accounts
            }
        }
        let replicasDirectory: String
        if let replicas {
            replicasDirectory = replicas
            locks.append(try DataDirectoryLock(dataDirectory: replicas, purpose: "chronicle serve --postgres (replicas)"))
        } else {
            let claimed = try DataDirectoryLock.claimSubdirectory(of: (data! as NSString).appendingPathComponent("replicas"),
                                                                  purpose: "chronicle serve --postgres (replicas)")
            replicasDirectory = claimed.path
            locks.append(claimed.lock)
        }
        let store = try AccountsPlace.postgresStore(conninfo, replicas: replicasDirectory, poolSize: pool.size,
                                                    timeoutMilliseconds: pool.timeoutMilliseconds)
        let storage = try AccountsPlace.postgresStorage(conninfo, listening: true, timeoutMilliseconds: pool.timeoutMilliseconds)
        var moved: (users: Int, devices: Int)?
        if let local, try local.accountsMovedTo() == nil {
            moved = try storage.copy(from: local)
            try local.setLibrariesOrderedIn("postgresql")
            try local.setAccountsMoved(to: "postgresql")
        }
        return PostgresServing(store: store, accounts: Accounts(storage: storage), locks: locks, moved: moved)
    }

    /// `serve`'s compaction options: the policy the running server compacts libraries by.
    static func maintenancePolicy(_ args: inout Arguments) throws(ChronicleError) -> MaintenancePolicy {
        func whole(_ name: String, _ range: ClosedRange<Int64>) throws(ChronicleError) -> Int64? {
            guard let text = args.option(name) else { return nil }
            guard let n = Int64(text), range.contains(n) else {
                throw ChronicleError(.usage, "--\(name) takes a whole number from \(range.lowerBound) to \(range.upperBound) (got '\(text)').")
            }
            return n
        }
        var maintenance = MaintenancePolicy()
        let off = args.flag("no-compact")
        if let keep = try whole("compact-keep-ops", 0...Int64(Int32.max)) { maintenance.compaction?.keepOps = keep }
        if let days = try whole("compact-keep-days", 1...36_500) { maintenance.compaction?.keepMilliseconds = days * 86_400_000 }
        if let days = try whole("horizon-days", 1...36_500) { maintenance.compaction?.horizonMilliseconds = days * 86_400_000 }
        if let ops = try whole("compact-segment-ops", 1...Int64(SegmentCodec.Limits().maxOps)) {
            maintenance.compaction?.segmentOpsMax = Int(ops)
        }
        if let ops = try whole("compact-snapshot-ops", 1...Int64(Int32.max)) { maintenance.compaction?.snapshotEveryOps = ops }
        if let text = args.option("compact-every") {
            guard let seconds = Double(text), seconds.isFinite, seconds >= 0.01, seconds <= 86_400 else {
                throw ChronicleError(.usage, "--compact-every takes seconds from 0.01 to 86400 (got '\(text)').")
            }
            maintenance.checkIntervalSeconds = seconds
        }
        if off { maintenance.compaction = nil }
        if let days = try whole("upload-expiry-days", 0...36_500) { maintenance.abandonedUploadSeconds = days == 0 ? nil : Double(days) * 86_400 }
        if let days = try whole("unnamed-file-days", 0...36_500) { maintenance.unnamedBlobSeconds = days == 0 ? nil : Double(days) * 86_400 }
        if let ops = try whole("start-image-ops", 0...1_000_000_000_000) { maintenance.startImageOpsMin = ops == 0 ? nil : ops }
        return maintenance
    }

    /// `serve`'s article fetching options: the read-it-later app's `ArticleFetcher`
    /// (`ChronicleArticles`), where `--fetch-articles` or one of its options is given.
    static func serverExtensions(_ args: inout Arguments) throws(ChronicleError) -> [any ServerExtension] {
        let fetches = args.flag("fetch-articles"), privately = args.flag("fetch-private-addresses")
        let authorities = args.option("fetch-ca-file")
        if let authorities, !FileManager.default.isReadableFile(atPath: authorities) {
            throw ChronicleError(.usage, "--fetch-ca-file: \(authorities) is not a readable file (PEM certificates to trust https pages under).")
        }
        if fetches || privately || authorities != nil {
            var policy = ArticleFetchPolicy()
            policy.allowsPrivateAddresses = privately
            policy.trustedCertificatesFile = authorities
            return [ArticleFetcher(policy: policy)]
        }
        return []
    }

    /// `--wait S` of remove-user and delete-library: 0 to 3,600 seconds, 30 when not given.
    static func deletionWait(_ args: inout Arguments) throws -> Double {
        guard let text = args.option("wait") else { return 30 }
        guard let seconds = Double(text), seconds.isFinite, (0...3_600).contains(seconds) else {
            throw ChronicleError(.usage, "--wait takes 0 to 3600 seconds (got '\(text)').")
        }
        return seconds
    }

    static let server = Command(
        name: "server", summary: "Administer a server's data directory or PostgreSQL accounts (add-user, users, devices, revoke, passwd, remove-user, delete-library, set-plan, compact, backup, verify, salvage, move-to-postgres).",
        usage: "chronicle server add-user --data DIR NAME [--schema readitlater] [--library ID] | users --data DIR | set-plan --data DIR NAME free|premium | compact --data DIR (NAME | --all) [--keep-ops N] [--horizon-days D] | backup --data DIR --to DEST | verify --data DIR (NAME | --all) | salvage --data DIR (NAME [--files] | --accounts) [--dry-run] | devices --data DIR NAME | revoke --data DIR (DEVICE | --all NAME) | passwd --data DIR NAME [--revoke-devices] | remove-user --data DIR NAME [--delete-library] [--wait S] | delete-library --data DIR ID [--wait S] | move-to-postgres --data DIR --postgres CONNINFO [--dry-run] (add-user, users, devices, revoke, passwd, remove-user, delete-library, set-plan, compact, verify and backup take --postgres CONNINFO in place of --data DIR)",
        details: """
            add-user reads the password from the first line of stdin (at least 8 characters) and creates the user's library;
            with --library ID it gives the user a library already in DIR that no user owns (one `salvage --accounts`
            lists), with its history, instead of a new one (--schema must be the library's).
            users lists users and their library ids. devices lists the devices signed in to NAME's library and when each
            signed in. revoke removes a device's registration (a lost phone): its token stops working at once, also on a
            running server, and its next request is answered 401; the device keeps its store and queued changes and syncs
            again after `chronicle login`. --all NAME revokes every device of NAME. passwd sets NAME's password from the
            first line of stdin; devices signed in keep working unless --revoke-devices signs them out too.
            remove-user removes NAME and signs every device of theirs out at once, also beside a running server; their
            library's file stays in DIR/libraries, owned by no one (users lists such files), unless --delete-library
            deletes it too. delete-library ID deletes such a file, one no user owns. Both work beside a running server:
            the deletion is recorded in server.sqlite with the removal, and the server deletes the file (within a second,
            once no request or parked pull holds the library; it never opens it again meanwhile) while the command waits
            up to --wait S seconds (default 30) to say it did; past that it says the deletion is pending, and a server
            started later finishes it. With no server running, the command deletes the file itself. set-plan changes a library's plan tier with a server-authored op:
            premium lifts the free-tier caps and turns on full-text search of article bodies on every device after its
            next pull. All three work while the server runs (a running server's parked pulls see a plan change when
            their wait ends). compact seals a library's old ops into segments, snapshots it and gives the space back with
            VACUUM (see `chronicle compact`; --all does every library, one after another, and goes on past one that
            fails). With --horizon-days D it drops history older than D days, and devices whose cursor is older start
            from the snapshot (HTTP 410), keeping and pushing their queued changes. A running server also compacts on
            its own, without the VACUUM (see `chronicle serve --help`).
            backup copies the data directory into DEST (a new or empty directory), while the server runs and without
            holding it up: each file with SQLite's VACUUM INTO (one consistent moment per file), checked (quick_check),
            flushed to disk and only then given its name. `chronicle serve --data DEST` runs on the copy. Files are
            copied one after another, so a library pushed to during the backup is copied as of its turn; a server
            restored from a backup has lost what came after it (devices that synced since get cursor_ahead, 409).
            verify checks a library's file while the server runs, on read connections: SQLite's integrity, the sealed
            segments' chain and the log that continues it, each op id once, every device's last answered number
            covering its ops, the guard triggers, and the server's tables against a fresh replay (digest); then its files
            file, if it has one (integrity, chunks without gaps, each file's bytes against its address). Exit 1 if a
            check fails; --all checks the accounts file (server.sqlite) and every library and says which failed.
            salvage keeps what can still be read of NAME's library file when the disk or a copy damaged it (the server
            answers 503 library_damaged for it, naming the library): its history up to the first op that cannot be read,
            the sealed segments and snapshots before it, each device's place and the refusals given until then; the
            server's tables are rebuilt from that, and the file takes a new incarnation, so devices that synced past that
            point push their own ops the server lost again, as after a restore from a backup (ops only the server held are
            lost, and those it could still read are listed: restore a backup instead if you have a recent one). The damaged file is renamed <file>.damaged-<time>
            only once the new one has passed its checks. Stop the server first (it is refused with data_directory_in_use
            while one runs on DIR). --dry-run says what it would keep and changes nothing. Exit 0: nothing was lost;
            1: something was; 4: refused (beyond salvage, or not a library's file).
            salvage NAME --files does the same for NAME's files file (blobs/<id>.sqlite, answered 503 blob_store_damaged):
            files whose chunks all read and hash to their address are kept whole, uploads are kept up to their first
            unreadable chunk, the rest are dropped; the library's file takes a new incarnation, so every device asks the
            server about each file it holds and sends the ones that were lost.
            salvage --accounts does the same for server.sqlite, the users, their libraries and devices' registrations
            (every request is answered 503 accounts_damaged while it cannot be read): it keeps the rows that can be read;
            a device whose registration was lost signs in again (401; its store and queue are kept), and a library whose
            user was lost stays on disk and is listed with the `add-user --library` command that gives it back.
            Servers that share PostgreSQL (`serve --postgres`) keep users and devices there: add-user, users, devices,
            revoke, passwd, remove-user, delete-library, set-plan, compact, verify and backup take --postgres CONNINFO (or CHRONICLE_POSTGRES, when
            --data is not given) in place of --data DIR, and work beside the running servers; remove-user --delete-library
            and delete-library delete the library from PostgreSQL at once (no user owns it, so no device can reach it), and
            each server drops its replica when it next starts; set-plan orders its op there as a push is, after reading the
            library's log into a scratch replica; compact reads the library into a scratch replica, compacts it with
            --keep-ops N (default 10,000) and --horizon-days D, and has PostgreSQL seal as far (and drop history past the
            horizon behind the snapshot there), as the running servers do on their own; verify checks there that each
            library's sealed segments run on from where its history begins, chained and readable, and its log on from
            them to the head with no gap, that every device's number covers its ops and that the guard triggers are in
            place, then reads the log into a scratch replica and checks it as a library file (the projection against a
            replay); backup --postgres CONNINFO --to DEST writes PostgreSQL's accounts and every library it orders as a lone
            server's data directory, beside the running servers (each library read into a scratch replica, then copied as
            above, with an incarnation of its own, as of its turn): `serve --data DEST` runs on it, and move-to-postgres
            puts it into a PostgreSQL database again. salvage is not available there.
            move-to-postgres --data DIR --postgres CONNINFO moves a lone server to PostgreSQL, for servers on several
            machines to take over: stop the server on DIR first (data_directory_in_use while it runs). Every library
            file goes in whole, one transaction each, as the servers there would have written it: its sealed segments
            as they are, its log, the snapshot and op ids where history was dropped past a horizon, every refusal given
            and each device's last answered number, under the file's incarnation (devices go on from their cursors).
            Each is read back into a scratch replica, whose digest must be the file's, and checked as verify --postgres
            checks it; then users and devices' registrations are copied (tokens keep working), and DIR is marked so that
            `serve --postgres CONNINFO --data DIR` serves it and a lone `serve --data DIR` refuses it. Refused, with
            nothing written, where PostgreSQL has a user of the same name with another library or the same library with
            another history (store_exists). Interrupted, run it again: libraries already there with the same history
            are left as they are. The files stay in DIR, no longer used. --dry-run lists what would move, opening nothing for writing.
            """) { args, ctx in
        let usage = "chronicle server add-user --data DIR NAME [--schema readitlater] [--library ID] | users --data DIR | set-plan --data DIR NAME free|premium | compact --data DIR (NAME | --all) [--keep-ops N] [--horizon-days D] | backup --data DIR --to DEST | verify --data DIR (NAME | --all) | salvage --data DIR (NAME [--files] | --accounts) [--dry-run] | devices --data DIR NAME | revoke --data DIR (DEVICE | --all NAME) | passwd --data DIR NAME [--revoke-devices] | remove-user --data DIR NAME [--delete-library] [--wait S] | delete-library --data DIR ID [--wait S] | move-to-postgres --data DIR --postgres CONNINFO [--dry-run] (add-user, users, devices, revoke, passwd, remove-user, delete-library, set-plan, compact, verify and backup take --postgres CONNINFO in place of --data DIR)"
        let action = try args.requirePositional("an action (add-user, users, devices, revoke, passwd, remove-user, delete-library, set-plan, compact, backup, verify, salvage or move-to-postgres)", usage: usage)
        if action == "move-to-postgres" {
            let moveUsage = "chronicle server move-to-postgres --data DIR --postgres CONNINFO [--dry-run]"
            guard let data = args.option("data") else { throw ChronicleError(.usage, "--data DIR (the lone server's data directory) is required. Usage: \(moveUsage)") }
            guard let conninfo = args.option("postgres") ?? ProcessInfo.processInfo.environment["CHRONICLE_POSTGRES"].flatMap({ $0.isEmpty ? nil : $0 }) else {
                throw ChronicleError(.usage, "--postgres CONNINFO (or CHRONICLE_POSTGRES) is required. Usage: \(moveUsage)")
            }
            let dryRun = args.flag("dry-run")
            try args.finish(usage: moveUsage)
            return try moveToPostgres(data: data, conninfo: conninfo, dryRun: dryRun, ctx)
        }
        let place = try AccountsPlace.parse(&args, usage: usage)
        let accountActions = ["add-user", "users", "devices", "revoke", "passwd", "remove-user", "delete-library", "set-plan", "compact", "verify"]
        // salvage reads and writes library files; the other actions work on PostgreSQL too (backup
        // writes a lone server's data directory from it).
        let data = place.directory ?? ""
        if place.directory == nil, action == "salvage" {
            throw ChronicleError(.librariesInPostgreSQL, "`chronicle server salvage` works on a data directory's files and is not available with --postgres. PostgreSQL keeps its own data whole (restore it from your PostgreSQL backups, or from `chronicle server backup --postgres` with `server move-to-postgres`).")
        }
        // These work on library files, which are only a server's replicas where libraries are ordered in PostgreSQL.
        if ["set-plan", "compact", "backup", "verify", "delete-library"].contains(action) || (action == "salvage" && !args.has("accounts")) {
            let accountsFile = (data as NSString).appendingPathComponent("server.sqlite")
            if FileManager.default.fileExists(atPath: accountsFile), let accounts = try? Accounts(dataDirectory: data) {
                if ["delete-library", "set-plan", "compact", "verify"].contains(action) { _ = try place.open(for: action) }   // accounts moved: says to use --postgres
                try accounts.refuseIfOrderedElsewhere("`chronicle server \(action)`")
            }
        }
        switch action {
        case "add-user":
            let name = try args.requirePositional("the user name", usage: usage)
            let schemaName = args.option("schema") ?? Schema.readItLater.name
            let libraryText = args.option("library")
            try args.finish(usage: usage)
            guard let schema = Schema.named(schemaName) else {
                throw ChronicleError(.usage, "Unknown schema '\(schemaName)'; this build has \(Schema.builtIn.map(\.name).joined(separator: ", ")).")
            }
            let accounts = try place.open(for: "add-user")
            var library: UUID?
            if let libraryText {
                guard let id = UUID(text: libraryText) else { throw ChronicleError(.usage, "--library takes a library id (got '\(libraryText)').") }
                if let storage = accounts.storage as? PostgresAccountsStorage {
                    try checkLibraryToGiveBack(id, schema: schema, in: storage, accounts)
                } else {
                    try accounts.refuseIfOrderedElsewhere("`server add-user --library`")
                    try accounts.checkLibraryToGiveBack(id, schema: schema, dataDirectory: data)
                }
                library = id
            }
            let password = try readPassword()
            let user = try accounts.addUser(name, password: password, schema: schema, libraryID: library)
            if ctx.output.json {
                ctx.output.emit(["user": user.name, "library_id": user.libraryID.lowercased, "schema": user.schemaName])
            } else {
                ctx.output.line("Added user \(user.name) with library \(user.libraryID.lowercased) (\(user.schemaName)).")
            }
        case "set-plan":
            let name = try args.requirePositional("the user name", usage: usage)
            let plan = try args.requirePositional("the plan (free or premium)", usage: usage)
            try args.finish(usage: usage)
            guard plan == "free" || plan == "premium" else { throw ChronicleError(.usage, "The plan is free or premium (got '\(plan)').") }
            // With --postgres the op is ordered there like a push, decided on a replica read into a
            // scratch directory; running servers' parked pulls answer with it (NOTIFY).
            var scratch: String?
            defer { scratch.map { try? FileManager.default.removeItem(atPath: $0) } }
            let service: SyncService
            if case .postgres(let conninfo) = place {
                let directory = (NSTemporaryDirectory() as NSString).appendingPathComponent("chronicle-set-plan-\(UUID().lowercased)")
                scratch = directory
                let store = try AccountsPlace.postgresStore(conninfo, replicas: directory, poolSize: 2)
                service = try SyncService(dataDirectory: directory, limits: .besideARunningServer, maintenance: .off, shared: store,
                                          accounts: try place.open(for: "set-plan"))
            } else {
                service = try SyncService(dataDirectory: data, limits: .besideARunningServer)
            }
            guard let user = try service.accounts.user(name) else { throw ChronicleError(.unknownEntity, "No user named '\(name)'.") }
            let op: Op
            do { op = try service.setPlan(library: user.libraryID, plan: plan) } catch let error as ProtocolError {
                throw ChronicleError(.database, error.message)
            }
            if ctx.output.json {
                ctx.output.emit(["user": name, "library_id": user.libraryID.lowercased, "plan": plan, "server_seq": op.serverSeq ?? 0])
            } else {
                ctx.output.line("\(name)'s library is now \(plan) (seq \(op.serverSeq ?? 0)); devices pick it up with their next sync.")
            }
        case "compact":
            let all = args.flag("all")
            let name = all ? nil : try args.requirePositional("the user name (or --all)", usage: usage)
            var policy = CompactionPolicy()
            if let text = args.option("keep-ops") {
                guard let n = Int64(text), n >= 0 else { throw ChronicleError(.usage, "--keep-ops takes a whole number (got '\(text)').") }
                policy.keepOps = n
            }
            if let text = args.option("horizon-days") {
                guard let n = Int64(text), n >= 0 else { throw ChronicleError(.usage, "--horizon-days takes a whole number (got '\(text)').") }
                policy.horizonMilliseconds = n * 86_400_000
            }
            try args.finish(usage: usage)
            if case .postgres(let conninfo) = place {
                return try compactPostgres(conninfo: conninfo, accounts: try place.open(for: "compact"), user: name, policy: policy, ctx)
            }
            let service = try SyncService(dataDirectory: data, limits: .besideARunningServer, maintenance: .off)
            return try compactEach(try libraryTargets(service.accounts, user: name), all: all, ctx) { target in
                let report = try service.compact(library: target.library, policy: policy)
                return (["user": target.name, "library_id": target.library.lowercased, "ops_sealed": report.opsSealed,
                         "segments_written": report.segmentsWritten, "snapshot_seq": report.snapshotSeq as Any? ?? NSNull(),
                         "history_dropped_through": report.historyDroppedThrough as Any? ?? NSNull(),
                         "file_bytes_before": report.fileBytesBefore, "file_bytes_after": report.fileBytesAfter],
                        "Sealed \(report.opsSealed) ops of \(target.name)'s library into \(report.segmentsWritten) segments" +
                        (report.snapshotSeq.map { "; snapshot at seq \($0)" } ?? "") +
                        (report.historyDroppedThrough.map { "; history through seq \($0) dropped" } ?? "") +
                        "; \(report.fileBytesBefore) → \(report.fileBytesAfter) bytes.")
            }
        case "backup":
            guard let destination = args.option("to") else { throw ChronicleError(.usage, "--to DEST is required (a new or empty directory). Usage: \(usage)") }
            try args.finish(usage: usage)
            if case .postgres(let conninfo) = place { return try backupPostgres(conninfo: conninfo, to: destination, ctx) }
            let bar = ProgressBar("Backing up", unit: "files")
            let report = try ServerBackup.run(dataDirectory: data, to: destination, progress: { bar.update($0, $1) })
            bar.finish()
            if ctx.output.json {
                ctx.output.emit(["destination": destination, "libraries": report.libraries, "blob_files": report.blobFiles,
                                 "bytes": report.bytes, "seconds": report.seconds])
            } else {
                ctx.output.line("Backed up server.sqlite and \(report.libraries) librar\(report.libraries == 1 ? "y" : "ies") "
                                + (report.blobFiles > 0 ? "with the files of \(report.blobFiles) " : "")
                                + "(\(report.bytes) bytes) to \(destination) in \(String(format: "%.2f", report.seconds)) s. "
                                + "Run a server on it with `chronicle serve --data \(destination)`.")
            }
        case "verify":
            let all = args.flag("all")
            let name = all ? nil : try args.requirePositional("the user name (or --all)", usage: usage)
            try args.finish(usage: usage)
            if case .postgres(let conninfo) = place {
                return try verifyPostgres(conninfo: conninfo, accounts: try place.open(for: "verify"), user: name, ctx)
            }
            return try verifyLibraries(data: data, user: name, ctx)
        case "salvage":
            let accounts = args.flag("accounts")
            let name = accounts ? nil : try args.requirePositional("the user name (or --accounts)", usage: usage)
            let files = !accounts && args.flag("files")
            let dryRun = args.flag("dry-run")
            try args.finish(usage: usage)
            guard let name else { return try salvageAccounts(data: data, dryRun: dryRun, ctx) }
            if files { return try salvageFiles(data: data, user: name, dryRun: dryRun, ctx) }
            return try salvageLibrary(data: data, user: name, dryRun: dryRun, ctx)
        case "users":
            try args.finish(usage: usage)
            let accounts = try place.open(for: "users")
            let users = try accounts.libraries()
            let unowned = try place.unownedLibraries(accounts) ?? accounts.unownedLibraries(in: data)
            let deleting = Set(try accounts.pendingLibraryDeletions())
            if ctx.output.json {
                ctx.output.emit(users.map { ["user": $0.name, "library_id": $0.libraryID.lowercased, "schema": $0.schemaName] as [String: Any] }
                                + unowned.map { ["user": NSNull(), "library_id": $0.lowercased, "schema": NSNull(),
                                                 "being_deleted": deleting.contains($0)] as [String: Any] })
            } else {
                ctx.output.table(["USER", "LIBRARY", "SCHEMA"], users.map { [$0.name, $0.libraryID.lowercased, $0.schemaName] }
                                 + unowned.map { [deleting.contains($0) ? "(no one; being deleted)" : "(no one)", $0.lowercased, "-"] })
            }
        case "devices":
            let name = try args.requirePositional("the user name", usage: usage)
            try args.finish(usage: usage)
            return try listDevices(try place.open(for: "devices"), user: name, ctx)
        case "revoke":
            let all = args.flag("all")
            let target = try args.requirePositional(all ? "the user name" : "the device id (or --all NAME)", usage: usage)
            try args.finish(usage: usage)
            var id: UUID?
            if !all {
                let device = target
                guard let parsed = UUID(text: device) else {
                    throw ChronicleError(.usage, "revoke takes a device id as `server devices` lists it (got '\(device)').")
                }
                id = parsed
            }
            return try revokeDevices(try place.open(for: "revoke"), device: id, allOf: all ? target : nil, ctx)
        case "remove-user":
            let name = try args.requirePositional("the user name", usage: usage)
            let delete = args.flag("delete-library")
            let wait = try deletionWait(&args)
            try args.finish(usage: usage)
            if case .postgres = place { return try removeUser(try place.open(for: "remove-user"), user: name, deleteLibrary: delete, ctx) }
            return try removeUser(data: data, user: name, deleteLibrary: delete, wait: wait, ctx)
        case "delete-library":
            let text = try args.requirePositional("the library id (`server users` lists the ones no user owns)", usage: usage)
            guard let id = UUID(text: text) else {
                throw ChronicleError(.usage, "delete-library takes a library id as `server users` lists it (got '\(text)').")
            }
            let wait = try deletionWait(&args)
            try args.finish(usage: usage)
            if case .postgres = place { return try deleteLibrary(try place.open(for: "delete-library"), library: id, ctx) }
            return try deleteLibrary(data: data, library: id, wait: wait, ctx)
        case "passwd":
            let name = try args.requirePositional("the user name", usage: usage)
            let revoke = args.flag("revoke-devices")
            try args.finish(usage: usage)
            return try changePassword(try place.open(for: "passwd"), user: name, revokeDevices: revoke, ctx)
        default:
            throw ChronicleError(.usage, "Unknown server action '\(action)'. Usage: \(usage)")
        }
        return ExitCode.success
    }

    static let login = Command(
        name: "login", summary: "Register this device with a server and keep its token (password from stdin).",
        usage: "chronicle login --server URL --user NAME",
        details: """
            Reads the password from the first line of stdin. The store joins the user's library (a store that already
            holds another library's confirmed ops is refused). The token is saved in <store>.credentials with file
            mode 0600 and never printed. Changes written before signing in are kept and sync with the rest.
            """) { args, ctx in
        let usage = "chronicle login --server URL --user NAME"
        guard let serverText = args.option("server"), let url = URL(string: serverText), url.scheme == "http" || url.scheme == "https",
              url.host != nil else {
            throw ChronicleError(.usage, "--server takes a URL like http://127.0.0.1:8080. Usage: \(usage)")
        }
        guard let user = args.option("user") else { throw ChronicleError(.usage, "--user NAME is required. Usage: \(usage)") }
        try args.finish(usage: usage)
        let path = try ctx.requirePath()
        let device = try ctx.store().deviceID
        let password = try readPassword()
        let result: ProtocolJSON.RegistrationResult
        do {
            result = try Blocking.run { try await HTTPTransport.register(baseURL: url, user: user, password: password, deviceID: device) }
        } catch let error as SyncError {
            throw refusal(error)
        }
        guard let library = UUID(text: result.libraryID) else {
            throw ChronicleError(.serverRefused, "The server answered with a malformed library id.")
        }
        try DeviceStore.bindLibrary(at: path, to: library)
        try Credentials(server: url.absoluteString, user: user, library: library.lowercased, token: result.token).save(forStore: path)
        if ctx.output.json {
            ctx.output.emit(["user": user, "server": url.absoluteString, "library_id": library.lowercased, "device_id": device.lowercased])
        } else {
            ctx.output.line("Signed in as \(user) on \(url.absoluteString). This device (\(device.lowercased)) syncs library \(library.lowercased).")
            ctx.output.line("Run `chronicle sync` to sync now.")
        }
        return ExitCode.success
    }

    static let sync = Command(
        name: "sync", summary: "Push queued changes and pull everyone else's (--once, the default, or --watch).",
        usage: "chronicle sync [--once | --watch]",
        details: """
            --once pushes the outbox in order, pulls until caught up, and exits: 0 synced, 5 offline (the server could
            not be reached after a few retries; nothing is lost), 6 the server refused the request (e.g. signed out).
            --watch keeps syncing: it long-polls so other devices' changes arrive within milliseconds, backs off when the
            server is unreachable, and prints one line per round. Stop it with Ctrl-C.
            Ops the server refuses for good are dropped from the queue and listed by `chronicle notices`.
            Environment: CHRONICLE_SYNC_RETRIES (transient failures retried per round, default 6),
            CHRONICLE_PUSH_BATCH (ops per push request, default 500).
            """) { args, ctx in
        let usage = "chronicle sync [--once | --watch]"
        let watch = args.flag("watch")
        let once = args.flag("once")
        try args.finish(usage: usage)
        if watch && once { throw ChronicleError(.usage, "Choose --once or --watch, not both.") }
        let path = try ctx.requirePath()
        let store = try ctx.store()
        let credentials = try Credentials.load(forStore: path)
        guard let url = URL(string: credentials.server) else { throw ChronicleError(.notSignedIn, "The saved server URL is malformed; sign in again.") }
        let transport = HTTPTransport(baseURL: url, library: store.libraryID, token: credentials.token)
        var configuration = SyncEngine.Configuration()
        let environment = ProcessInfo.processInfo.environment
        if let retries = environment["CHRONICLE_SYNC_RETRIES"].flatMap(Int.init) { configuration.retriesPerRoundMax = retries }
        if let batch = environment["CHRONICLE_PUSH_BATCH"].flatMap(Int.init), batch > 0 { configuration.pushBatchOpsMax = batch }
        // Files going up: a bar per file on a terminal.
        let uploading = Locked<(ref: BlobRef?, bar: ProgressBar?)>((nil, nil))
        configuration.blobUploadProgress = { ref, held, length in
            uploading.withLock { state in
                if state.ref != ref {
                    state.bar?.finish()
                    state = (ref, ProgressBar("Uploading \(ref.hex.prefix(12))…", unit: "bytes"))
                }
                state.bar?.update(held, length)
                if held >= length { state.bar?.finish() }
            }
        }
        let engine = SyncEngine(store: store, transport: transport, configuration: configuration)
        let output = ctx.output
        if watch {
            let task = Task.detached {
                await engine.run { report in output.line(describe(report)) }
            }
            waitForTermination()
            task.cancel()
            _ = try? Blocking.run { await task.value }
            return ExitCode.success
        }
        let report = try Blocking.run { await engine.syncOnce() }
        if output.json {
            var object: [String: Any] = ["pushed": report.pushed, "rejected": report.rejected, "pulled": report.pulled, "retries": report.retries,
                                         "renumbered": report.renumbered, "lost_with_server": report.lostWithServer,
                                         "blobs_uploaded": report.blobsUploaded, "blob_bytes_sent": report.blobBytesSent,
                                         "blobs_refused": report.blobsRefused, "blob_error": report.blobError as Any? ?? NSNull()]
            if let rewound = report.rewound {
                object["rewound"] = ["agreed_seq": rewound.agreedSeq, "rewound_to": rewound.rewoundTo, "dropped": rewound.dropped,
                                     "requeued": rewound.requeued, "lost": rewound.lost]
            }
            switch report.outcome {
            case .synced: object["outcome"] = "synced"
            case .offline(let reason): object["outcome"] = "offline"; object["reason"] = reason
            case .blocked(let reason): object["outcome"] = Self.isStoreDamaged(reason) ? "store_damaged" : "refused"; object["reason"] = reason
            }
            output.emit(object)
        } else {
            output.line(describe(report))
        }
        switch report.outcome {
        case .synced: return ExitCode.success
        case .offline(let reason):
            if !output.json { output.error(reason + " [offline]") }
            return ExitCode.offline
        case .blocked(let reason) where Self.isStoreDamaged(reason):
            if !output.json { output.error(reason) }
            return ExitCode.store
        case .blocked(let reason):
            if !output.json { output.error(reason + " [server_refused]") }
            return ExitCode.serverRefused
        }
    }

    /// A round blocked by a damaged store (`SyncEngine` ends its reason with the code), not by the server.
    static func isStoreDamaged(_ reason: String) -> Bool {
        reason.hasSuffix("[\(ChronicleError.Code.storeDamaged.rawValue)]")
    }

    static let notices = Command(
        name: "notices", summary: "Changes the server refused, and why (marks them read).",
        usage: "chronicle notices [--all]",
        details: "Without --all only notices not shown before are listed.") { args, ctx in
        let all = args.flag("all")
        try args.finish(usage: "chronicle notices [--all]")
        let store = try ctx.store()
        let list = try store.notices(unseenOnly: !all)
        try store.markNoticesSeen()
        if ctx.output.json {
            ctx.output.emit(list.map { notice -> [String: Any] in
                var object: [String: Any] = ["op": Output.opJSON(notice.op), "code": notice.code, "message": notice.message,
                                             "rejected_at": notice.rejectedAt, "seen": notice.seen]
                if let verdict = notice.verdict, let parsed = try? JSONSerialization.jsonObject(with: Data(verdict.utf8)) { object["verdict"] = parsed }
                return object
            })
            return ExitCode.success
        }
        if list.isEmpty {
            ctx.output.line(all ? "The server has not refused any change from this device." : "No new notices.")
            return ExitCode.success
        }
        for notice in list {
            ctx.output.line("\(Output.time(notice.rejectedAt))  \(notice.op.typeAndVersion) on \(Output.short(notice.op.entityID.lowercased)) was not accepted: \(notice.message) [\(notice.code)]")
            ctx.output.line("    The server's version of that row is shown now; the change was not applied. Make it again if it still matters.")
        }
        return ExitCode.success
    }

    // MARK: - Helpers

    static func describe(_ report: SyncReport) -> String {
        let counts = "pushed \(report.pushed), pulled \(report.pulled)" + (report.rejected > 0 ? ", \(report.rejected) refused (see `chronicle notices`)" : "")
            + (report.renumbered > 0 ? "; \(report.renumbered) unsent \(report.renumbered == 1 ? "change" : "changes") numbered again after the server's, because this store is an older copy of one that went on syncing (restored from a backup, or copied)" : "")
        let rewound = report.rewound.map { r in
            " The server no longer holds what this store had from it after seq \(r.agreedSeq) (its data restored from a backup): this store went back to seq "
                + "\(r.rewoundTo), let go of \(r.dropped) ops it had from the server, and sent \(r.requeued) of its own again."
        } ?? ""
        let lostCount = report.lostWithServer + (report.rewound?.lost ?? 0)
        let lost = lostCount > 0
            ? " \(lostCount) of this device's changes \(lostCount == 1 ? "is" : "are") lost with the server's data: it had dropped them past its retention horizon, trusting the server to keep them."
            : ""
        var files = ""
        if report.blobsUploaded > 0 {
            files += " Uploaded \(report.blobsUploaded) file\(report.blobsUploaded == 1 ? "" : "s") (\(ByteCountFormatter.string(fromByteCount: report.blobBytesSent, countStyle: .file)) sent)."
        }
        if report.blobsRefused > 0 {
            files += " \(report.blobsRefused) file\(report.blobsRefused == 1 ? " was" : "s were") refused by the server; see `chronicle blob list`."
        }
        if let error = report.blobError { files += " Files still to upload wait for the next sync: \(error)" }
        switch report.outcome {
        case .synced: return "Synced: \(counts)." + rewound + lost + files
        case .offline(let reason): return "Offline: \(reason) Changes stay saved on this device (\(counts))."
        case .blocked(let reason): return "Not synced: \(reason)"
        }
    }

    static func refusal(_ error: SyncError) -> ChronicleError {
        switch error {
        case .transient(let reason, _): ChronicleError(.offline, reason)
        case .terminal(let refusal): ChronicleError(.serverRefused, "\(refusal.message) [\(refusal.code)]")
        }
    }

    static func parsePort(_ text: String) throws -> UInt16 {
        guard let port = UInt16(text) else { throw ChronicleError(.usage, "--port takes 0 to 65535 (got '\(text)').") }
        return port
    }

    /// The first line of stdin, without its newline.
    static func readPassword() throws -> String {
        guard let line = readLine(strippingNewline: true), !line.isEmpty else {
            throw ChronicleError(.usage, "Give the password on the first line of stdin, e.g. `printf '%s\\n' \"$PASSWORD\" | chronicle …`.")
        }
        return line
    }

    /// Raises this process's soft limit of open files to its hard limit.
    static func raiseOpenFileLimit() {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
        limit.rlim_cur = limit.rlim_max
        _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }

    /// Blocks until SIGINT or SIGTERM.
    static func waitForTermination() { TerminationSignal().wait() }
}

/// SIGINT and SIGTERM, caught from the moment this is made. Make it before anything says the
/// process is up (serve's "listening" line): a stop sent right after that line used to land
/// before the handlers existed, was ignored, and left the server running.
final class TerminationSignal {
    private let stop = DispatchSemaphore(value: 0)
    private var sources: [DispatchSourceSignal] = []

    init() {
        for number in [SIGINT, SIGTERM] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { [stop] in stop.signal() }
            source.resume()
            sources.append(source)
        }
    }

    /// Blocks until one of the signals arrives (or has arrived since `init`).
    func wait() {
        stop.wait()
        sources.forEach { $0.cancel() }
    }
}

/// 10000 as "10,000", as the help texts write numbers.
private func grouped(_ n: Int) -> String {
    let digits = String(n.magnitude)
    var out = ""
    for (i, c) in digits.enumerated() {
        if i > 0 && (digits.count - i) % 3 == 0 { out += "," }
        out.append(c)
    }
    return (n < 0 ? "-" : "") + out
}
