# geoconsent: a consent-gated location daemon for Linux.
#
#   make run     install missing Debian packages, build a release, run the whole
#                stack privately (bus, gpsd replaying data/track.nmea, daemon)
#   make test    install missing Debian packages, build, run every test
#   make install PREFIX=/usr DESTDIR=...   (see README "Install")

SHELL := /bin/bash
# The toolchain lives in /opt/swift on our machines; use it when PATH lacks it.
ifneq ($(wildcard /opt/swift/usr/bin/swift),)
export PATH := /opt/swift/usr/bin:$(PATH)
endif
SWIFT ?= swift
RELEASE_FLAGS := -c release --static-swift-stdlib
RELEASE_BIN = $(shell $(SWIFT) build $(RELEASE_FLAGS) --show-bin-path)

.PHONY: all deps build release test run bench clean introspection

all: build

deps:
	@bash scripts/deps.sh

build: deps
	$(SWIFT) build

release: deps
	$(SWIFT) build $(RELEASE_FLAGS)

test: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build
	@# The benchmark once with tiny counts, so it cannot rot (no timing is asserted).
	$(SWIFT) build --product geoconsent-bench
	"$$($(SWIFT) build --show-bin-path)/geoconsent-bench" --quick --json .build/bench-quick.json

# Performance against floors measured in the same run (README "Performance").
bench: release
	@bash scripts/deps.sh --bench
	"$(RELEASE_BIN)/geoconsent-bench" --json bench.json

run: release
	bash scripts/run-stack.sh "$(RELEASE_BIN)"

# Regenerates the committed introspection XML from the interface tables.
introspection: build
	$(SWIFT) run -q geoconsentd --introspect > interfaces/org.geoconsent.GeoConsent1.xml

clean:
	rm -rf .build
