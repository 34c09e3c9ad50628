// swift-tools-version:6.1
import PackageDescription

/// Settings every target shares: Swift 6 mode with strict concurrency and
/// the upcoming features that keep imports and existentials explicit.
let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "protd",
    products: [
        .library(name: "Sodium", targets: ["Sodium"]),
        .library(name: "ProtectionCore", targets: ["ProtectionCore"]),
    ],
    targets: [
        .systemLibrary(
            name: "CSodium",
            pkgConfig: "libsodium",
            providers: [.apt(["libsodium-dev"])]
        ),
        .target(
            name: "Sodium",
            dependencies: ["CSodium"],
            swiftSettings: strictSettings
        ),
        .target(
            name: "ProtectionCore",
            dependencies: ["Sodium"],
            swiftSettings: strictSettings
        ),
        .target(
            name: "ProtectionTestSupport",
            dependencies: ["ProtectionCore", "Sodium"],
            path: "Tests/ProtectionTestSupport",
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "SodiumTests",
            dependencies: ["Sodium"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "ProtectionCoreTests",
            dependencies: ["ProtectionCore", "Sodium", "ProtectionTestSupport"],
            swiftSettings: strictSettings
        ),
    ],
    swiftLanguageModes: [.v6]
)
