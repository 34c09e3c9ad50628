public import ProtectionModel
internal import ProtectionWire

/// How `ProtectedFile.open` treats an existing or missing file.
public enum OpenMode: Sendable, Equatable, Hashable {
    /// The file must exist (else `.notFound`); it keeps its class.
    case existing
    /// The file must not exist (else `.alreadyExists`); it is created empty in this class.
    case create(ProtectionClass)
    /// Open the file if it exists (keeping its class), else create it empty in this class.
    case openOrCreate(ProtectionClass)
}

extension OpenMode {
    /// The mode and class fields of the `open` request.
    var wire: (mode: WireOpenMode, protection: ProtectionClass) {
        switch self {
        case .existing: (.existing, .default)
        case .create(let protection): (.createNew, protection)
        case .openOrCreate(let protection): (.openOrCreate, protection)
        }
    }
}
