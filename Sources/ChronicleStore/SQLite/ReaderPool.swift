/// Read-only connections to one database file, reused across reads. In WAL mode
/// each read sees a consistent snapshot and never waits for the writer.
final class ReaderPool: Sendable {
    let path: String
    private let idle = Locked<[Database]>([])

    init(path: String) { self.path = path }

    func read<T>(_ body: (Database) throws -> T) throws -> T {
        let db = try idle.withLock { pool -> Database in
            if let db = pool.popLast() { return db }
            var options = Database.Options()
            options.readOnly = true
            return try Database(path: path, options: options)
        }
        defer { idle.withLock { $0.append(db) } }
        return try db.readTransaction(body)
    }
}
