// swift-tools-version: 6.1
import PackageDescription

// A store written outside Loom, as a store author's package would be: it depends on Loom by path
// and runs Loom's store contract (the LoomStoreTesting product) from its own tests, through the
// store SPI alone (`@_spi(LoomStore) import LoomCore`; nothing `package` or internal of Loom is
// visible from here). `./scripts/test` builds and runs it.
//
// A real store also depends on the `Loom` product, for its users' containers; this one names only
// LoomStoreTesting, whose LoomCore is the store SPI, so that the check builds neither GRDB nor
// swift-syntax a second time.
let package = Package(
    name: "OutsideStore",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "Loom", path: "../.."),
    ],
    targets: [
        .target(
            name: "OutsideStore",
            dependencies: [.product(name: "LoomStoreTesting", package: "Loom")]),
        .testTarget(
            name: "OutsideStoreTests",
            dependencies: ["OutsideStore", .product(name: "LoomStoreTesting", package: "Loom")]),
    ],
    swiftLanguageModes: [.v6]
)
