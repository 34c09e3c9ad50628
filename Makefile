# protd: the two quick-start commands are `make run` and `make test`.
SWIFT ?= swift
SWIFT_BUILD_FLAGS ?=
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
# Which libsodium protd links. "source" (the default) builds libsodium
# 1.0.20 once under SODIUM_DIR and links it statically: it has AEGIS-256,
# the default cipher on AES-NI machines, which 1.0.18 lacks, and its
# AES-256-GCM is more than twice as fast as the 1.0.18 Debian 12 ships
# (docs/DESIGN.md, "Which libsodium"). "system" links Debian's shared
# library (new files then get AES-256-GCM). When the source build cannot run (no PyPI, no
# compiler), make says so and the build falls back to Debian's.
SODIUM ?= source
SODIUM_DIR = .build-sodium
ifeq ($(SODIUM),source)
SODIUM_PREFIX := $(CURDIR)/$(shell sh scripts/build-libsodium --prefix $(SODIUM_DIR))
export PKG_CONFIG_PATH := $(SODIUM_PREFIX)/lib/pkgconfig$(if $(PKG_CONFIG_PATH),:$(PKG_CONFIG_PATH))
endif
# Release binaries carry the Swift runtime, Foundation and libstdc++
# (statically linked): they run without the toolchain's libraries, start
# faster and take less memory (docs/DESIGN.md, Memory). libc stays
# shared, and so does libsodium with SODIUM=system.
RELEASE_FLAGS = -c release --static-swift-stdlib $(RELEASE_LAYOUT_FLAGS)
# How the release link lays the executables out, so an idle protd keeps few
# pages of them resident (docs/DESIGN.md, Memory): lld with packed relative
# relocations (DT_RELR, glibc 2.36 and later), no exported symbols, and
# every function in a section of its own, placed in the order
# scripts/protd.order gives (regenerate it with scripts/function-order).
# The C++ runtime is linked statically as well: the toolchain's static link
# asks for -lstdc++, and STATIC_CXX_DIR, searched first, answers with the
# archive, so protd does not map all of libstdc++.so.
STATIC_CXX_DIR = .build/static-libstdc++
RELEASE_LAYOUT_FLAGS = -Xswiftc -use-ld=lld -Xlinker -z -Xlinker pack-relative-relocs \
	-Xlinker --no-export-dynamic -Xswiftc -Xfrontend -Xswiftc -function-sections \
	-Xlinker --symbol-ordering-file=$(CURDIR)/scripts/protd.order -Xlinker --no-warn-symbol-ordering \
	-Xswiftc -Xclang-linker -Xswiftc -L$(CURDIR)/$(STATIC_CXX_DIR)
# The manual plugin builds protctl in release mode without RELEASE_FLAGS, so
# it gets a build directory of its own instead of relinking .build/release.
MANUAL_SCRATCH = .build-manual
MANUAL = $(MANUAL_SCRATCH)/plugins/GenerateManual/outputs/protctl/protctl.1

.PHONY: all build test run deps test-deps bench bench-deps release release-inputs release-order manual install uninstall clean

all: build

## Installs what the build needs when missing (libsodium-dev, pkg-config),
## then, with SODIUM=source, builds libsodium 1.0.20 unless it is built.
deps:
	@if ! PKG_CONFIG_PATH= pkg-config --exists libsodium 2>/dev/null; then \
		echo "installing libsodium-dev and pkg-config"; \
		$(SUDO) apt-get update && $(SUDO) apt-get install -y libsodium-dev pkg-config; \
	fi
ifeq ($(SODIUM),source)
	@sh scripts/install-missing "the libsodium 1.0.20 build" python3=python3 cc=gcc
	@sh scripts/build-libsodium $(SODIUM_DIR) || \
		echo "warning: could not build libsodium 1.0.20 from source; linking the libsodium pkg-config finds instead" \
			"($$(pkg-config --modversion libsodium)), which installed binaries then need at run time;" \
			"before 1.0.19 it has no AEGIS-256, so files written with it (the default) cannot be read" >&2
endif

## Tools some tests use (pamtester, systemd-analyze, qemu-x86_64 to run protd
## on a CPU without AES-NI); those tests skip with a reason when the tools
## are missing and cannot be installed (not root).
test-deps: deps
	@sh scripts/install-missing "the tests that need them" pamtester=pamtester systemd-analyze=systemd \
		qemu-x86_64=qemu-user

build: deps
	$(SWIFT) build $(SWIFT_BUILD_FLAGS)

## Builds and runs every test.
test: test-deps
	$(SWIFT) build --build-tests $(SWIFT_BUILD_FLAGS)
	$(SWIFT) test --skip-build $(SWIFT_BUILD_FLAGS)

## Runs the daemon in the foreground (socket and state under ./.run/).
run: deps
	$(SWIFT) build --product protd $(SWIFT_BUILD_FLAGS)
	exec "$$($(SWIFT) build --show-bin-path $(SWIFT_BUILD_FLAGS))/protd" --config Config/protd.dev.yaml

## Benchmarks in release mode: prints a table, writes docs/BENCHMARKS.md and
## docs/benchmarks.json. Extra flags: make bench ARGS="--size-mib 256 --dir /var/tmp".
ARGS ?=
bench: bench-deps release-inputs
	$(SWIFT) build $(RELEASE_FLAGS)
	"$$($(SWIFT) build $(RELEASE_FLAGS) --show-bin-path)/protd-bench" --markdown docs/BENCHMARKS.md --json docs/benchmarks.json $(ARGS)

## Peers for the comparison, when root: age; gocryptfs and fuse3 where FUSE
## works (/dev/fuse); e2fsprogs for kernel fscrypt on a loop-mounted ext4.
## protd-bench skips, with the reason, any peer that is missing or cannot run.
bench-deps: deps
	@sh scripts/install-missing "those comparisons" age=age mkfs.ext4=e2fsprogs \
		$$([ -e /dev/fuse ] && echo gocryptfs=gocryptfs fusermount3=fuse3)

## SwiftPM does not know that the release link reads scripts/protd.order:
## removes release executables older than it, so they are linked again.
release-order:
	@find $(RELEASE_BIN)/ -maxdepth 1 -type f -perm -u+x ! -newer scripts/protd.order -delete 2>/dev/null || true

## What a release link reads that SwiftPM does not prepare itself.
release-inputs: release-order $(STATIC_CXX_DIR)/libstdc++.so

## The name the release link finds for -lstdc++: the static archive.
$(STATIC_CXX_DIR)/libstdc++.so:
	@archive=$$(clang -print-file-name=libstdc++.a 2>/dev/null); \
	if [ ! -f "$$archive" ]; then \
		echo "clang -print-file-name=libstdc++.a found no archive: the Swift toolchain's clang must be on PATH and libstdc++-12-dev installed" >&2; \
		exit 1; \
	fi; \
	mkdir -p $(STATIC_CXX_DIR) && ln -sfn "$$archive" $@

release: deps release-inputs
	$(SWIFT) build $(RELEASE_FLAGS) --product protd
	$(SWIFT) build $(RELEASE_FLAGS) --product protctl

## protctl(1), generated by swift-argument-parser's plugin.
manual: deps
	$(SWIFT) package --scratch-path $(MANUAL_SCRATCH) generate-manual

## Installs binaries, units, sysusers entry, /etc/protd/protd.yaml (kept if
## present), the man page, shell completions and docs.
install: release manual
	install -Dm755 $(RELEASE_BIN)/protd $(DESTDIR)$(BINDIR)/protd
	install -Dm755 $(RELEASE_BIN)/protctl $(DESTDIR)$(BINDIR)/protctl
	install -d $(DESTDIR)$(UNITDIR)
	sed 's|/usr/bin/protd|$(BINDIR)/protd|; s|/etc/protd/|$(SYSCONFDIR)/protd/|' systemd/protd.service > $(DESTDIR)$(UNITDIR)/protd.service
	install -m644 systemd/protd.socket $(DESTDIR)$(UNITDIR)/protd.socket
	install -Dm644 systemd/protd.sysusers $(DESTDIR)$(SYSUSERSDIR)/protd.conf
	@if [ -e $(DESTDIR)$(SYSCONFDIR)/protd/protd.yaml ]; then \
		echo "keeping existing $(DESTDIR)$(SYSCONFDIR)/protd/protd.yaml"; \
	else \
		install -Dm644 Config/protd.yaml $(DESTDIR)$(SYSCONFDIR)/protd/protd.yaml; \
	fi
	install -Dm644 $(MANUAL) $(DESTDIR)$(MANDIR)/man1/protctl.1
	install -d $(DESTDIR)$(PREFIX)/share/bash-completion/completions $(DESTDIR)$(PREFIX)/share/zsh/site-functions $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d
	$(RELEASE_BIN)/protctl --generate-completion-script bash > $(DESTDIR)$(PREFIX)/share/bash-completion/completions/protctl
	$(RELEASE_BIN)/protctl --generate-completion-script zsh > $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_protctl
	$(RELEASE_BIN)/protctl --generate-completion-script fish > $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/protctl.fish
	install -d $(DESTDIR)$(DOCDIR)
	install -m644 README.md docs/*.md $(DESTDIR)$(DOCDIR)/

## Removes what install put in place, except the configuration and state.
uninstall:
	rm -f $(DESTDIR)$(BINDIR)/protd $(DESTDIR)$(BINDIR)/protctl
	rm -f $(DESTDIR)$(UNITDIR)/protd.service $(DESTDIR)$(UNITDIR)/protd.socket $(DESTDIR)$(SYSUSERSDIR)/protd.conf
	rm -f $(DESTDIR)$(MANDIR)/man1/protctl.1
	rm -f $(DESTDIR)$(PREFIX)/share/bash-completion/completions/protctl $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_protctl $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/protctl.fish
	rm -rf $(DESTDIR)$(DOCDIR)
	@echo "kept $(SYSCONFDIR)/protd/protd.yaml and /var/lib/protd (remove by hand to forget every key)"

clean:
	rm -rf .build $(MANUAL_SCRATCH) $(SODIUM_DIR) .run
