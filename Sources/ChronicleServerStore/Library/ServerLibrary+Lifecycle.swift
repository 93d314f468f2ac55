import ChronicleCore
import ChronicleStore
import Foundation

extension ServerLibrary: LogLifecycle {
    /// The server's projection holds the confirmed state at its head and nothing else.
    package var projectsConfirmedStateOnly: Bool { true }
    package var snapshotsServeNewDevices: Bool { true }

    package func confirmedStateOnly(in db: Database) throws -> Bool { true }

    /// The server's clock is the one server times come from.
    package func serverNow(_ now: Int64, in db: Database) throws -> Int64 { now }

    package func vacuum() throws {
        try writer.withLock { db in
            try db.execute("VACUUM")
            checkpointer.truncate(writer: db)
        }
    }

    /// The server keeps its hot log a row per op (`chronicle_log`): pushes read it by op id and
    /// by entity, and a running server seals a segment at a time, so it stays small.
    package func hotLogEnd(in db: Database) throws -> Int64? {
        try db.scalarInt("SELECT max(server_seq) FROM chronicle_log")
    }

    package func firstHotSeq(after sealed: Int64, timeAtLeast time: Int64, in db: Database) throws -> Int64? {
        try db.scalarInt("SELECT min(server_seq) FROM chronicle_log WHERE server_seq > ?1 AND server_time >= ?2", [.integer(sealed), .integer(time)])
    }

    package func lastHotSeq(after sealed: Int64, through: Int64, timeBefore time: Int64, in db: Database) throws -> Int64? {
        try db.scalarInt("SELECT max(server_seq) FROM chronicle_log WHERE server_seq > ?1 AND server_seq <= ?2 AND server_time < ?3",
                         [.integer(sealed), .integer(through), .integer(time)])
    }

    package func prepareSeal(after sealed: Int64, previousDigest: String, through: Int64, endingAt boundary: Int64?,
                     policy: CompactionPolicy, in db: Database) throws -> PreparedSeal? {
        try prepareRowSeal(after: sealed, previousDigest: previousDigest, through: through, endingAt: boundary, policy: policy, in: db)
    }

    /// A running server seals a segment at a time between serving requests: each commit waits
    /// for the disk, and checkpoints go on as usual.
    package func sealing<T>(_ body: () throws -> T) throws -> T { try body() }

    package func sealTransaction<T>(_ body: (Database) throws -> T) throws -> T { try writeTransaction(body) }

    package func releaseSealed(_ segment: EncodedSegment, in db: Database) throws {
        try db.execute("DELETE FROM chronicle_log WHERE server_seq >= ?1 AND server_seq <= ?2", [.integer(segment.firstSeq), .integer(segment.lastSeq)])
    }

    /// The server keeps each id as text with its seq and author (`chronicle_sealed_ops`): a
    /// repeated push is answered with the original outcome.
    package func rememberSealed(_ ops: ArraySlice<Op>, in db: Database) throws {
        let remember = try db.statement("INSERT INTO chronicle_sealed_ops(op_id, server_seq, device_id) VALUES (?1, ?2, ?3)")
        for op in ops {
            do {
                try remember.execute([.text(op.opID.lowercased), .integer(op.serverSeq!), .text(op.deviceID.lowercased)])
            } catch {
                guard error.isConstraint else { throw error }
                throw Self.sealedDuplicate(op)
            }
        }
    }

    /// Seals the log's prefix into segments, snapshots the state, and drops history past the
    /// retention horizon if the policy sets one (devices behind it then start from the
    /// snapshot). The snapshot is read from the library's projection at its head as it is
    /// read (`CompactionReport.snapshotSeq`, at or after the seal point). Same steps and guarantees as `DeviceStore.compact`: every step is
    /// its own transaction, so pushes to the library go on between them, and `afterStep`
    /// (after each committed step) may throw to stop there, leaving a whole library.
    @discardableResult
    public func compact(_ policy: CompactionPolicy, progress: ProgressHandler? = nil,
                        afterStep: ((Int, String) throws -> Void)? = nil) throws -> CompactionReport {
        let report = try runCompaction(policy, progress: progress, afterStep: afterStep)
        try publishSealed()
        return report
    }

    /// Lets the database this file follows keep the segments it sealed in place of their ops
    /// (`LibraryUpstream.sealed`); nothing for a library that is its own file.
    public func publishSealed() throws {
        try upstream?.sealed(self)
    }

    public func compactionPlan(_ policy: CompactionPolicy) throws -> CompactionPlan {
        let now = clock.nowMilliseconds()
        return try read { db in try plan(policy, now: now, in: db) }
    }
}
