import ChronicleCore
import Foundation
import Testing

/// A schema file's `caps`: read, checked, and part of its fingerprint like the rest of the file.
@Suite struct SchemaCapsTests {
    static let base = """
        { "schema": "shelf", "version": 1,
          CAPS
          "entities": [
            { "name": "book", "fields": [ { "name": "title", "type": "text", "rule": "lww" },
                                         { "name": "deleted_at", "type": "timestamp", "rule": "lww" } ] },
            { "name": "note", "fields": [ { "name": "book_id", "type": "id", "references": "book", "rule": "lww" },
                                         { "name": "body", "type": "text", "rule": "lww" } ] } ],
          "ops": [ { "type": "book.create", "version": 1, "entity": "book", "action": "create", "fields": ["title"] },
                   { "type": "note.create", "version": 1, "entity": "note", "action": "create", "fields": ["book_id", "body"] } ] }
        """

    static func schema(caps: String) throws -> Schema {
        try Schema.load(json: base.replacingOccurrences(of: "CAPS", with: caps.isEmpty ? "" : "\"caps\": \(caps),"))
    }

    @Test func capsAreReadInOrder() throws {
        let schema = try Self.schema(caps: #"[ { "entity": "book", "maximum": 100 }, { "entity": "note", "per": "book_id", "maximum": 0 } ]"#)
        #expect(schema.caps == [FreeTierCap(entity: "book", maximum: 100), FreeTierCap(entity: "note", per: "book_id", maximum: 0)])
        #expect(try Self.schema(caps: "").caps.isEmpty)
        #expect(Schema.readItLater.caps.isEmpty && Schema.fieldService.caps.isEmpty, "the built-in schemas declare none")
    }

    @Test func aBadCapIsRefusedWithASentence() throws {
        let cases: [(String, String)] = [
            (#"{ "entity": "book" }"#, "caps[0] needs a 'maximum' of zero or more rows."),
            (#"[ { "entity": "shelf", "maximum": 1 } ]"#, "caps[0] must name one of the schema's entities in 'entity'."),
            (#"[ { "entity": "book", "maximum": -1 } ]"#, "caps[0] needs a 'maximum' of zero or more rows."),
            (#"[ { "entity": "book", "maximum": "ten" } ]"#, "caps[0] needs a 'maximum' of zero or more rows."),
            (#"[ { "entity": "note", "per": "body", "maximum": 1 } ]"#, "caps[0]: 'per' must be one of note's id fields (a field that references another entity)."),
            (#"[ { "entity": "book", "maximum": 1 }, { "entity": "book", "maximum": 2 } ]"#, "caps[1] caps book a second time."),
        ]
        for (caps, message) in cases {
            do {
                _ = try Self.schema(caps: caps)
                Issue.record("accepted \(caps)")
            } catch let error as ChronicleError {
                #expect(error.code == .invalidSchema)
                // The first case is not an array at all.
                #expect(error.message == (caps.hasPrefix("{") ? "'caps' must be an array of objects." : message), "\(caps)")
            }
        }
    }

    @Test func capsArePartOfTheFingerprint() throws {
        let one = try Self.schema(caps: #"[ { "entity": "book", "maximum": 1 } ]"#)
        let two = try Self.schema(caps: #"[ { "entity": "book", "maximum": 2 } ]"#)
        #expect(one.fingerprint != two.fingerprint, "editing a cap is a schema edit")
        #expect(try Self.schema(caps: #"[ { "entity": "book", "maximum": 1 } ]"#).fingerprint == one.fingerprint)
    }
}
