import Foundation
import PackagePlugin

/// Compiles every `Schemas/**/*.json` into the target as string constants, so the
/// schema is written once, as data, and the code reads it from there.
@main
struct EmbedSchemas: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let root = context.package.directoryURL.appending(path: "Schemas")
        var inputs: [URL] = []
        if let walker = FileManager.default.enumerator(at: root, includingPropertiesForKeys: nil) {
            for case let url as URL in walker where url.pathExtension == "json" {
                inputs.append(url)
            }
        }
        inputs.sort { $0.path < $1.path }
        let output = context.pluginWorkDirectoryURL.appending(path: "EmbeddedSchemas.swift")
        return [
            .buildCommand(
                displayName: "Embedding \(inputs.count) schema files",
                executable: try context.tool(named: "schema-embedder").url,
                arguments: [output.path, root.path] + inputs.map(\.path),
                inputFiles: inputs,
                outputFiles: [output])
        ]
    }
}
