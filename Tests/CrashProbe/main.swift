import Glibc
import ProtectionCore
import Sodium

// protd-crash-probe STATE N create|write|passwd|open NAME: opens a store in
// STATE, then creates NAME through a handle (`create`), writes it whole
// (`write`, 3 segments, durable) or sets the first passcode, `NAME` (`passwd`,
// which rewraps every file), exiting abruptly, as under kill -9, just
// before its Nth disk I/O call of that operation (debug builds; see
// Posix.exitBeforeDiskIOCall). `open` counts from before the store opens,
// so it interrupts the start itself (moving an older layout's files; NAME
// is unused). Exits 0 when the operation finished first.
// AtomicCreateTests, FirstPasscodeKeysTests and LegacyLayoutMigrationTests
// check what each crash point leaves on disk.
let arguments = CommandLine.arguments
guard arguments.count == 5, let crashPoint = Int(arguments[2]),
      ["create", "write", "passwd", "open"].contains(arguments[3]) else {
    print("usage: protd-crash-probe STATE N create|write|passwd|open NAME")
    exit(64)
}
#if DEBUG
if arguments[3] == "open" { Posix.exitBeforeDiskIOCall(crashPoint) }
#endif
let store = try ProtectedStore(configuration: StoreConfiguration(stateDirectory: arguments[1], passcodeCost: .minimum))
let namespace = Namespace(uid: 1000)
#if DEBUG
if arguments[3] == "open" { exit(0) }
Posix.exitBeforeDiskIOCall(crashPoint)
#else
print("protd-crash-probe needs a debug build (its crash points are debug-only)")
exit(2)
#endif
switch arguments[3] {
case "create":
    _ = try store.open(try FileName(arguments[4]), in: namespace, mode: .createNew(.complete))
case "write":
    try store.write([UInt8](repeating: 7, count: 3 * 65536 + 5), to: try FileName(arguments[4]), in: namespace,
                    protection: .complete, durable: true)
default:
    try store.setPasscode(try SecretBytes(utf8: arguments[4]), old: nil)
}
exit(0)
