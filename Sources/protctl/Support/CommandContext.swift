import ArgumentParser
import DataProtection
import Foundation

/// What every subcommand does around its work: connect with the global
/// options, print errors as one line on stderr, and exit with a sysexits
/// code that says what kind of failure it was.
struct CommandContext {
    let socketPath: String?
    let json: Bool

    init(_ root: Protctl) {
        socketPath = root.socket
        json = root.json
    }

    /// The socket path protctl will use: --socket, else $PROTD_SOCKET when
    /// set and not empty (as `DataProtectionClient` reads it), else the default.
    var resolvedSocketPath: String {
        socketPath ?? ProcessInfo.processInfo.environment[DataProtectionClient.socketPathEnvironmentVariable]
            .flatMap { $0.isEmpty ? nil : $0 } ?? DataProtectionClient.defaultSocketPath
    }

    /// Connects, runs `body`, and maps any failure to an exit code.
    func run(_ body: (DataProtectionClient) async throws -> Void) async throws {
        do {
            let path = resolvedSocketPath
            guard !path.isEmpty, path.utf8.count <= 107 else {
                throw CommandFailure(description: "the socket path must be 1 to 107 bytes (a Unix socket address limit); "
                                     + "check --socket or PROTD_SOCKET", exitCode: ExitCodes.configuration)
            }
            let client = try await DataProtectionClient.connect(socketPath: path, clientName: "protctl")
            do {
                try await body(client)
            } catch {
                await client.close()
                throw error
            }
            await client.close()
        } catch let exit as ExitCode {
            throw exit
        } catch {
            Output.error(error)
            throw ExitCode(ExitCodes.code(for: error))
        }
    }
}

extension DataProtectionClient {
    /// `status()` for a command that acts on what it says: in a fault state
    /// the daemon cannot know whether a passcode or recovery key is set (it
    /// reports neither), so the command stops with the fault instead.
    func servingStatus() async throws -> DaemonStatus {
        let status = try await status()
        if let fault = status.fault {
            throw CommandFailure(description: "protd is in a fault state and serves no files: \(fault); "
                                 + "see journalctl -u protd", exitCode: ExitCodes.configuration)
        }
        return status
    }
}

/// The sysexits(3) codes protctl uses.
enum ExitCodes {
    static let usage: Int32 = 64
    static let dataError: Int32 = 65
    static let noInput: Int32 = 66
    static let unavailable: Int32 = 69
    static let tryAgain: Int32 = 75
    static let noPermission: Int32 = 77
    static let configuration: Int32 = 78

    /// The exit code for a failure.
    static func code(for error: any Error) -> Int32 {
        guard let error = error as? DataProtectionError else {
            return (error as? CommandFailure)?.exitCode ?? 1
        }
        switch error.code {
        case .integrityFailure: return dataError
        case .notFound: return noInput
        case .daemonUnavailable, .protocolError, .unsupportedVersion, .tooManyConnections, .timedOut: return unavailable
        case .protectedDataUnavailable, .rateLimited: return tryAgain
        case .wrongPasscode, .permissionDenied, .erasedAfterFailedAttempts: return noPermission
        case .keyBagCorrupt: return configuration
        case .invalidName, .invalidArgument, .alreadyExists, .noPasscodeSet: return usage
        default: return 1
        }
    }
}

/// A failure found by protctl itself (bad input file, mismatched passcodes).
struct CommandFailure: Error, CustomStringConvertible {
    let description: String
    let exitCode: Int32
}
