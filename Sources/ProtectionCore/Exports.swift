// The shared vocabulary (protection classes, lock states) is part of this
// module's API: whoever imports ProtectionCore gets it too.
@_exported public import ProtectionModel
