import Glibc
import ProtectionCore
import Sodium

// protd-crash-probe STATE N create|write NAME: opens a store in STATE, then
// creates NAME through a handle (`create`) or writes it whole (`write`, 3
// segments, durable), exiting abruptly, as under kill -9, just before its
// Nth disk I/O call of that operation (debug builds; see
// Posix.exitBeforeDiskIOCall). Exits 0 when the operation finished first.
// AtomicCreateTests checks what each crash point leaves on disk.
let arguments = CommandLine.arguments
guard arguments.count == 5, let crashPoint = Int(arguments[2]), ["create", "write"].contains(arguments[3]) else {
    print("usage: protd-crash-probe STATE N create|write NAME")
    exit(64)
}
let store = try ProtectedStore(configuration: StoreConfiguration(stateDirectory: arguments[1], passcodeCost: .minimum))
let name = try FileName(arguments[4])
let namespace = Namespace(uid: 1000)
#if DEBUG
Posix.exitBeforeDiskIOCall(crashPoint)
#else
print("protd-crash-probe needs a debug build (its crash points are debug-only)")
exit(2)
#endif
if arguments[3] == "create" {
    _ = try store.open(name, in: namespace, mode: .createNew(.complete))
} else {
    try store.write([UInt8](repeating: 7, count: 3 * 65536 + 5), to: name, in: namespace, protection: .complete,
                    durable: true)
}
exit(0)
