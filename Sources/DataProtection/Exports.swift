// Applications write `import DataProtection` and nothing else: the two
// model types that appear in this library's API are re-exported one by one
// (not the whole of ProtectionModel), so
// their cases such as `.complete` and `.unlocked` are usable directly.
@_exported public import enum ProtectionModel.ProtectionClass
@_exported public import enum ProtectionModel.LockState
@_exported public import enum ProtectionModel.LockReason
@_exported public import struct ProtectionModel.StoreCheckReport

/// Apple's name for `ProtectionClass`: `.complete`, `.completeUnlessOpen`,
/// `.completeUntilFirstUserAuthentication` (the default) and `.none`.
public typealias FileProtection = ProtectionClass
