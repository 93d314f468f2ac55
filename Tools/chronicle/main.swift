import ChronicleCore
import ChroniclePostgres
import ChronicleStore
import Foundation

// chronicle: the command-line face of a Chronicle device store.

let commands = Command.writeCommands + Command.readCommands + Command.maintenanceCommands + Command.syncCommands + [Command.demo]
let overview = """
    chronicle — an offline-first library on this device (an append-only op log projected into SQLite and FTS5),
    and the sync server that orders every device's ops.

    Usage: chronicle [--store PATH] [--json] COMMAND [ARGUMENTS]

    Commands:
    \(commands.map { "  \($0.name.padding(toLength: 11, withPad: " ", startingAt: 0)) \($0.summary)" }.joined(separator: "\n"))

    The store path comes from --store or CHRONICLE_STORE. Ids can be shortened to any unique prefix (4+ characters).
    Run `chronicle COMMAND --help` for a command's options.

    Exit codes: 0 ok, 1 verification failed, 2 bad command line, 3 refused (unknown id, invalid value, …),
    4 store cannot be opened (missing, not a store, from a newer version, damaged), 5 offline (sync could not reach the server),
    6 the server refused (bad password, signed out), 70 unexpected failure.
    """

@MainActor func run() -> Int32 {
    let raw = Array(CommandLine.arguments.dropFirst())
    let wantsJSON = raw.contains("--json")
    let output = Output(json: wantsJSON)
    func fail(_ error: ChronicleError) -> Int32 {
        output.error(error.description)
        if wantsJSON { output.emit(["error": ["code": error.code.rawValue, "message": error.message]]) }
        return ExitCode.of(error)
    }
    var storePath: String?
    do {
        var args = try Arguments(raw)
        _ = args.flag("json")
        let wantsHelp = args.flag("help") || args.positional.first == "help"
        if args.positional.first == "help" { _ = args.takePositional() }
        guard let name = args.takePositional() else {
            print(overview)
            return wantsHelp ? ExitCode.success : ExitCode.usage
        }
        guard let command = commands.first(where: { $0.name == name }) else {
            return fail(ChronicleError(.usage, "Unknown command '\(name)'. Run `chronicle --help` for the list."))
        }
        if wantsHelp {
            print(command.help)
            return ExitCode.success
        }
        let path = args.option("store") ?? ProcessInfo.processInfo.environment["CHRONICLE_STORE"]
        storePath = path
        let context = Context(output: output, storePath: path)
        return try command.run(&args, context)
    } catch let error as ChronicleError {
        return fail(error)
    } catch let error as SQLiteError where error.isCorrupt {
        return fail(DeviceStore.damaged(storePath ?? "The store", error))
    } catch let error as SQLiteError {
        if error.isDiskFull { return fail(ChronicleError(.diskFull, "The disk is full; nothing was written.")) }
        return fail(ChronicleError(.database, error.description))
    } catch let error as PostgresError {
        return fail(ChronicleError(.database, "PostgreSQL: \(error.message)"))
    } catch {
        return fail(ChronicleError(.database, "\(error)"))
    }
}

exit(run())
