// swift-tools-version:6.1
import PackageDescription

/// The torture suite is a package of its own, like the benchmarks, so that
/// `swift build` in the repository does not build it. `make torture`
/// builds it in release mode and runs protd-torture, which kills the real
/// protd with SIGKILL under load and checks what survives.

/// SwiftPM names a package depended on by path after its directory, which
/// is whatever the checkout is called.
let protd = String(Context.packageDirectory.split(separator: "/").dropLast().last ?? "protd")

let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "protd-torture",
    dependencies: [
        .package(path: ".."),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
    ],
    targets: [
        .executableTarget(
            name: "protd-torture",
            dependencies: [
                .product(name: "DataProtection", package: protd),
                .product(name: "ProtectionTestSupport", package: protd),
                // The daemon it kills, built with the same flags next to it.
                .product(name: "protd", package: protd),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "protd-torture",
            swiftSettings: strictSettings
        ),
    ],
    swiftLanguageModes: [.v6]
)
