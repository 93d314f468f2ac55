import ChronicleCore
import Foundation

/// A device's id source: seeded, and able to hand out chosen ids first, so the
/// simulator can make two devices create the same entity id, or reuse another
/// device's op id — the realistic ways a server ends up refusing an op for good.
/// Kept across a device's crashes (it stands for the device's entropy, not for
/// anything in memory that a crash would lose), so ids never repeat by accident.
public final class SimulatedIDGenerator: IDGenerator, @unchecked Sendable {
    private let lock = NSLock()
    private let random: SimulationRandom
    private var forced: [UUID] = []

    public init(random: SimulationRandom) { self.random = random }

    /// The next `makeUUID` calls return these, in order, before random ids resume.
    /// (`DeviceStore.write` draws the entity id of a create first, then the op id.)
    public func force(_ ids: [UUID]) { lock.lock(); forced += ids; lock.unlock() }

    /// Drops forced ids nobody drew (a write refused before it asked for ids).
    public func clearForced() { lock.lock(); forced.removeAll(); lock.unlock() }

    public func makeUUID() -> UUID {
        lock.lock()
        defer { lock.unlock() }
        return forced.isEmpty ? random.uuid() : forced.removeFirst()
    }
}
