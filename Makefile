# protd: the two quick-start commands are `make run` and `make test`.
SWIFT ?= swift
SWIFT_BUILD_FLAGS ?=
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all build test run deps clean

all: build

## Installs what the build needs when missing (libsodium-dev, pkg-config).
deps:
	@if ! pkg-config --exists libsodium 2>/dev/null; then \
		echo "installing libsodium-dev and pkg-config"; \
		$(SUDO) apt-get update && $(SUDO) apt-get install -y libsodium-dev pkg-config; \
	fi

build: deps
	$(SWIFT) build $(SWIFT_BUILD_FLAGS)

## Builds and runs every test.
test: deps
	$(SWIFT) build --build-tests $(SWIFT_BUILD_FLAGS)
	$(SWIFT) test --skip-build $(SWIFT_BUILD_FLAGS)

## Runs the daemon in the foreground (socket and state under ./.run/).
run: deps
	@if [ -d Sources/protd ]; then \
		$(SWIFT) build --product protd $(SWIFT_BUILD_FLAGS) && \
		exec "$$($(SWIFT) build --show-bin-path $(SWIFT_BUILD_FLAGS))/protd" --config Config/protd.dev.yaml; \
	else \
		echo "protd: the daemon is not built yet (see the daemon issue); the libraries and tests are: make test"; \
		exit 1; \
	fi

clean:
	rm -rf .build .run
