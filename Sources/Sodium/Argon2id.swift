internal import CSodium

/// Argon2id password hashing (`crypto_pwhash` with `ALG_ARGON2ID13`), used
/// to stretch a passcode into key material.
public enum Argon2id {
    /// Salt length in bytes.
    public static let saltByteCount = 16

    /// How much work and memory one derivation costs.
    public struct Cost: Sendable, Equatable, Hashable, CustomStringConvertible {
        /// Passes over memory (`opslimit`).
        public var operations: UInt64
        /// Bytes of memory (`memlimit`).
        public var memoryBytes: UInt64

        /// Makes a cost; `validate()` checks it against libsodium's limits.
        public init(operations: UInt64, memoryBytes: UInt64) {
            self.operations = operations
            self.memoryBytes = memoryBytes
        }

        /// libsodium's "interactive" cost: 2 passes, 64 MiB. protd's default.
        public static let interactive = Cost(operations: 2, memoryBytes: 64 << 20)
        /// libsodium's "moderate" cost: 3 passes, 256 MiB.
        public static let moderate = Cost(operations: 3, memoryBytes: 256 << 20)
        /// The cheapest cost libsodium accepts (1 pass, 8 KiB): real Argon2id,
        /// for tests and development only.
        public static let minimum = Cost(operations: 1, memoryBytes: 8 << 10)

        /// Throws `invalidCost` unless libsodium accepts this cost.
        public func validate() throws {
            let opsRange = UInt64(crypto_pwhash_argon2id_opslimit_min())...UInt64(crypto_pwhash_argon2id_opslimit_max())
            let memRange = UInt64(crypto_pwhash_argon2id_memlimit_min())...UInt64(min(crypto_pwhash_argon2id_memlimit_max(), Int.max))
            guard opsRange.contains(operations) else {
                throw SodiumError(.invalidCost, "Argon2id operations must be in \(opsRange), got \(operations)")
            }
            guard memRange.contains(memoryBytes) else {
                throw SodiumError(.invalidCost, "Argon2id memory must be in \(memRange) bytes, got \(memoryBytes)")
            }
        }

        public var description: String { "Argon2id(ops: \(operations), memory: \(memoryBytes) bytes)" }
    }

    /// Derives `length` bytes from `passcode` and `salt` into guarded memory.
    public static func deriveKey(
        passcode: SecretBytes, salt: [UInt8], cost: Cost, length: Int = 32
    ) throws -> SecretBytes {
        try SodiumRuntime.ensureInitialised()
        try cost.validate()
        guard salt.count == saltByteCount else {
            throw SodiumError(.invalidLength, "an Argon2id salt is \(saltByteCount) bytes")
        }
        // Argon2id reads the passcode and writes its output for the whole,
        // deliberately slow, derivation: both get an allocation of their own
        // so no shared slab of keys stays readable or writable meanwhile.
        let ownPasscode = try SecretBytes(count: passcode.count, placement: .ownAllocation) { copy in
            try passcode.withUnsafeBytes { copy.copyMemory(from: $0) }
        }
        return try SecretBytes(count: length, placement: .ownAllocation) { out in
            let status = try ownPasscode.withUnsafeBytes { password in
                crypto_pwhash(out.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(length),
                              password.baseAddress!.assumingMemoryBound(to: CChar.self), UInt64(password.count),
                              salt, cost.operations, Int(cost.memoryBytes), crypto_pwhash_ALG_ARGON2ID13)
            }
            guard status == 0 else {
                throw SodiumError(.keyDerivationFailed,
                                  "Argon2id could not allocate its \(cost.memoryBytes >> 20) MiB of memory (\(cost))")
            }
        }
    }
}
