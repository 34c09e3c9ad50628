/// Checks on strings before they go into a frame, whose string fields hold
/// at most `UInt16.max` UTF-8 bytes.
enum WireText {
    /// The longest string field on the wire, in UTF-8 bytes.
    static let maximumByteCount = Int(UInt16.max)
    /// The longest client label sent in the hello, in UTF-8 bytes.
    static let maximumLabelByteCount = 255

    /// `name` if it fits a string field; else `invalidName`.
    static func name(_ name: String) throws(DataProtectionError) -> String {
        guard name.utf8.count <= maximumByteCount else {
            throw .invalidName("the name is \(name.utf8.count) bytes long; at most \(maximumByteCount) fit")
        }
        return name
    }

    /// `label` cut to at most `maximumLabelByteCount` bytes at a character boundary.
    static func clientLabel(_ label: String) -> String {
        guard label.utf8.count > maximumLabelByteCount else { return label }
        var result = ""
        for character in label {
            guard result.utf8.count + character.utf8.count <= maximumLabelByteCount else { break }
            result.append(character)
        }
        return result
    }
}
