package import Sodium

/// Where a store keeps namespaces and names on disk, worked out from its
/// state directory and device secret without a running store: for tests
/// and for people inspecting a state directory by hand. Opens the key bag
/// read-only for its class D key, from which the name keys derive.
package struct StoreLayout {
    private let files: FileStore

    /// The layout of the store in `stateDirectory`, whose key bag opens
    /// under `deviceSecret`.
    package init(stateDirectory: String, deviceSecret: SecretBytes) throws {
        let keyBag = try KeyBag(path: stateDirectory + "/keybag", deviceSecret: deviceSecret, cost: .minimum)
        files = FileStore(root: stateDirectory + "/store", names: try StoreNames(classD: keyBag.keys.d))
    }

    /// `<state>/store/<sealed uid>`.
    package func namespaceDirectory(uid: UInt32) throws -> String {
        try files.namespaceDirectory(Namespace(uid: uid))
    }

    /// Where the file `name` of `uid` is (or would be).
    package func path(of name: String, uid: UInt32) throws -> String {
        try files.location(of: FileName(name), in: Namespace(uid: uid))
    }
}
