# protd: the two quick-start commands are `make run` and `make test`.
SWIFT ?= swift
SWIFT_BUILD_FLAGS ?=
# Empty as root; otherwise deps installs through sudo, and says what to run
# as root when there is no sudo.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# Installation layout (override on the command line: make install PREFIX=/usr/local DESTDIR=/tmp/pkg).
PREFIX ?= /usr/local
DESTDIR ?=
SYSCONFDIR ?= /etc
BINDIR ?= $(PREFIX)/bin
UNITDIR ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d
MANDIR ?= $(PREFIX)/share/man
DOCDIR ?= $(PREFIX)/share/doc/protd
RELEASE_BIN = .build/release
# protd links the libsodium pkg-config finds (Debian's libsodium-dev), in
# every build: swift build, make and a dependent package alike. Release
# binaries carry the Swift runtime and Foundation (statically linked), so
# the target machine needs no Swift toolchain; libc and libsodium stay
# shared and get Debian's security updates.
RELEASE_FLAGS = -c release --static-swift-stdlib $(RELEASE_LINK_FLAGS)
# The toolchain's lld with packed relative relocations (DT_RELR, glibc 2.36
# and later) and no exported symbols: fewer pages of the executable written
# at load, so an idle protd is about 3 MiB smaller (20.6 against 24.0 MiB).
RELEASE_LINK_FLAGS = -Xswiftc -use-ld=lld -Xlinker -z -Xlinker pack-relative-relocs -Xlinker --no-export-dynamic

.PHONY: all build test run deps test-deps bench bench-check bench-deps torture fuzz fuzz-build fuzz-seeds release install uninstall clean

all: build

## Installs what the build needs when missing: libsodium-dev and pkg-config.
## Not the Swift toolchain (6.1 or later): fails at once when swift is not on PATH.
DEPS_PACKAGES = libsodium-dev pkg-config
APT_INSTALL = DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends
deps:
	@command -v $(firstword $(SWIFT)) >/dev/null 2>&1 || { \
		echo "$(firstword $(SWIFT)) is not on PATH: install a Swift 6.1 or later toolchain and add its bin directory to PATH" >&2; \
		exit 1; }
	@if ! pkg-config --exists libsodium 2>/dev/null; then \
		if [ -n "$(SUDO)" ] && ! command -v sudo >/dev/null 2>&1; then \
			echo "pkg-config finds no libsodium, and there is no sudo to install $(DEPS_PACKAGES) with; as root, run:" >&2; \
			echo "  apt-get update && $(APT_INSTALL) $(DEPS_PACKAGES)" >&2; \
			exit 1; \
		fi; \
		echo "installing $(DEPS_PACKAGES)"; \
		$(SUDO) apt-get update && $(SUDO) $(APT_INSTALL) $(DEPS_PACKAGES); \
	fi

## Tools some tests use (pamtester, systemd-analyze, qemu-x86_64 to run protd
## on a CPU without AES-NI); those tests skip with a reason when the tools
## are missing and cannot be installed (not root).
test-deps: deps
	@sh scripts/install-missing "the tests that need them" pamtester=pamtester systemd-analyze=systemd \
		qemu-x86_64=qemu-user

build: deps
	$(SWIFT) build $(SWIFT_BUILD_FLAGS)

## Builds and runs every test, then each fuzz target for FUZZ_CHECK_SECONDS.
test: test-deps
	$(SWIFT) build --build-tests $(SWIFT_BUILD_FLAGS)
	$(SWIFT) test --skip-build $(SWIFT_BUILD_FLAGS)
	$(SWIFT) build $(FUZZ_FLAGS)
	scripts/run-fuzzers "$$($(SWIFT) build $(FUZZ_FLAGS) --show-bin-path)" -max_total_time=$(FUZZ_CHECK_SECONDS)

## Runs the daemon in the foreground (socket and state under ./.run/).
run: deps
	$(SWIFT) build --product protd $(SWIFT_BUILD_FLAGS)
	exec "$$($(SWIFT) build --show-bin-path $(SWIFT_BUILD_FLAGS))/protd" --config Config/protd.dev.yaml

## Benchmarks in release mode, from their own package (Benchmarks/, which
## builds protd with the same flags): prints a table and writes
## docs/BENCHMARKS.md. Extra flags: make bench ARGS="--size-mib 256 --dir /var/tmp".
ARGS ?=
BENCH_FLAGS = --package-path Benchmarks $(RELEASE_FLAGS)
bench: bench-deps
	$(SWIFT) build $(BENCH_FLAGS)
	"$$($(SWIFT) build $(BENCH_FLAGS) --show-bin-path)/protd-bench" --markdown docs/BENCHMARKS.md $(ARGS)

## Builds the benchmarks (debug) and runs every workload at tiny sizes:
## checks that they still build and run, not how fast anything is.
bench-check: deps
	$(SWIFT) build --package-path Benchmarks
	"$$($(SWIFT) build --package-path Benchmarks --show-bin-path)/protd-bench" --quick

## Peers for the comparison, when root: age; gocryptfs and fuse3 where FUSE
## works (/dev/fuse); e2fsprogs for kernel fscrypt on a loop-mounted ext4.
## protd-bench skips, with the reason, any peer that is missing or cannot run.
bench-deps: deps
	@sh scripts/install-missing "those comparisons" age=age mkfs.ext4=e2fsprogs \
		$$([ -e /dev/fuse ] && echo gocryptfs=gocryptfs fusermount3=fuse3)

## kill -9 rounds under concurrent load, from their own package (Torture/,
## release like the benchmarks): each round clients create, write whole,
## write through handles and sync, change classes, delete, lock and unlock,
## protd gets SIGKILL, restarts, and the invariants are checked. Prints the
## counts and writes docs/TORTURE.md; fails when an invariant did not hold.
## Extra flags: make torture ROUNDS=200 TORTURE_ARGS="--workers 8 --seed 42".
ROUNDS ?= 50
TORTURE_ARGS ?=
TORTURE_FLAGS = --package-path Torture $(RELEASE_FLAGS)
torture: deps
	$(SWIFT) build $(TORTURE_FLAGS)
	"$$($(SWIFT) build $(TORTURE_FLAGS) --show-bin-path)/protd-torture" --rounds $(ROUNDS) --markdown docs/TORTURE.md $(TORTURE_ARGS)

## libFuzzer targets, from their own package (Fuzz/, whose executables have
## no main and link only with libFuzzer's): the frame decoder with request
## and response parsing, and the stored file format read with fixed keys.
## Each runs for FUZZ_SECONDS from its seeds (Fuzz/corpus/) and what earlier
## runs found (.build-fuzz/corpus/); a crash, trap or oversize allocation
## fails the run and leaves its input in .build-fuzz/artifacts/.
## Other libFuzzer options go after -max_total_time=FUZZ_SECONDS, which
## stays (a later -max_total_time wins): make fuzz FUZZ_ARGS=-runs=10000000
## stops at whichever limit comes first.
## SwiftPM hands swiftc --sanitize=fuzzer and --sanitize=address as two
## -sanitize flags, of which swiftc keeps only the last (so no coverage):
## the -Xswiftc flag names both. --sanitize=fuzzer still matters: it makes
## SwiftPM link the targets without a main of their own. -O: unoptimised
## NIO under both sanitizers runs about seven times slower; the debug
## configuration keeps @testable import and the DEBUG-only checks.
FUZZ_SECONDS ?= 600
FUZZ_CHECK_SECONDS ?= 20
FUZZ_ARGS ?=
FUZZ_FLAGS = --package-path Fuzz --build-path .build-fuzz --sanitize=fuzzer --sanitize=address \
	-Xswiftc -sanitize=fuzzer,address -Xswiftc -O -Xswiftc -use-ld=lld
fuzz-build: deps
	$(SWIFT) build $(FUZZ_FLAGS)

fuzz: fuzz-build
	scripts/run-fuzzers "$$($(SWIFT) build $(FUZZ_FLAGS) --show-bin-path)" -max_total_time=$(FUZZ_SECONDS) $(FUZZ_ARGS)

## Writes the seed corpora again (after a change to the wire or the format:
## FuzzFormat refuses to start from a committed seed that no longer reads).
fuzz-seeds: fuzz-build
	bin="$$($(SWIFT) build $(FUZZ_FLAGS) --show-bin-path)" && \
		PROTD_FUZZ_WRITE_SEEDS=Fuzz/corpus/frames "$$bin/FuzzFrames" && \
		PROTD_FUZZ_WRITE_SEEDS=Fuzz/corpus/format "$$bin/FuzzFormat"

release: deps
	$(SWIFT) build $(RELEASE_FLAGS) --product protd
	$(SWIFT) build $(RELEASE_FLAGS) --product protctl

## Installs the binaries (stripped), units, sysusers entry, /etc/protd/protd.yaml (kept if
## present), the man pages protd(8) and protctl(1), shell completions and docs.
## Build as yourself first, then install as root: `make release`, then
## `sudo make install`. Under sudo (SUDO_USER set) install builds nothing,
## so no file in the checkout becomes root's (and root's PATH needs no
## swift); it installs the release binaries already built. Run otherwise (as
## root without sudo, or as a user into a DESTDIR) it runs `make release` first.
install: $(if $(SUDO_USER),,release)
	@test -x "$(RELEASE_BIN)/protd" && test -x "$(RELEASE_BIN)/protctl" || { \
		echo "$(RELEASE_BIN)/protd or protctl is missing: run make release as $(or $(SUDO_USER),yourself) first, then sudo make install" >&2; \
		exit 1; }
	@if [ -n "$$(find Sources Package.swift -newer "$(RELEASE_BIN)/protd" -print -quit)" ]; then \
		echo "the sources changed after $(RELEASE_BIN)/protd was built: run make release as $(or $(SUDO_USER),yourself) again first" >&2; \
		exit 1; fi
	install -s -Dm755 "$(RELEASE_BIN)/protd" "$(DESTDIR)$(BINDIR)/protd"
	install -s -Dm755 "$(RELEASE_BIN)/protctl" "$(DESTDIR)$(BINDIR)/protctl"
	install -d "$(DESTDIR)$(UNITDIR)"
	sed 's|/usr/bin/protd|$(BINDIR)/protd|; s|/etc/protd/|$(SYSCONFDIR)/protd/|' systemd/protd.service > "$(DESTDIR)$(UNITDIR)/protd.service"
	install -m644 systemd/protd.socket "$(DESTDIR)$(UNITDIR)/protd.socket"
	sed 's|/usr/bin/protctl|$(BINDIR)/protctl|' systemd/protd-lock-before-sleep.service > "$(DESTDIR)$(UNITDIR)/protd-lock-before-sleep.service"
	install -Dm644 systemd/protd.sysusers "$(DESTDIR)$(SYSUSERSDIR)/protd.conf"
	@if [ -e "$(DESTDIR)$(SYSCONFDIR)/protd/protd.yaml" ]; then \
		echo "keeping existing $(DESTDIR)$(SYSCONFDIR)/protd/protd.yaml"; \
	else \
		install -Dm644 Config/protd.yaml "$(DESTDIR)$(SYSCONFDIR)/protd/protd.yaml"; \
	fi
	install -Dm644 docs/man/protctl.1 "$(DESTDIR)$(MANDIR)/man1/protctl.1"
	install -Dm644 docs/man/protd.8 "$(DESTDIR)$(MANDIR)/man8/protd.8"
	install -d "$(DESTDIR)$(PREFIX)/share/bash-completion/completions" "$(DESTDIR)$(PREFIX)/share/zsh/site-functions" "$(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d"
	"$(RELEASE_BIN)/protctl" --generate-completion-script bash > "$(DESTDIR)$(PREFIX)/share/bash-completion/completions/protctl"
	"$(RELEASE_BIN)/protctl" --generate-completion-script zsh > "$(DESTDIR)$(PREFIX)/share/zsh/site-functions/_protctl"
	"$(RELEASE_BIN)/protctl" --generate-completion-script fish > "$(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/protctl.fish"
	install -d "$(DESTDIR)$(DOCDIR)"
	install -m644 README.md docs/*.md "$(DESTDIR)$(DOCDIR)/"

## Removes what install put in place, except the configuration and state.
uninstall:
	rm -f "$(DESTDIR)$(BINDIR)/protd" "$(DESTDIR)$(BINDIR)/protctl"
	rm -f "$(DESTDIR)$(UNITDIR)/protd.service" "$(DESTDIR)$(UNITDIR)/protd.socket" "$(DESTDIR)$(UNITDIR)/protd-lock-before-sleep.service"
	rm -f "$(DESTDIR)$(SYSUSERSDIR)/protd.conf"
	rm -f "$(DESTDIR)$(MANDIR)/man1/protctl.1" "$(DESTDIR)$(MANDIR)/man8/protd.8"
	rm -f "$(DESTDIR)$(PREFIX)/share/bash-completion/completions/protctl" "$(DESTDIR)$(PREFIX)/share/zsh/site-functions/_protctl" "$(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/protctl.fish"
	rm -rf "$(DESTDIR)$(DOCDIR)"
	@echo "kept $(SYSCONFDIR)/protd/protd.yaml and /var/lib/protd (remove by hand to forget every key)"

clean:
	rm -rf .build Benchmarks/.build Torture/.build .build-fuzz .build-one-build-check .run
