// swift-tools-version:6.1
import PackageDescription

/// The libFuzzer targets are a package of their own, as the benchmarks are,
/// so that a plain `swift build` in the repository neither builds nor links
/// them: they have no `main` of their own and link only with
/// `--sanitize=fuzzer`, which supplies libFuzzer's. `make fuzz` builds them
/// (debug configuration, optimised, with libFuzzer and AddressSanitizer:
/// the Makefile's FUZZ_FLAGS say why those flags) and runs each from its
/// seed corpus in corpus/. FuzzFormat reaches internal API with `@testable
/// import`, which the debug configuration allows.

/// SwiftPM names a package depended on by path after its directory, which
/// is whatever the checkout is called.
let protd = String(Context.packageDirectory.split(separator: "/").dropLast().last ?? "protd")

let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "protd-fuzz",
    dependencies: [
        .package(path: ".."),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
    ],
    targets: [
        // Frames from a byte stream, as the daemon and the client split
        // them, and requests and responses parsed from those frames.
        .executableTarget(
            name: "FuzzFrames",
            dependencies: [
                .product(name: "ProtectionWire", package: protd),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            path: "FuzzFrames",
            swiftSettings: strictSettings
        ),
        // A stored file (header, key slot, segments) opened and read with
        // fixed class keys, so the authenticated paths are reachable.
        .executableTarget(
            name: "FuzzFormat",
            dependencies: [
                .product(name: "ProtectionCore", package: protd),
                .product(name: "Sodium", package: protd),
            ],
            path: "FuzzFormat",
            swiftSettings: strictSettings
        ),
    ],
    swiftLanguageModes: [.v6]
)
