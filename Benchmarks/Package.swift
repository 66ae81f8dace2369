// swift-tools-version: 6.1
import Foundation
import PackageDescription

// The Loom checkout to measure: this repository by default; `LOOM_PATH=/path/to/loom` measures
// another one (an older revision, say) with the same workloads.
let loomPath = ProcessInfo.processInfo.environment["LOOM_PATH"] ?? ".."
let loomDirectory = URL(fileURLWithPath: loomPath, relativeTo: URL(fileURLWithPath: #filePath).deletingLastPathComponent())
    .standardizedFileURL.path

// Vapor's Fluent (fluent-kit with its SQLite and PostgreSQL drivers) as a contender: only here,
// never in Loom's own package, whose `loom-bench` (CI's smoke round) builds the same sources
// without it (they test `canImport(FluentKit)`). `LOOM_BENCH_FLUENT=0` leaves it out here too.
let withFluent = ProcessInfo.processInfo.environment["LOOM_BENCH_FLUENT"] != "0"

// Loom's benchmark suite: one executable that runs every workload against the raw SQLite C API,
// GRDB, Fluent and Loom in the same process. Kept apart from the library so that neither its
// dependencies nor its release build weigh on Loom's own.
let package = Package(
    name: "LoomBenchmarks",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "loom-bench", targets: ["LoomBenchmarks"]),
    ],
    dependencies: [
        .package(name: "Loom", path: loomPath),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
    ] + (withFluent ? [
        .package(url: "https://github.com/vapor/fluent-kit", from: "1.57.0"),
        .package(url: "https://github.com/vapor/fluent-sqlite-driver", from: "4.9.0"),
        .package(url: "https://github.com/vapor/fluent-postgres-driver", from: "2.14.0"),
    ] : []),
    targets: [
        // glibc's allocator statistics (`mallinfo2`), which Swift's Glibc module does not export.
        // It also records which Loom checkout was measured, for the report.
        // Named apart from the root package's `CBenchSupport` target, which builds the same sources
        // (target names are unique in a package graph): the sources import either.
        .target(name: "CBenchSupportStandalone", path: "Sources/CBenchSupport", cSettings: [.define("LOOM_BENCH_LOOM_PATH", to: "\"\(loomDirectory)\"")]),
        .executableTarget(
            name: "LoomBenchmarks",
            dependencies: [
                "CBenchSupportStandalone",
                .product(name: "Loom", package: "Loom"),
                .product(name: "GRDB", package: "GRDB.swift"),
                // The same system libsqlite3 that GRDB and Loom link, for the raw C API contender.
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                // Loom's PostgreSQL store and the raw PostgreSQL contender (the PG- workloads).
                .product(name: "LoomPostgreSQL", package: "Loom"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ] + (withFluent ? [
                // Fluent's SQLite driver links its own SQLite (sqlite-nio's amalgamation), not the
                // system library the others use: the report names both.
                .product(name: "FluentKit", package: "fluent-kit"),
                .product(name: "FluentSQLiteDriver", package: "fluent-sqlite-driver"),
                .product(name: "FluentPostgresDriver", package: "fluent-postgres-driver"),
            ] : []),
            swiftSettings: [
                .enableUpcomingFeature("ExistentialAny"),
                .enableUpcomingFeature("InternalImportsByDefault"),
            ]),
    ],
    swiftLanguageModes: [.v6]
)
