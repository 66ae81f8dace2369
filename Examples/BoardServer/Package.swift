// swift-tools-version: 6.1
import PackageDescription

// An example server: a JSON API over Loom's object graph on Hummingbird 2. Its own package,
// depending on Loom by path, so that the library never depends on a web framework.
// `./scripts/test` builds it and runs its integration tests (real server processes on loopback,
// driven by a real HTTP client); README.md shows how to start it.
let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "BoardServer",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "Loom", path: "../.."),
        // Without its default traits: no swift-configuration to build for a server that reads its
        // few options from the command line.
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1", traits: []),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        // Hummingbird's: its graceful shutdown ends the live streams (Server-Sent Events).
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        // The load generator's HTTP client (`board-load`); the example's, never Loom's.
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        // The baseline contender (`board-server-raw`): the same API by hand on the driver.
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
    ],
    targets: [
        // The model, the routes and the error mapping, as a library that the tests read too.
        .target(
            name: "BoardAPI",
            dependencies: [
                .product(name: "Loom", package: "Loom"),
                .product(name: "LoomPostgreSQL", package: "Loom"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strictSettings),
        .executableTarget(
            name: "board-server",
            dependencies: [
                "BoardAPI",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strictSettings),
        // The load generator: a bounded mixed workload on the API and the invariants checked
        // after it, as a library that the tests drive too.
        .target(
            name: "BoardLoad",
            dependencies: [
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: strictSettings),
        .executableTarget(
            name: "board-load",
            dependencies: [
                "BoardLoad",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strictSettings),
        // The baseline: the endpoints the load mix uses, written by hand on postgres-nio.
        .executableTarget(
            name: "board-server-raw",
            dependencies: [
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings),
        // Integration tests: they start the `board-server` executable (built first, as a
        // dependency) on loopback ports and talk to it over HTTP, as a client would, reading the
        // answers with the API's own representations (BoardAPI).
        .testTarget(
            name: "BoardServerTests",
            dependencies: ["board-server", "board-server-raw", "BoardAPI", "BoardLoad"],
            // Drives headless Chromium for the live page's test; run, not compiled.
            exclude: ["Support/browse.py"],
            swiftSettings: strictSettings),
    ],
    swiftLanguageModes: [.v6]
)
