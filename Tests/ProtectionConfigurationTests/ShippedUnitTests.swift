import Testing

/// What the systemd units in systemd/ promise the README (Operations).
/// `systemd-analyze verify` and the exposure score are checked end to end
/// (OperationsEndToEndTests); these are the lines those tools cannot judge.
@Suite("The systemd units in systemd/")
struct ShippedUnitTests {
    /// The unit's `Key=value` lines, comments left out.
    private func settings(_ unit: String) throws -> [String] {
        try repositoryFile("systemd/\(unit)").split(separator: "\n").map(String.init).filter { !$0.hasPrefix("#") }
    }

    @Test("the socket is root:protd, mode 0660, as the README says, and the service does not re-own it")
    func socketOwner() throws {
        let socket = try settings("protd.socket")
        #expect(socket.contains("SocketUser=root") && socket.contains("SocketGroup=protd"))
        #expect(socket.contains("SocketMode=0660"))
        #expect(try repositoryFile("README.md").contains("The socket is `root:protd`, mode 0660"))
        // RuntimeDirectory=protd chowns /run/protd and everything in it, the
        // socket too, to the service's user.
        #expect(try !settings("protd.service").contains { $0.hasPrefix("RuntimeDirectory=") })
    }

    @Test("setpriority is allowed after the @resources deny list, so libdispatch's workers log nothing")
    func setpriorityAllowed() throws {
        let filters = try settings("protd.service").filter { $0.hasPrefix("SystemCallFilter=") }
        let deny = try #require(filters.firstIndex { $0.hasPrefix("SystemCallFilter=~") && $0.contains("@resources") })
        #expect(filters[(deny + 1)...].contains { !$0.hasPrefix("SystemCallFilter=~") && $0.contains("setpriority") })
    }

    @Test("the lock-before-sleep unit locks with a short grace and reason suspend before sleep.target, never failing the sleep, and make installs it")
    func lockBeforeSleep() throws {
        let unit = try settings("protd-lock-before-sleep.service")
        #expect(unit.contains("Before=sleep.target") && unit.contains("WantedBy=sleep.target"))
        #expect(unit.contains("Type=oneshot"))
        #expect(unit.contains("ExecStart=-/usr/bin/protctl lock --grace 2 --reason suspend"))
        #expect(try repositoryFile("Makefile").contains("protd-lock-before-sleep.service > \"$(DESTDIR)$(UNITDIR)/"))
        #expect(try repositoryFile("README.md").contains("systemctl enable protd-lock-before-sleep.service"))
    }

    @Test("a configuration error (78) or a credential that does not decrypt (243) is not restarted into start-limit-hit")
    func unfixableExitsNotRestarted() throws {
        #expect(try settings("protd.service").contains("RestartPreventExitStatus=78 243"))
    }
}
