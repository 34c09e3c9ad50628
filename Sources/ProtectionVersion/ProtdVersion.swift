/// The release of protd and protctl, which both print it for `--version`.
/// The one place the version is written; it has no dependencies, so the
/// crypto-free client side can show it too.
public enum ProtdVersion {
    /// The release, e.g. `1.0.0`.
    public static let current = "1.0.0"
}
