// The memory floor for the idle-RSS figure: a Swift program that reads the
// daemon's configuration file the way protd does (Foundation,
// swift-configuration's YAML provider, Yams), looks its values up,
// and then does nothing. It is built like protd, so whether the Swift
// runtime and Foundation are linked statically or not, it carries the same
// share of them. protd-bench reads its resident size next to the daemon's.
import Configuration
import Foundation

guard CommandLine.arguments.count == 2 else {
    FileHandle.standardError.write(Data("usage: protd-bench-idle CONFIG.yaml\n".utf8))
    exit(64)
}
_ = ProcessInfo.processInfo.environment
let pathReader = ConfigReader(provider: InMemoryProvider(values: [
    "filePath": ConfigValue(.string(CommandLine.arguments[1]), isSecret: false),
]))
let file = try await FileProvider<YAMLSnapshot>(config: pathReader)
// Some of the keys protd reads, looked up the same way.
for key in ["socket.path", "state.directory", "lock.grace-period-seconds", "passcode.argon2-memory-kib",
            "limits.max-connections", "log.level"] {
    _ = try? file.value(forKey: AbsoluteConfigKey(key.split(separator: ".").map(String.init)), type: .string)
}
print("ready")
fflush(nil)
while true { pause() }
