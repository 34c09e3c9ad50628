import Foundation
internal import ProtectionCore
internal import Sodium

/// Turns a store back into the first layout, whose paths showed uids and
/// names (`<state>/store/<uid>/files/<name>`, `<state>/store/<uid>/tmp`),
/// as a state directory of an older protd has it: every listed file moves
/// to its clear path, the sealed namespace directories go and the key
/// bag loses its sealed-names flag. File
/// contents and headers stay as they are (a header is bound to the name,
/// not to the path). For migration tests; the store must not be running.
public enum LegacyStoreLayout {
    /// Moves `files` (uid and name of each) of the store in `stateDirectory`.
    public static func convert(stateDirectory: String, files: [(uid: UInt32, name: String)]) throws {
        let secret = try DeviceSecret.load(from: .file(path: stateDirectory + "/device-key"))
        let layout = try StoreLayout(stateDirectory: stateDirectory, deviceSecret: secret)
        let keyBag = try KeyBag(path: stateDirectory + "/keybag", deviceSecret: secret, cost: .minimum)
        defer { keyBag.wipe() }
        try keyBag.clearNamesSealedForTesting()
        let manager = FileManager.default
        for file in files {
            let legacy = stateDirectory + "/store/\(file.uid)/files/" + file.name
            try manager.createDirectory(atPath: (legacy as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try manager.moveItem(atPath: try layout.path(of: file.name, uid: file.uid), toPath: legacy)
        }
        for uid in Set(files.map(\.uid)) {
            try manager.createDirectory(atPath: stateDirectory + "/store/\(uid)/tmp", withIntermediateDirectories: true)
            try manager.removeItem(atPath: try layout.namespaceDirectory(uid: uid))
        }
    }
}
