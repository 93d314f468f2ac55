// swift-tools-version: 6.0
// Chronicle: an offline-first sync engine. Layers only point down:
// C shims → ChronicleCore → ChronicleStore → (Sync/Server) → apps' server extensions
// (ChronicleArticles) → Tools. The generic server names no app's op types; an app's
// server-side work is a ServerExtension in a module of its own.
import PackageDescription

let strict: [SwiftSetting] = [.swiftLanguageMode(.v6)]

let package = Package(
    name: "Chronicle",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "ChronicleCore", targets: ["ChronicleCore"]),
        .library(name: "ChronicleStore", targets: ["ChronicleStore"]),
        .library(name: "ChronicleSync", targets: ["ChronicleSync"]),
        .library(name: "ChronicleServerStore", targets: ["ChronicleServerStore"]),
        .library(name: "ChronicleServer", targets: ["ChronicleServer"]),
        .library(name: "ChroniclePostgres", targets: ["ChroniclePostgres"]),
        .library(name: "ChronicleArticles", targets: ["ChronicleArticles"]),
        .executable(name: "chronicle", targets: ["chronicle"]),
        .executable(name: "chronicle-bench", targets: ["chronicle-bench"]),
    ],
    targets: [
        // System libraries from Debian packages, wrapped as-is.
        .systemLibrary(name: "CSQLite", path: "Sources/CSQLite", pkgConfig: "sqlite3",
                       providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CLZ4", path: "Sources/CLZ4", pkgConfig: "liblz4",
                       providers: [.apt(["liblz4-dev"])]),
        .systemLibrary(name: "CCrypto", path: "Sources/CCrypto", pkgConfig: "libcrypto",
                       providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CMicroHTTPD", path: "Sources/CMicroHTTPD", pkgConfig: "libmicrohttpd",
                       providers: [.apt(["libmicrohttpd-dev"])]),
        .systemLibrary(name: "CPQ", path: "Sources/CPQ", pkgConfig: "libpq",
                       providers: [.apt(["libpq-dev"])]),
        .systemLibrary(name: "CXML2", path: "Sources/CXML2", pkgConfig: "libxml-2.0",
                       providers: [.apt(["libxml2-dev"])]),
        .systemLibrary(name: "CTLS", path: "Sources/CTLS", pkgConfig: "libssl",
                       providers: [.apt(["libssl-dev"])]),
        // glibc's posix_spawn with its closefrom file action, for the test support's ChildProcess.
        .systemLibrary(name: "CSpawn", path: "Sources/CSpawn"),

        // Build-time: turns Schemas/**/*.json into Swift string constants so the
        // schema is defined once, as data, and compiled in.
        .executableTarget(name: "schema-embedder", path: "Tools/schema-embedder", swiftSettings: strict),
        .plugin(name: "EmbedSchemas", capability: .buildTool(), dependencies: ["schema-embedder"],
                path: "Plugins/EmbedSchemas"),

        .target(name: "ChronicleCore", dependencies: ["CLZ4", "CCrypto"],
                swiftSettings: strict, plugins: ["EmbedSchemas"]),
        .target(name: "ChronicleStore", dependencies: ["ChronicleCore", "CSQLite", "CLZ4", "CCrypto"],
                swiftSettings: strict),

        // The server's storage: library files (the canonical log), blobs, accounts, and the
        // protocols the PostgreSQL storage implements beside them.
        .target(name: "ChronicleServerStore", dependencies: ["ChronicleStore", "CSQLite"], swiftSettings: strict),
        // The server's order and accounts kept in PostgreSQL, for several servers sharing one database.
        .target(name: "ChroniclePostgres", dependencies: ["ChronicleServerStore", "CPQ"], swiftSettings: strict),
        .target(name: "ChronicleSync", dependencies: ["ChronicleStore"], swiftSettings: strict),
        .target(name: "ChronicleServer", dependencies: ["ChronicleServerStore", "CMicroHTTPD", "CCrypto"],
                swiftSettings: strict),
        // The read-it-later app's article fetcher, a ServerExtension: reads saved pages (TLS,
        // libxml2) into article.parsed ops.
        .target(name: "ChronicleArticles", dependencies: ["ChronicleServer", "ChronicleServerStore", "CXML2", "CTLS"],
                swiftSettings: strict),
        // Test support shipped as a module: the seeded simulator, its clocks and faults.
        .target(name: "ChronicleTesting", dependencies: ["ChronicleSync", "ChronicleServer", "ChronicleServerStore", "ChronicleStore", "CSpawn"],
                swiftSettings: strict),

        .executableTarget(name: "chronicle", dependencies: ["ChronicleStore", "ChronicleSync", "ChronicleServerStore", "ChronicleServer", "ChroniclePostgres",
                                                            "ChronicleArticles"],
                          path: "Tools/chronicle", swiftSettings: strict),
        .executableTarget(name: "chronicle-fixture", dependencies: ["ChronicleStore", "ChronicleTesting"],
                          path: "Tools/chronicle-fixture", swiftSettings: strict),
        // Test support: a real sync server with a fault wrapped around its routes (fault tests).
        .executableTarget(name: "chronicle-test-server", dependencies: ["ChronicleServer", "ChronicleTesting"],
                          path: "Tools/chronicle-test-server", swiftSettings: strict),
        .executableTarget(name: "chronicle-bench", dependencies: ["ChronicleStore", "ChronicleSync", "ChronicleServerStore", "ChronicleServer", "ChroniclePostgres", "ChronicleArticles", "ChronicleTesting", "CSQLite", "CXML2"],
                          path: "Tools/chronicle-bench", swiftSettings: strict),

        .testTarget(name: "ChronicleCoreTests", dependencies: ["ChronicleCore", "ChronicleStore", "ChronicleTesting"], swiftSettings: strict),
        .testTarget(name: "ChronicleStoreTests", dependencies: ["ChronicleStore", "ChronicleServerStore", "CSQLite", "ChronicleTesting"],
                    swiftSettings: strict),
        .testTarget(name: "ChronicleServerTests", dependencies: ["ChronicleServer", "ChronicleServerStore", "ChronicleStore", "ChronicleSync", "CMicroHTTPD", "ChronicleTesting"],
                    swiftSettings: strict),
        .testTarget(name: "ChronicleSyncTests", dependencies: ["ChronicleSync", "ChronicleServer", "ChronicleServerStore", "ChronicleTesting"],
                    swiftSettings: strict),
        .testTarget(name: "ChronicleArticlesTests", dependencies: ["ChronicleArticles", "ChronicleServer", "ChronicleServerStore", "ChronicleSync", "CTLS", "ChronicleTesting"],
                    swiftSettings: strict),
        .testTarget(name: "ChroniclePostgresTests", dependencies: ["ChroniclePostgres", "ChronicleServerStore", "ChronicleServer", "ChronicleArticles", "ChronicleSync", "ChronicleTesting"],
                    swiftSettings: strict),
        .testTarget(name: "ChronicleSimulationTests", dependencies: ["ChronicleTesting"], swiftSettings: strict),
        .testTarget(name: "ChronicleToolTests", dependencies: ["ChronicleStore", "ChronicleServerStore", "ChroniclePostgres", "ChronicleTesting", "chronicle", "chronicle-test-server"], swiftSettings: strict),
    ]
)
