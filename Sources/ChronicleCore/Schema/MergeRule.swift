/// How concurrent writes to one field are folded, in server order. Every field
/// of every entity type declares exactly one rule (`Schemas/schema-format.md`).
public enum MergeRule: String, Sendable, CaseIterable {
    /// The last op in server order that sets the field wins.
    case lww
    /// A lower value is ignored unless the current value was set by the same
    /// device less than `forwardOnlyWindowMilliseconds` earlier by its own clock.
    /// One device's times are only ever compared with its own, never another's.
    case forwardOnly
    /// Only server-authored ops may set it; a client op that tries is rejected.
    case serverOnly
    /// Add/remove of elements, applied in server order.
    case set
    /// The sum of deltas.
    case counter
    /// Sequential edits act as `lww`; a concurrent edit wins by order but the
    /// value it replaced is kept in a conflict record.
    case mergeOrAsk

    /// Re-reading inside one session is not a regression.
    public static let forwardOnlyWindowMilliseconds: Int64 = 5 * 60 * 1000
}

/// The type of a field's values.
public enum FieldType: String, Sendable {
    case text, url, integer, real, boolean, timestamp, id
}

/// What an op type does to its entity; the materializer turns each into SQL.
public enum OpAction: String, Sendable {
    /// Make the row (first create in server order wins; later ones are ignored).
    case create
    /// Make the row if missing, then set the payload's fields.
    case upsert
    /// Set the payload's fields.
    case set
    /// Add one element to a `set` field.
    case add
    /// Remove one element from a `set` field.
    case remove
    /// Add a delta to a `counter` field.
    case increment
    /// Soft delete: `deleted_at` becomes the server's time of the op (`Materializer.deletedTime`).
    case delete
    /// Undo a soft delete.
    case restore
}
