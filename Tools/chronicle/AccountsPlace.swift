import ChronicleCore
import ChroniclePostgres
import ChronicleServer
import ChronicleStore
import Foundation

/// Where `chronicle server`'s account commands find users and devices: a data directory's
/// `server.sqlite`, or the PostgreSQL database servers on several machines share.
enum AccountsPlace {
    case directory(String)
    case postgres(String)

    /// The data directory; nil for PostgreSQL.
    var directory: String? {
        if case .directory(let data) = self { return data }
        return nil
    }

    /// `--postgres CONNINFO`, else `--data DIR`, else `CHRONICLE_POSTGRES`.
    static func parse(_ args: inout Arguments, usage: String) throws -> AccountsPlace {
        let postgres = args.option("postgres")
        let data = args.option("data")
        switch (postgres, data) {
        case (.some, .some):
            throw ChronicleError(.usage, "--data and --postgres name two places for the accounts; give one. Usage: \(usage)")
        case (.some(let conninfo), nil):
            return .postgres(conninfo)
        case (nil, .some(let directory)):
            return .directory(directory)
        case (nil, nil):
            if let conninfo = ProcessInfo.processInfo.environment["CHRONICLE_POSTGRES"], !conninfo.isEmpty { return .postgres(conninfo) }
            throw ChronicleError(.usage, "--data DIR (a lone server's data directory) or --postgres CONNINFO (servers sharing PostgreSQL) is required. Usage: \(usage)")
        }
    }

    /// Connects to PostgreSQL's accounts (made on first use); a connection that fails is a clear error.
    static func postgresStorage(_ conninfo: String, listening: Bool,
                                timeoutMilliseconds: Int = PostgresServerStore.defaultStatementTimeoutMilliseconds) throws -> PostgresAccountsStorage {
        try connecting { try PostgresAccountsStorage(conninfo: conninfo, listening: listening, statementTimeoutMilliseconds: timeoutMilliseconds) }
    }

    /// PostgreSQL's order, with this process's replicas in `replicas` (a server's, or a command's
    /// scratch directory); a connection that fails is a clear error.
    static func postgresStore(_ conninfo: String, replicas: String, poolSize: Int,
                              timeoutMilliseconds: Int = PostgresServerStore.defaultStatementTimeoutMilliseconds) throws -> PostgresServerStore {
        try connecting {
            try PostgresServerStore(conninfo: conninfo, cacheDirectory: replicas, schema: .readItLater, poolSize: poolSize,
                                    statementTimeoutMilliseconds: timeoutMilliseconds)
        }
    }

    private static func connecting<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as PostgresError {
            throw ChronicleError(.database, "Cannot use PostgreSQL (\(error.message)). Check --postgres (a libpq connection string or postgresql:// URI; the password is best kept in PGPASSWORD or ~/.pgpass).")
        }
    }

    /// The accounts, for `action`. A data directory whose accounts `serve --postgres` moved to
    /// PostgreSQL is refused: its file is no longer read by any server.
    func open(for action: String) throws -> Accounts {
        switch self {
        case .postgres(let conninfo):
            return Accounts(storage: try Self.postgresStorage(conninfo, listening: false))
        case .directory(let data):
            let accounts = try Accounts(dataDirectory: data)
            if try accounts.accountsMovedTo() != nil {
                throw ChronicleError(.librariesInPostgreSQL, "The users and devices of \(data) were moved to PostgreSQL by `chronicle serve --postgres`; run `chronicle server \(action) --postgres CONNINFO` (or set CHRONICLE_POSTGRES) instead of --data.")
            }
            return accounts
        }
    }

    /// The libraries PostgreSQL orders that no user owns; nil for a data directory (its files say).
    func unownedLibraries(_ accounts: Accounts) throws -> [UUID]? {
        guard let storage = accounts.storage as? PostgresAccountsStorage else { return nil }
        let owned = Set(try accounts.libraries().map(\.libraryID))
        return try storage.libraries().map(\.id).filter { !owned.contains($0) }
    }
}
