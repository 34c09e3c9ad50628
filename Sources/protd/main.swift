import Foundation
import Logging
import ProtectionConfiguration
import ProtectionDaemon
import ServiceLifecycle
import UnixSignals

// protd: read the configuration once, then run the daemon until SIGTERM or
// SIGINT. Exit codes: 0 after a clean shutdown, 78 for a configuration
// error, 1 for any other start-up failure.

// Before any other thread starts (MallocArenas says why).
let mallocArenasLimited = MallocArenas.applyLimit()
// Before anything secret is read: no core dumps, no ptrace by the same user.
do {
    try ProcessHardening.apply()
} catch {
    FileHandle.standardError.write(Data("protd: \(error)\n".utf8))
    exit(1)
}

let arguments = Array(CommandLine.arguments.dropFirst())
let environment = ProcessInfo.processInfo.environment

if DaemonConfiguration.wantsHelp(arguments: arguments) {
    print(DaemonConfiguration.usage)
    exit(0)
}
if DaemonConfiguration.wantsVersion(arguments: arguments) {
    print(VersionLine.current)
    exit(0)
}

let configuration: DaemonConfiguration
do {
    configuration = try await DaemonConfiguration.load(arguments: arguments, environment: environment)
} catch {
    FileHandle.standardError.write(Data("protd: \(error)\n".utf8))
    exit(78)
}

let logLevel = configuration.logLevel
LoggingSystem.bootstrap { label in
    var handler = StreamLogHandler.standardError(label: label)
    handler.logLevel = logLevel
    return handler
}
let logger = Logger(label: "protd")
for warning in DaemonConfiguration.environmentWarnings(environment) {
    logger.warning("\(warning)")
}
if !mallocArenasLimited {
    logger.warning("glibc refused to limit its malloc arenas to \(MallocArenas.limit); memory use will be higher")
}

do {
    let daemon = try Daemon(configuration: configuration, environment: environment, logger: logger)
    var services: [ServiceGroupConfiguration.ServiceConfiguration] = [.init(service: daemon)]
    if let interval = SystemdNotifier.watchdogInterval(environment: environment) {
        // Its end (at shutdown) must not cancel the daemon's own shutdown.
        services.append(.init(service: SystemdWatchdog(notifier: SystemdNotifier(environment: environment),
                                                        interval: interval),
                              successTerminationBehavior: .ignore))
    }
    var groupConfiguration = ServiceGroupConfiguration(
        services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
    groupConfiguration.maximumGracefulShutdownDuration = .seconds(8)
    try await ServiceGroup(configuration: groupConfiguration).run()
} catch let error as DaemonStartupError where error.isConfiguration {
    logger.critical("protd stopped: \(error)")
    exit(78)
} catch {
    logger.critical("protd stopped: \(error)")
    exit(1)
}

// Leave now: nothing may keep a stopped daemon alive.
exit(0)
