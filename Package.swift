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
        .library(name: "DataProtection", targets: ["DataProtection"]),
        .library(name: "Sodium", targets: ["Sodium"]),
        .library(name: "ProtectionCore", targets: ["ProtectionCore"]),
        // For the packages beside this one: ProtectionWire for the
        // benchmarks (Benchmarks/), which drive the wire, and the fuzzers
        // (Fuzz/); ProtectionTestSupport, test-only (Tests/, not for
        // applications), for the benchmarks and the torture harness
        // (Torture/), which start daemons as the end-to-end tests do.
        .library(name: "ProtectionWire", targets: ["ProtectionWire"]),
        .library(name: "ProtectionTestSupport", targets: ["ProtectionTestSupport"]),
        .executable(name: "protd", targets: ["protd"]),
        .executable(name: "protctl", targets: ["protctl"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-configuration", from: "1.4.0", traits: ["YAML", "CommandLineArguments"]),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
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
            name: "ProtectionModel",
            swiftSettings: strictSettings
        ),
        .target(
            name: "ProtectionCore",
            dependencies: ["ProtectionModel", "Sodium"],
            swiftSettings: strictSettings
        ),
        .target(
            name: "CPeerCredentials",
            path: "Sources/CPeerCredentials"
        ),
        .target(
            name: "CProcessHardening",
            path: "Sources/CProcessHardening"
        ),
        .target(
            name: "CMallocTuning",
            path: "Sources/CMallocTuning"
        ),
        .target(
            name: "ProtectionVersion",
            swiftSettings: strictSettings
        ),
        .target(
            name: "ProtectionWire",
            dependencies: [
                "ProtectionModel",
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: strictSettings
        ),
        .target(
            name: "ProtectionConfiguration",
            dependencies: [
                "ProtectionCore", "ProtectionWire", "Sodium",
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings
        ),
        .target(
            name: "ProtectionDaemon",
            dependencies: [
                "ProtectionCore", "ProtectionWire", "Sodium", "CPeerCredentials", "CProcessHardening", "CMallocTuning",
                "ProtectionConfiguration", "ProtectionVersion",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strictSettings
        ),
        .target(
            name: "DataProtection",
            dependencies: [
                "ProtectionModel", "ProtectionWire",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "protd",
            dependencies: [
                "ProtectionDaemon", "ProtectionConfiguration",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "protctl",
            dependencies: [
                "DataProtection", "ProtectionVersion",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "protd-harness-probe",
            dependencies: ["ProtectionTestSupport"],
            path: "Tests/HarnessProbe",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "protd-crash-probe",
            dependencies: ["ProtectionCore", "Sodium"],
            path: "Tests/CrashProbe",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "protd-client-probe",
            dependencies: ["DataProtection"],
            path: "Tests/ClientProbe",
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
            dependencies: ["Sodium", "CSodium"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "ProtectionCoreTests",
            dependencies: ["ProtectionCore", "Sodium", "ProtectionTestSupport"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "ProtectionWireTests",
            dependencies: [
                "ProtectionWire", "ProtectionCore",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOTestUtils", package: "swift-nio"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "ProtectionConfigurationTests",
            dependencies: [
                "ProtectionConfiguration", "ProtectionCore", "Sodium", "ProtectionTestSupport",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "ProtectionDaemonTests",
            dependencies: [
                "ProtectionDaemon", "ProtectionCore", "ProtectionWire", "CPeerCredentials", "ProtectionTestSupport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "DataProtectionTests",
            dependencies: ["DataProtection", "ProtectionTestSupport", .product(name: "NIOCore", package: "swift-nio"),
                           .product(name: "NIOPosix", package: "swift-nio")],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "EndToEndTests",
            dependencies: [
                "DataProtection", "ProtectionCore", "ProtectionTestSupport", "ProtectionVersion", "Sodium",
                "ProtectionDaemon", "ProtectionConfiguration",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strictSettings
        ),
    ],
    swiftLanguageModes: [.v6]
)
