// swift-tools-version: 6.1
import PackageDescription
import CompilerPluginSupport
import Foundation

// `LOOM_OPTIMIZED_TESTS=1` compiles Loom's runtime modules and its tests with `-O` in whatever
// configuration is built, dependencies untouched: `./scripts/test` rebuilds only those in its debug
// build to run the lifetime-sensitive suites optimized (objects die as early as `-O` lets them)
// without a second, release build of every dependency. The macros, the tool, the benchmark and
// the soak keep their flags (what depends on a module rebuilt is compiled again, unoptimized):
// optimizing the macros' swift-syntax code and their tests cost that build time and gave those
// suites nothing.
let optimizedTests = ProcessInfo.processInfo.environment["LOOM_OPTIMIZED_TESTS"] == "1"
let optimizedTargets: Set<String> = ["LoomCore", "LoomSQL", "LoomSQLite", "LoomPostgreSQL", "LoomStoreTesting", "Loom", "LoomTools", "LoomTests"]

/// postgres-nio and what its API takes (the event loop group, the logger): the PostgreSQL store,
/// and the benchmark's and tests' own connections.
let postgresDriver: [Target.Dependency] = [
    .product(name: "PostgresNIO", package: "postgres-nio"),
    .product(name: "NIOCore", package: "swift-nio"),
    .product(name: "NIOPosix", package: "swift-nio"),
    .product(name: "Logging", package: "swift-log"),
]

/// `LOOM_NO_MACRO_TESTS=1` leaves the macro tests out: `./scripts/test`'s ThreadSanitizer build
/// does not run them, and without them it builds swift-syntax once (for the compiler plugin)
/// instead of twice.
let macroTests = ProcessInfo.processInfo.environment["LOOM_NO_MACRO_TESTS"] != "1"

let packageDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().path

let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "Loom",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "Loom", targets: ["Loom"]),
        .library(name: "LoomPostgreSQL", targets: ["LoomPostgreSQL"]),
        // The store contract, for a store written outside Loom to run from its own tests
        // (Tests/OutsideStore shows one).
        .library(name: "LoomStoreTesting", targets: ["LoomStoreTesting"]),
        .executable(name: "loom", targets: ["loom"]),
    ],
    // `PostgreSQL`: the `loom` tool also opens PostgreSQL stores (`swift run --traits PostgreSQL
    // loom …`). Off by default, so that `swift run loom demo` builds no postgres-nio and no TLS
    // stack (swift-nio-ssl's BoringSSL, swift-crypto) for a SQLite demo. It changes only what the
    // tool links: the `LoomPostgreSQL` library and the tests build either way. A trait is a
    // compilation condition of every target here, so switching it rebuilds Loom's own modules
    // (not its dependencies): `./scripts/test` builds everything with it, once.
    traits: [
        .trait(name: "PostgreSQL", description: "The loom tool opens PostgreSQL stores (postgres:// URLs) too."),
    ],
    dependencies: [
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/swiftlang/swift-syntax", from: "603.0.1"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        // `swift package generate-documentation`: the DocC catalog in Sources/Loom/Loom.docc.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        // The object graph, contexts, coordinator and store SPI. No SQLite, no swift-syntax.
        .target(name: "LoomCore", dependencies: [.product(name: "Logging", package: "swift-log")], swiftSettings: strictSettings),
        // SQL generation shared by the SQL stores: table mapping, statements and predicate
        // translation, written through a dialect. No database driver.
        .target(name: "LoomSQL", dependencies: ["LoomCore"], swiftSettings: strictSettings),
        // The SQLite store, on GRDB.
        .target(
            name: "LoomSQLite",
            dependencies: [
                "LoomCore",
                "LoomSQL",
                .product(name: "GRDB", package: "GRDB.swift"),
                // SQLite's C API, for binding and reading values with their exact length.
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
            ],
            swiftSettings: strictSettings),
        // The PostgreSQL store, on postgres-nio: the same tables, semantics and history as SQLite,
        // for several app servers on one database.
        .target(
            name: "LoomPostgreSQL",
            dependencies: [
                "LoomCore",
                "LoomSQL",
            ] + postgresDriver,
            swiftSettings: strictSettings),
        // The store contract as checks any store's tests run through the store SPI (no Testing
        // dependency: each check throws what broke).
        .target(name: "LoomStoreTesting", dependencies: ["LoomCore"], swiftSettings: strictSettings),
        // What `@Model` and friends expand to; swift-syntax stays in here and in the plugin.
        .target(
            name: "LoomMacroExpansion",
            dependencies: [
                .product(name: "SwiftSyntax", package: "swift-syntax"),
                .product(name: "SwiftSyntaxBuilder", package: "swift-syntax"),
                .product(name: "SwiftSyntaxMacros", package: "swift-syntax"),
                .product(name: "SwiftDiagnostics", package: "swift-syntax"),
            ],
            swiftSettings: strictSettings),
        // The compiler plugin: only the macros' types, by the names `Loom/Macros.swift` gives.
        // The macro tests import `LoomMacroExpansion`, not this: a test target that depends on a
        // macro target makes the package manager build every test and all it depends on (NIO,
        // GRDB, Loom) a second time, for the host.
        .macro(
            name: "LoomMacros",
            dependencies: [
                "LoomMacroExpansion",
                .product(name: "SwiftSyntaxMacros", package: "swift-syntax"),
                .product(name: "SwiftCompilerPlugin", package: "swift-syntax"),
            ],
            swiftSettings: strictSettings),
        // The umbrella users import: re-exports LoomCore and LoomSQLite and declares the macros.
        .target(name: "Loom", dependencies: ["LoomCore", "LoomSQLite", "LoomMacros"], swiftSettings: strictSettings),
        // Reads Debian's package database (the demo's data set).
        .target(name: "DebianPackages", resources: [.copy("Resources/status-sample")], swiftSettings: strictSettings),
        // What the `loom` tool's verbs do (query, dump, load, verify), as a library the tool and
        // the tests share.
        .target(
            name: "LoomTools",
            dependencies: [
                "Loom", "LoomCore", "LoomSQL", "LoomSQLite",
                .target(name: "LoomPostgreSQL", condition: .when(traits: ["PostgreSQL"])),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings),
        .executableTarget(
            name: "loom",
            dependencies: [
                "Loom", "LoomTools", "DebianPackages",
                .target(name: "LoomPostgreSQL", condition: .when(traits: ["PostgreSQL"])),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strictSettings),
        // The benchmark (Benchmarks/README.md), also built here so that every build and CI's smoke
        // run of it share this package's build instead of a second one; `Benchmarks/Package.swift`
        // builds the same sources against another Loom checkout.
        .target(
            name: "CBenchSupport",
            path: "Benchmarks/Sources/CBenchSupport",
            cSettings: [.define("LOOM_BENCH_LOOM_PATH", to: "\"\(packageDirectory)\"")]),
        .executableTarget(
            name: "loom-bench",
            dependencies: [
                "CBenchSupport", "Loom", "LoomPostgreSQL",
                .product(name: "GRDB", package: "GRDB.swift"),
                // The same system libsqlite3 that GRDB and Loom link, for the raw C API contender.
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ] + postgresDriver,   // the raw PostgreSQL contender
            path: "Benchmarks/Sources/LoomBenchmarks",
            swiftSettings: strictSettings),
        // The benchmark's own logic (its SVG chart), tested through the executable's module.
        .testTarget(
            name: "LoomBenchTests",
            dependencies: ["loom-bench"],
            path: "Benchmarks/Tests/LoomBenchTests",
            swiftSettings: strictSettings),
        // A SQLite VFS that fails a chosen I/O call, for the fault-injection tests (in no product).
        .target(
            name: "LoomFaultVFS",
            dependencies: [.product(name: "GRDBSQLite", package: "GRDB.swift")],
            path: "Tests/LoomFaultVFS"),
        .testTarget(
            name: "LoomTests",
            dependencies: [
                "Loom", "LoomSQL", "LoomStoreTesting", "LoomPostgreSQL", "LoomTools", "LoomFaultVFS",
            ] + postgresDriver,   // the PostgreSQL tests' own connections (a foreign schema, busy event loops)
            swiftSettings: strictSettings),
        .testTarget(name: "DebianPackagesTests", dependencies: ["DebianPackages"], swiftSettings: strictSettings),
    ],
    swiftLanguageModes: [.v6]
)

if optimizedTests {
    for target in package.targets where optimizedTargets.contains(target.name) {
        target.swiftSettings = (target.swiftSettings ?? []) + [.unsafeFlags(["-O"])]
    }
}

if macroTests {
    package.targets.append(
        .testTarget(
            name: "LoomMacrosTests",
            dependencies: [
                "LoomMacroExpansion",
                .product(name: "SwiftSyntaxMacrosGenericTestSupport", package: "swift-syntax"),
            ],
            swiftSettings: strictSettings))
}

// `scripts/soak` runs `loom-soak` (Soak/): Loom under a long mixed load, with a second process
// killed at random, its memory sampled. Built with everything else so that it keeps compiling;
// never run by CI (its default run is 30 minutes).
package.targets.append(
    .executableTarget(
        name: "loom-soak",
        dependencies: ["Loom", "CSoakSupport", .product(name: "GRDBSQLite", package: "GRDB.swift")],
        path: "Soak/Sources/LoomSoak",
        swiftSettings: strictSettings))

// What the soak reads of malloc's state (glibc's mallinfo2, which Swift's Glibc module lacks).
package.targets.append(.target(name: "CSoakSupport", path: "Soak/Sources/CSoakSupport"))

// `scripts/fuzz` sets `LOOM_FUZZ` to libFuzzer's runtime without its `main`
// (`libclang_rt.fuzzer_no_main`): Loom's parsers are then compiled with the fuzzer's coverage and
// AddressSanitizer, and `loom-fuzz` (Fuzz/) drives them. Off, the package is unchanged: the fuzz
// build lives in its own build folder, and neither CI nor a plain build sees it.
if let fuzzerRuntime = ProcessInfo.processInfo.environment["LOOM_FUZZ"], !fuzzerRuntime.isEmpty {
    let instrumented: Set<String> = ["LoomCore", "LoomSQL", "LoomSQLite", "LoomTools"]
    for target in package.targets where instrumented.contains(target.name) {
        target.swiftSettings = (target.swiftSettings ?? []) + [.unsafeFlags(["-sanitize=fuzzer,address"])]
    }
    package.targets.append(
        .executableTarget(
            name: "loom-fuzz",
            dependencies: ["LoomTools"],
            path: "Fuzz/Sources/LoomFuzz",
            swiftSettings: strictSettings + [.unsafeFlags(["-sanitize=fuzzer,address"])],
            linkerSettings: [.unsafeFlags(["-sanitize=address", "-Xlinker", fuzzerRuntime, "-lstdc++"])]))
}

// `LOOM_WITH_EXAMPLE=1` adds the example server's targets (Examples/BoardServer, its sources
// as they are) to this package, for `./scripts/test` only: built here, they reuse the Loom,
// NIO, PostgreSQL and TLS modules this build already compiled, where the example's own package
// (its own build folder) compiles them all again. Off, the package is unchanged and depends on
// no web framework; the example's own package stays what a user builds, and
// `scripts/check-example-manifest` keeps its targets and these the same.
if ProcessInfo.processInfo.environment["LOOM_WITH_EXAMPLE"] == "1" {
    let example = "Examples/BoardServer"
    package.dependencies += [
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1", traits: []),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
    ]
    // The example's own settings are Loom's (scripts/check-example-manifest compares them).
    package.targets += [
        .target(
            name: "BoardAPI",
            dependencies: [
                "Loom", "LoomPostgreSQL",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "\(example)/Sources/BoardAPI",
            swiftSettings: strictSettings),
        .executableTarget(
            name: "board-server",
            dependencies: [
                "BoardAPI",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "\(example)/Sources/board-server",
            swiftSettings: strictSettings),
        .target(
            name: "BoardLoad",
            dependencies: [
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            path: "\(example)/Sources/BoardLoad",
            swiftSettings: strictSettings),
        .executableTarget(
            name: "board-load",
            dependencies: [
                "BoardLoad",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "\(example)/Sources/board-load",
            swiftSettings: strictSettings),
        .executableTarget(
            name: "board-server-raw",
            dependencies: [
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "\(example)/Sources/board-server-raw",
            swiftSettings: strictSettings),
        .testTarget(
            name: "BoardServerTests",
            dependencies: ["board-server", "board-server-raw", "BoardAPI", "BoardLoad"],
            path: "\(example)/Tests/BoardServerTests",
            exclude: ["Support/browse.py"],
            swiftSettings: strictSettings),
    ]
}
