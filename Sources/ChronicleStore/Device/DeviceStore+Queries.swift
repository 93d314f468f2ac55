import ChronicleCore
import Foundation

/// What the store knows about itself, for `chronicle status`.
public struct StoreStatus: Sendable {
    public var path: String
    public var formatVersion: Int64
    public var schema: String
    public var libraryID: String
    public var deviceID: String
    /// Highest server seq applied.
    public var cursor: Int64
    public var confirmedOps: Int64
    /// Ops written here and not yet confirmed by the server.
    public var unsentOps: Int64
    public var lastDeviceSeq: Int64
    /// Milliseconds since 1970 of the last successful sync, if any.
    public var lastSyncAt: Int64?
    public var fileBytes: Int64
}

/// One projection row: its scalar fields and set fields.
public struct EntityRow: Sendable {
    public var entityType: String
    public var id: String
    public var fields: [(name: String, value: Value)]
    public var sets: [(name: String, values: [Value])]
    /// True when queued local ops have touched the row and the server has not confirmed them yet.
    public var pending: Bool

    public subscript(_ name: String) -> Value? { fields.first { $0.name == name }?.value }
}

extension DeviceStore {

    public func status() throws -> StoreStatus {
        try read { db in
            let meta = Dictionary(uniqueKeysWithValues: try db.query("SELECT key, value FROM chronicle_meta") { ($0.text(0), $0.value(1)) })
            let bytes = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int64) ?? nil
            let wal = (try? FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int64) ?? nil
            return StoreStatus(
                path: path,
                formatVersion: meta["format_version"]?.integerValue ?? 0,
                schema: "\(schema.name) v\(meta["schema_version"]?.integerValue ?? 0)",
                libraryID: libraryID.lowercased, deviceID: deviceID.lowercased,
                cursor: meta["cursor"]?.integerValue ?? 0,
                confirmedOps: try LogTables.confirmedCount(in: db),
                unsentOps: try db.scalarInt("SELECT count(*) FROM chronicle_outbox") ?? 0,
                lastDeviceSeq: meta["last_device_seq"]?.integerValue ?? 0,
                lastSyncAt: meta["last_sync_at"]?.integerValue,
                fileBytes: (bytes ?? 0) + (wal ?? 0))
        }
    }

    /// The entity type of the row with this id, searching every entity table.
    public func entityType(of id: UUID) throws -> EntitySpec? {
        try read { db in try ProjectionTables.entityType(of: id, schema, in: db) }
    }

    /// One row with its set fields, or nil.
    public func row(_ id: UUID) throws -> EntityRow? {
        guard let entity = try entityType(of: id) else { return nil }
        return try rows(entity.name, where: "t.id = ?1", [.text(id.lowercased)], includeDeleted: true).first
    }

    /// Rows of one entity type, newest first, optionally filtered by SQL over `t`.
    public func rows(_ entityName: String, where filter: String? = nil, _ arguments: [Value] = [],
                     includeDeleted: Bool = false, limit: Int = 1000) throws -> [EntityRow] {
        try read { db in
            try ProjectionTables.rows(entityName, schema, where: filter, arguments, includeDeleted: includeDeleted, limit: limit,
                          markPending: true, in: db)
        }
    }

}

extension DeviceStore {
    /// Rows whose id starts with `prefix` (a whole id or a short form of it), across every entity type.
    public func rows(matchingIDPrefix prefix: String, limit: Int = 10) throws -> [(entity: String, id: String)] {
        let cleaned = prefix.lowercased()
        guard !cleaned.isEmpty, cleaned.allSatisfy({ $0.isHexDigit || $0 == "-" }) else { return [] }
        return try read { db in
            var found: [(String, String)] = []
            for entity in schema.entities {
                found += try db.query("SELECT id FROM \(ProjectionSchema.quoted(entity.table)) WHERE id >= ?1 AND id < ?1 || 'g' LIMIT ?2",
                                      [.text(cleaned), .integer(Int64(limit))]) { (entity.name, $0.text(0)) }
            }
            return found
        }
    }
}
