import ChronicleStore
import Foundation

/// What a process's PostgreSQL store has done, for `/metrics` (`PostgresServerStore.renderMetrics`).
struct PostgresCounters: Sendable {
    /// Requests answered 503 `server_store_unavailable`: PostgreSQL out of reach, or too slow.
    var unavailable = 0
    /// Catch-ups that brought something from PostgreSQL into a replica, and the ops they brought.
    var catchUps = 0
    var opsCaughtUp = 0
    /// Writes ordered in PostgreSQL (pushes and server ops that wrote something).
    var writes = 0
    /// Notifications of other processes' writes, and reconnections of the listening connection.
    var notifications = 0
    var listenerReconnects = 0
    /// Segments this process's replicas handed over to PostgreSQL, and the ops that left its log with them.
    var segmentsSealed = 0
    var opsSealed = 0
    /// Ops whose history this process's replicas dropped in PostgreSQL past the retention horizon.
    var opsDropped = 0
}
