import ChronicleCore
@testable import ChronicleStore
import Foundation
import Testing

/// An app embedding Chronicle with a schema of its own (not one compiled into this build):
/// its store opens, and opens migrated when the app ships a new version of the schema.
@Suite struct OwnSchemaTests {
    /// A recipes app's schema, v1 and v2 (v2 renames `cook` to `chef` and adds a set of ingredients):
    /// `Tests/Fixtures/schemas/recipes-v*.json`.
    static func recipes(_ version: Int) throws -> String {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/schemas/recipes-v\(version).json")
        return try String(contentsOf: url, encoding: .utf8)
    }

    func scratch() throws -> String {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-own-\(UUID().lowercased)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        return directory
    }

    @Test func aStoreOfTheAppsOwnSchemaOpensWithItAndMigratesToItsNextVersion() throws {
        let directory = try scratch()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/recipes.chronicle"
        let first = try Schema.load(json: Self.recipes(1))
        let recipe = try DeviceStore.create(at: path, schema: first)
            .write("recipe.create", payload: ["title": .text("Soup"), "cook": .text("Ada")]).entityID

        // Without the schema, the store says how to open it, and is left as it was.
        do {
            _ = try DeviceStore.open(at: path)
            Issue.record("a store of a schema this build does not include opened")
        } catch let error as ChronicleError {
            #expect(error.code == .schemaMismatch && error.message.contains("DeviceStore.open(at:schema:)"), "\(error)")
        }
        // Another app's schema is refused.
        #expect(throws: ChronicleError.self) { _ = try DeviceStore.open(at: path, schema: .fieldService) }

        let reopened = try DeviceStore.open(at: path, schema: first)
        #expect(try reopened.row(recipe)?["cook"]?.textValue == "Ada")

        // The app's next version: the projection rebuilt from the log, the old op upcast.
        let second = try Schema.load(history: [Self.recipes(1), Self.recipes(2)])
        #expect(try DeviceStore.migrationPlan(at: path, schema: second).rebuildsProjection)
        let migrated = try DeviceStore.open(at: path, schema: second)
        // Until its upkeep rebuilds it, the store is neither read nor written in a shape it does not have.
        #expect(throws: ChronicleError.self) { _ = try migrated.row(recipe) }
        #expect(throws: ChronicleError.self) { try migrated.write("recipe.add", entity: recipe, payload: ["ingredient": .text("salt")]) }
        #expect(try migrated.upkeepDue().schemaChange == StoreUpkeep.SchemaChange(from: 1, to: 2))
        try migrated.performUpkeep()
        #expect(try migrated.upkeepDue().schemaChange == nil)
        #expect(try migrated.row(recipe)?["chef"]?.textValue == "Ada")
        try migrated.write("recipe.add", entity: recipe, payload: ["ingredient": .text("leek")])
        #expect(try migrated.search("ada").map(\.id) == [recipe.lowercased])
        #expect(try migrated.verify().passed)
        // And an app still at v1 cannot open what v2 wrote.
        #expect(throws: ChronicleError.self) { _ = try DeviceStore.open(at: path, schema: first) }
    }
}
