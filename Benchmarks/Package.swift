// swift-tools-version:6.1
import PackageDescription

/// The benchmarks are a package of their own, as swift-nio keeps its own,
/// so that `swift build` in the repository builds protd, protctl and the
/// test probes, not the benchmarks.
/// `make bench` builds this package in release mode and runs protd-bench.

/// SwiftPM names a package depended on by path after its directory, which
/// is whatever the checkout is called.
let protd = String(Context.packageDirectory.split(separator: "/").dropLast().last ?? "protd")

let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "protd-benchmarks",
    dependencies: [
        .package(path: ".."),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-configuration", from: "1.4.0", traits: ["YAML"]),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
    ],
    targets: [
        .executableTarget(
            name: "protd-bench",
            dependencies: [
                .product(name: "DataProtection", package: protd),
                .product(name: "ProtectionCore", package: protd),
                .product(name: "ProtectionWire", package: protd),
                .product(name: "Sodium", package: protd),
                .product(name: "ProtectionTestSupport", package: protd),
                // The daemon it measures, built with the same flags next to it.
                .product(name: "protd", package: protd),
                // Not linked for their code: the dependency makes building protd-bench build these helpers too.
                "protd-bench-idle", "protd-bench-subscribers", "protd-bench-fscrypt",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "protd-bench",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "protd-bench-subscribers",
            dependencies: [
                .product(name: "DataProtection", package: protd),
                .product(name: "ProtectionWire", package: protd),
                .product(name: "ProtectionTestSupport", package: protd),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "protd-bench-subscribers",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "protd-bench-fscrypt",
            dependencies: [
                "CFscrypt",
                .product(name: "ProtectionTestSupport", package: protd),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "protd-bench-fscrypt",
            swiftSettings: strictSettings
        ),
        .target(
            name: "CFscrypt",
            path: "CFscrypt"
        ),
        .executableTarget(
            name: "protd-bench-idle",
            dependencies: [.product(name: "Configuration", package: "swift-configuration")],
            path: "protd-bench-idle",
            swiftSettings: strictSettings
        ),
    ],
    swiftLanguageModes: [.v6]
)
