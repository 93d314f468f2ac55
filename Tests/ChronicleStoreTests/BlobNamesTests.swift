import ChronicleCore
@testable import ChronicleStore
import Foundation
import Testing

/// Which values name a file (`BlobNames`), for collection on the server and on a device: an
/// address in any text field that can hold one, in either case or as bare hex, in set fields and
/// in the values a conflict replaced; not in whole documents, and not in rows deleted long ago.
@Suite struct BlobNamesTests {
    static func ref(_ byte: UInt8) -> BlobRef { BlobRef.of([byte]) }

    static func named(_ store: DeviceStore, deletedBefore: Int64?) throws -> Set<String> {
        try store.read { db in try BlobNames.named(in: db, projection: store.projection, deletedBefore: deletedBefore) }
    }

    @Test func whatNamesAFileAndWhatDoesNot() throws {
        let f = try Fixture(schema: .readItLater)
        let store = f.store
        let (audio, bare, transcript, tag, deleted) = (Self.ref(1), Self.ref(2), Self.ref(3), Self.ref(4), Self.ref(5))
        try store.write("episode.save", payload: ["title": .text("Upper case"), "audio_ref": .text(audio.description.uppercased())])
        let article = try store.write("article.save", payload: ["url": .text("https://example.com/x"), "title": .text("X")]).entityID
        try store.write("note.create", payload: ["article_id": .text(article.lowercased), "body": .text(bare.hex)])
        try store.write("episode.save", payload: ["title": .text("A transcript"), "audio_ref": .text("https://example.com/ep.mp3"),
                                                  "transcript": .text(transcript.description)])
        try store.write("article.tag", entity: article, payload: ["tag": .text(tag.description)])
        let gone = try store.write("episode.save", payload: ["title": .text("Deleted"), "audio_ref": .text(deleted.description)]).entityID
        f.clock.advance(milliseconds: 1_000)
        try store.write("episode.delete", entity: gone)
        let deletedAt = f.clock.nowMilliseconds()

        let kept: Set<String> = [audio.hex, bare.hex, tag.hex]
        #expect(try Self.named(store, deletedBefore: nil) == kept.union([deleted.hex]), "a transcript is a document: not a name")
        #expect(try Self.named(store, deletedBefore: deletedAt) == kept.union([deleted.hex]), "deleted at that very moment: still named")
        #expect(try Self.named(store, deletedBefore: deletedAt + 1) == kept, "deleted before: no longer")
    }

    /// A value a concurrent edit replaced stays in a conflict record until it is settled, and
    /// names its file meanwhile.
    @Test func aValueAConflictReplacedNamesItsFile() throws {
        let f = try Fixture(schema: .fieldService)
        let server = ServerLog(library: f.store.libraryID)
        let (phone, tablet, job) = (UUID(), UUID(), UUID())
        let sketch = Self.ref(9)
        var batch = [server.op("job.create", entity: job, from: phone, payload: ["title": .text("Fix the boiler"), "notes": .text("start")])]
        var phoneEdit = server.op("job.update", entity: job, from: phone, payload: ["notes": .text(sketch.description)])
        phoneEdit.baseSeq = 1
        var tabletEdit = server.op("job.update", entity: job, from: tablet, payload: ["notes": .text("needs a new pump")])
        tabletEdit.baseSeq = 1
        batch += [phoneEdit, tabletEdit]
        try f.store.applyConfirmed(batch)
        #expect(try f.store.conflicts().count == 1)
        #expect(try Self.named(f.store, deletedBefore: nil) == [sketch.hex])

        var settle = server.op("job.update", entity: job, from: phone, payload: ["notes": .text("pump ordered")])
        settle.baseSeq = 3
        try f.store.applyConfirmed([settle])
        #expect(try f.store.conflicts().isEmpty)
        #expect(try Self.named(f.store, deletedBefore: nil).isEmpty, "settled: nothing names it")
    }
}
