# geoconsent: a consent-gated location daemon for Linux.
#
#   make run     install missing Debian packages, build a release, run the whole
#                stack privately (bus, gpsd replaying data/track.nmea, daemon);
#                GEOCONSENT_GEOCLUE=1 make run: GeoClue2 served too, and a where-am-i
#                command printed that uses the private bus
#   make test    install missing Debian packages, build, run every test
#   make check   build, and run the tests that start no process (fast feedback)
#   make build   build only (no packages installed: `make deps` does that)
#   make install PREFIX=/usr DESTDIR=...   (see README "Install"; GEOCLUE=1: the GeoClue2 facade too;
#                LOCKDOWN=1: the gpsd lockdown too, gpsd for geoconsentd alone)
#   make deb     the Debian package in .build/deb, checked by lintian

SHELL := /bin/bash
# The toolchain lives in /opt/swift on our machines; use it when PATH lacks it.
ifneq ($(wildcard /opt/swift/usr/bin/swift),)
export PATH := /opt/swift/usr/bin:$(PATH)
endif
SWIFT ?= swift
# Release: the Swift runtime linked in (no Foundation), and linked by ld.lld (in the
# toolchain) so that relative relocations are packed (-z pack-relative-relocs: 2.8 KB
# instead of 393 KB read at every start) and the functions the daemon runs are laid
# out together (link/hot-functions.order, from scripts/gen-link-order.sh). Both cut
# the idle RSS (docs/performance.md); a stale order file only costs memory.
# The C++ runtime the Swift runtime needs is linked in as well: STATIC_CXX_DIR holds
# only libstdc++.a and is searched before the compiler's own directory, so the
# runtime's "-lstdc++" finds the archive (libstdc++.so alone costs ~1 MB of RSS).
STATIC_CXX_DIR := $(CURDIR)/.build/static-libstdc++
RELEASE_FLAGS := -c release --static-swift-stdlib -Xswiftc -use-ld=lld -Xswiftc -L$(STATIC_CXX_DIR) \
	-Xlinker -z -Xlinker pack-relative-relocs \
	-Xlinker --symbol-ordering-file=$(CURDIR)/link/hot-functions.order -Xlinker --no-warn-symbol-ordering
RELEASE_BIN = $(shell $(SWIFT) build $(RELEASE_FLAGS) --show-bin-path)
# SKIP_DEPS=1: do not run scripts/deps.sh before `release` (a package build gets
# its dependencies from debian/control's Build-Depends, never by installing them).
DEPS_STEP := $(if $(SKIP_DEPS),,deps)

.PHONY: all deps build check release test run bench screenshots clean introspection deb

all: build

deps:
	@bash scripts/deps.sh

build:
	$(SWIFT) build

# The tests that start no process (no bus, no gpsd, no daemon): the pure cores,
# wire shapes, identity from a fake /proc, the budgets' arithmetic, the loop's
# timers, fix mapping. Under a minute on a warm build; `make test` runs them too.
CHECK_TESTS := ^(GeoCoreTests|GeoGeolocateTests|GeoSystemTests|GeoConsentAPITests|GeoConsentDaemonTests)\.|^GeoDBusTests\.(EventLoopTimerTests|EventLoopIdleTests|ManualClockTests|WireEncoderTests)|^GeoGPSTests\.FixMappingTests
check:
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build --disable-swift-testing --parallel --filter '$(CHECK_TESTS)'
	$(DESKTOP_UNIT_TESTS)

# The desktop programs' unit tests (desktop/tests: the shared module, the text
# rules), with Debian's interpreter, as the programs run.
DESKTOP_UNIT_TESTS := /usr/bin/python3 -B -m unittest discover -s desktop/tests -t desktop

release: $(DEPS_STEP)
	@archive="$$(clang -print-file-name=libstdc++.a)"; [[ $$archive == /* ]] || \
		{ echo "make release: libstdc++.a not found (apt-get install libstdc++-12-dev)" >&2; exit 1; }; \
		mkdir -p "$(STATIC_CXX_DIR)" && ln -sfn "$$archive" "$(STATIC_CXX_DIR)/libstdc++.a"
	@# SwiftPM does not see the order file as an input: relink the daemon when it changed.
	@if [[ link/hot-functions.order -nt "$(RELEASE_BIN)/geoconsentd" ]]; then rm -f "$(RELEASE_BIN)/geoconsentd"; fi
	$(SWIFT) build $(RELEASE_FLAGS)

# Workers for the XCTest part: each test starts its own bus, gpsd and daemon and
# mostly waits on them (about 65 s of CPU in 410 s of tests), so eight at once on
# two cores take the part to its longest tests' length: 61 s, against 74 s with
# six and 104 s with four (docs/development.md "Tests"; TEST_WORKERS=1: one at a time).
TEST_WORKERS ?= 8
test: deps
	@# Every part's packages first: parts run side by side below, and two apt-get
	@# at once would fight over dpkg's lock on a fresh machine.
	@bash scripts/deps.sh --package --container --desktop --bench
	@bash scripts/timed.sh "build (tests)" $(SWIFT) build --build-tests
	@# The translations (po/): msgfmt --check, complete, and covering every marked string;
	@# compiled to .build/locale, where the tests' geoconsentctl and the desktop programs read them.
	@bash scripts/timed.sh "translations" bash scripts/po-check.sh
	@bash scripts/timed.sh "desktop unit tests" $(DESKTOP_UNIT_TESTS)
	@# The agent's focus check (CheckFocus) under Xvfb and openbox: XTEST clicks, XRes PIDs (a few seconds).
	@bash scripts/timed.sh "desktop focus check" bash desktop/tests/test-focus.sh
	@bash scripts/timed.sh "XCTest ($(TEST_WORKERS) at once)" $(SWIFT) test --skip-build --disable-swift-testing \
		--parallel --num-workers $(TEST_WORKERS) --xunit-output .build/xctest.xml; \
		status=$$?; bash scripts/xunit-summary.sh .build/xctest.xml && exit $$status
	@# The Debian package (`make deb`: dpkg-buildpackage, lintian), then geoconsent under a real
	@# systemd: `make install` and the .deb, each in a throwaway container (tests/systemd/test-units.sh).
	@bash scripts/timed.sh "Debian package + lintian" $(CLEAN_MAKE_ENV) bash scripts/build-deb.sh $(DEB_DIR)
	@# The container test (and its desktop end to end with Firefox) mostly waits on boots,
	@# prompts and fixes: it runs beside the two parts below, its output kept and shown after them.
	@bash scripts/timed.sh "systemd container" bash tests/systemd/test-units.sh --bin "$(RELEASE_BIN)" \
		--deb $(DEB_DIR) >.build/systemd-test.log 2>&1 & container=$$!; status=0; \
	echo "make test: the systemd container test runs beside the next two parts (.build/systemd-test.log)"; \
	: 'The benchmark once with tiny counts, so it cannot rot (no timing is asserted).'; \
	bash scripts/timed.sh "bench --quick" bash -c '$(SWIFT) build --product geoconsent-bench && \
		"$$($(SWIFT) build --show-bin-path)/geoconsent-bench" --quick --json .build/bench-quick.json' || status=1; \
	: 'The desktop end to end: Xvfb, the GTK agent and the button app, clicked with xdotool (README "Desktop");'; \
	: 'screenshots go under .build so a test run leaves the tree clean; make screenshots updates docs/.'; \
	bash scripts/timed.sh "desktop" env DESKTOP_SCREENSHOTS=.build/desktop-screenshots \
		bash desktop/test-desktop.sh "$$($(SWIFT) build --show-bin-path)" || status=1; \
	wait $$container || status=1; cat .build/systemd-test.log; exit $$status
	@# Last, the XCTest part's count again: the line a reader of the run's end looks for.
	@bash scripts/xunit-summary.sh .build/xctest.xml

# Re-takes the README's screenshots (docs/screenshots) with the desktop test.
screenshots: build
	DESKTOP_SCREENSHOTS=docs/screenshots bash desktop/test-desktop.sh "$$($(SWIFT) build --show-bin-path)"

# The hostile-world suite at full counts (docs/reliability.md): fuzzed D-Bus input,
# gpsd and agent faults, client churn, kill -9 during consent writes, fairness,
# and hostile local users of another uid (LocalUser*: needs root, else skipped).
# `make test` runs the same tests with small counts.
.PHONY: stress
stress: deps
	$(SWIFT) build --build-tests
	GEOCONSENT_STRESS=1 $(SWIFT) test --skip-build --disable-swift-testing --filter 'Hostile|LocalUser'

# Performance against floors measured in the same run (docs/performance.md).
bench: release
	@bash scripts/deps.sh --bench
	"$(RELEASE_BIN)/geoconsent-bench" --json bench.json

run: release
	bash scripts/run-stack.sh "$(RELEASE_BIN)"

# The Debian package (README "Install"): `dpkg-buildpackage -us -uc -b` on debian/,
# then lintian. The .deb (and .ddeb, .buildinfo, .changes) land in DEB_DIR.
DEB_DIR := .build/deb
# dpkg-buildpackage runs make again (debian/rules): it must not inherit this make's
# flags and command-line variables.
CLEAN_MAKE_ENV := env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS
deb: deps
	$(CLEAN_MAKE_ENV) bash scripts/build-deb.sh $(DEB_DIR)

# Regenerates the committed introspection XML from the interface tables (ours, GeoClue2's).
introspection: build
	$(SWIFT) run -q geoconsentd --introspect > interfaces/org.geoconsent.GeoConsent1.xml
	$(SWIFT) run -q geoconsentd --geoclue --introspect > interfaces/org.freedesktop.GeoClue2.xml

clean:
	rm -rf .build

# ---------------------------------------------------------------------------
# make install / uninstall (README "Install").
#
#   make install PREFIX=/usr DESTDIR=/tmp/stage     a package's staging tree
#   sudo make install                               /usr/local, straight onto this machine
#   make install BINDIR_SRC=.build/debug ...        install binaries built elsewhere
#                                                    (no build, no deps: tests use this)
#
# Without BINDIR_SRC, install depends on `release` and installs its binaries.
# Paths: binaries and man pages under PREFIX; the systemd units and sysusers.d
# entry under PREFIX/lib (systemd searches /usr/local/lib too);
# the bus activation file and introspection XML under PREFIX/share/dbus-1; the
# bus policy under PREFIX/share/dbus-1/system.d only when PREFIX is /usr (the
# system bus reads that and /etc/dbus-1/system.d, never /usr/local), else
# under SYSCONFDIR/dbus-1/system.d; the default config in
# SYSCONFDIR/geoconsent, never overwriting an existing one.
#
# GEOCLUE=1 also installs the GeoClue2 facade's files (install-geoclue;
# docs/geoclue.md, "Switching over"): the bus policy and activation file for
# org.freedesktop.GeoClue2 beside ours, and the unit drop-in
# geoconsentd.service.d/geoclue.conf (--geoclue). The activation file has
# GeoClue's own path: GeoClue must be gone or masked.
#
# LOCKDOWN=1 also installs the gpsd lockdown (install-lockdown;
# docs/gpsd-lockdown.md): the drop-ins gpsd.service.d/geoconsent.conf and
# gpsd.socket.d/geoconsent.conf, which put gpsd in a private network and IPC
# namespace, and geoconsentd.service.d/gpsd-lockdown.conf, which makes the
# daemon join it. It cuts gpsd off from every other program (cgps, gpsmon,
# chrony/ntpd's SHM refclock, network sources): the administrator's choice,
# never the default.
PREFIX ?= /usr/local
GEOCLUE ?=
LOCKDOWN ?=
SYSCONFDIR ?= /etc
BINDIR ?= $(PREFIX)/bin
LIBEXECDIR ?= $(PREFIX)/libexec
MANDIR ?= $(PREFIX)/share/man
UNITDIR ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d
DBUSDATADIR ?= $(PREFIX)/share/dbus-1
# polkit reads actions from /usr/share/polkit-1/actions alone, whatever PREFIX.
POLKITDIR ?= $(if $(filter /usr/local,$(PREFIX)),/usr/share,$(PREFIX)/share)/polkit-1/actions
ifeq ($(PREFIX),/usr)
DBUSPOLICYDIR ?= $(DBUSDATADIR)/system.d
else
DBUSPOLICYDIR ?= $(SYSCONFDIR)/dbus-1/system.d
endif
INSTALL ?= install
BINDIR_SRC ?=
ifeq ($(strip $(BINDIR_SRC)),)
INSTALL_NEEDS := release
INSTALL_FROM = $(RELEASE_BIN)
else
INSTALL_NEEDS :=
INSTALL_FROM = $(BINDIR_SRC)
endif

.PHONY: install install-geoclue install-lockdown install-agent uninstall uninstall-lockdown

install: $(INSTALL_NEEDS) $(if $(filter 1,$(GEOCLUE)),install-geoclue) $(if $(filter 1,$(LOCKDOWN)),install-lockdown)
	@test -x "$(INSTALL_FROM)/geoconsentd" -a -x "$(INSTALL_FROM)/geoconsentctl" -a -x "$(INSTALL_FROM)/geoconsent-wifi-helper" || \
	  { echo "install: no geoconsentd/geoconsentctl/geoconsent-wifi-helper in '$(INSTALL_FROM)'" >&2; exit 1; }
	$(INSTALL) -d "$(DESTDIR)$(BINDIR)" "$(DESTDIR)$(UNITDIR)" \
	  "$(DESTDIR)$(SYSUSERSDIR)" "$(DESTDIR)$(DBUSPOLICYDIR)" \
	  "$(DESTDIR)$(DBUSDATADIR)/system-services" "$(DESTDIR)$(DBUSDATADIR)/interfaces" \
	  "$(DESTDIR)$(SYSCONFDIR)/geoconsent/conf.d" \
	  "$(DESTDIR)$(MANDIR)/man1" "$(DESTDIR)$(MANDIR)/man5" "$(DESTDIR)$(MANDIR)/man8"
	$(INSTALL) -m 0755 "$(INSTALL_FROM)/geoconsentd" "$(INSTALL_FROM)/geoconsentctl" "$(DESTDIR)$(BINDIR)/"
	$(INSTALL) -d "$(DESTDIR)$(LIBEXECDIR)/geoconsent"
	$(INSTALL) -m 0755 "$(INSTALL_FROM)/geoconsent-wifi-helper" "$(DESTDIR)$(LIBEXECDIR)/geoconsent/"
	sed 's|^ExecStart=/usr/libexec/geoconsent/geoconsent-wifi-helper|ExecStart=$(LIBEXECDIR)/geoconsent/geoconsent-wifi-helper|' \
	  systemd/geoconsent-wifi@.service > "$(DESTDIR)$(UNITDIR)/geoconsent-wifi@.service.tmp"
	$(INSTALL) -m 0644 "$(DESTDIR)$(UNITDIR)/geoconsent-wifi@.service.tmp" "$(DESTDIR)$(UNITDIR)/geoconsent-wifi@.service"
	rm -f "$(DESTDIR)$(UNITDIR)/geoconsent-wifi@.service.tmp"
	$(INSTALL) -m 0644 systemd/geoconsent-wifi.socket "$(DESTDIR)$(UNITDIR)/"
	sed 's|^ExecStart=/usr/bin/geoconsentd|ExecStart=$(BINDIR)/geoconsentd|' systemd/geoconsentd.service \
	  > "$(DESTDIR)$(UNITDIR)/geoconsentd.service.tmp"
	$(INSTALL) -m 0644 "$(DESTDIR)$(UNITDIR)/geoconsentd.service.tmp" "$(DESTDIR)$(UNITDIR)/geoconsentd.service"
	rm -f "$(DESTDIR)$(UNITDIR)/geoconsentd.service.tmp"
	$(INSTALL) -m 0644 systemd/geoconsent.sysusers "$(DESTDIR)$(SYSUSERSDIR)/geoconsent.conf"
	$(INSTALL) -m 0644 dbus-policy/org.geoconsent.GeoConsent1.conf "$(DESTDIR)$(DBUSPOLICYDIR)/"
	$(INSTALL) -m 0644 dbus-policy/org.geoconsent.GeoConsent1.service "$(DESTDIR)$(DBUSDATADIR)/system-services/"
	$(INSTALL) -m 0644 interfaces/org.geoconsent.GeoConsent1.xml "$(DESTDIR)$(DBUSDATADIR)/interfaces/"
	$(INSTALL) -d "$(DESTDIR)$(POLKITDIR)"
	$(INSTALL) -m 0644 polkit/org.geoconsent.policy "$(DESTDIR)$(POLKITDIR)/"
	$(INSTALL) -m 0644 man/geoconsentctl.1 "$(DESTDIR)$(MANDIR)/man1/"
	$(INSTALL) -m 0644 man/geoconsent.conf.5 "$(DESTDIR)$(MANDIR)/man5/"
	$(INSTALL) -m 0644 man/geoconsentd.8 man/geoconsent-wifi-helper.8 "$(DESTDIR)$(MANDIR)/man8/"
	@# The translations (po/) of geoconsentctl and the desktop programs, checked and compiled
	@# into a temporary directory (the source tree may be read-only), then installed.
	mo=$$(mktemp -d) && trap 'rm -rf "$$mo"' EXIT && bash scripts/po-check.sh "$$mo" >/dev/null && \
	for lang in $$(cat po/LINGUAS); do \
	  $(INSTALL) -d "$(DESTDIR)$(PREFIX)/share/locale/$$lang/LC_MESSAGES" && \
	  $(INSTALL) -m 0644 "$$mo/$$lang/LC_MESSAGES/geoconsent.mo" \
	    "$(DESTDIR)$(PREFIX)/share/locale/$$lang/LC_MESSAGES/geoconsent.mo" || exit 1; \
	done
	@if [ -e "$(DESTDIR)$(SYSCONFDIR)/geoconsent/geoconsent.conf" ]; then \
	  echo "install: keeping $(DESTDIR)$(SYSCONFDIR)/geoconsent/geoconsent.conf"; \
	else \
	  echo "$(INSTALL) -m 0644 config/geoconsent.conf $(DESTDIR)$(SYSCONFDIR)/geoconsent/geoconsent.conf"; \
	  $(INSTALL) -m 0644 config/geoconsent.conf "$(DESTDIR)$(SYSCONFDIR)/geoconsent/geoconsent.conf"; \
	fi
	@if [ -z "$(DESTDIR)" ]; then \
	  echo "install: now run: systemd-sysusers; systemctl daemon-reload; systemctl reload dbus;"; \
	  echo "         systemctl enable --now geoconsent-wifi.socket (README \"Install\")"; \
	fi

# The GeoClue2 facade's files alone (GEOCLUE=1 above; debian/rules installs them
# into the package geoconsent-geoclue).
install-geoclue:
	@# GeoClue's own activation file has the same path under PREFIX=/usr: never
	@# overwrite another package's file (remove geoclue-2.0 first, or use /usr/local).
	@f="$(DESTDIR)$(DBUSDATADIR)/system-services/org.freedesktop.GeoClue2.service"; \
	  if [ -e "$$f" ] && ! grep -qx 'SystemdService=geoconsentd.service' "$$f"; then \
	    echo "install: $$f is GeoClue's own; remove geoclue-2.0 first, or install under PREFIX=/usr/local (docs/geoclue.md)" >&2; \
	    exit 1; \
	  fi
	$(INSTALL) -d "$(DESTDIR)$(DBUSPOLICYDIR)" "$(DESTDIR)$(DBUSDATADIR)/system-services" \
	  "$(DESTDIR)$(UNITDIR)/geoconsentd.service.d"
	$(INSTALL) -m 0644 dbus-policy/org.freedesktop.GeoClue2.geoconsent.conf "$(DESTDIR)$(DBUSPOLICYDIR)/"
	$(INSTALL) -m 0644 dbus-policy/org.freedesktop.GeoClue2.service "$(DESTDIR)$(DBUSDATADIR)/system-services/"
	sed 's|^ExecStart=/usr/bin/geoconsentd |ExecStart=$(BINDIR)/geoconsentd |' systemd/geoconsentd.service.d/geoclue.conf \
	  > "$(DESTDIR)$(UNITDIR)/geoconsentd.service.d/geoclue.conf.tmp"
	$(INSTALL) -m 0644 "$(DESTDIR)$(UNITDIR)/geoconsentd.service.d/geoclue.conf.tmp" \
	  "$(DESTDIR)$(UNITDIR)/geoconsentd.service.d/geoclue.conf"
	rm -f "$(DESTDIR)$(UNITDIR)/geoconsentd.service.d/geoclue.conf.tmp"
	@if [ -z "$(DESTDIR)" ]; then \
	  echo "install: GeoClue2 facade: systemctl mask --now geoclue.service; systemctl daemon-reload;"; \
	  echo "         systemctl reload dbus; systemctl try-restart geoconsentd.service (docs/geoclue.md)"; \
	fi

# The gpsd lockdown alone (LOCKDOWN=1 above; debian/rules installs it into the
# package geoconsent-gpsd-lockdown): gpsd's two drop-ins and the daemon's.
# They take effect once systemd has reloaded them and the three units start
# again (README "Install", the block after "After installing the lockdown").
install-lockdown:
	$(INSTALL) -d "$(DESTDIR)$(UNITDIR)/gpsd.service.d" "$(DESTDIR)$(UNITDIR)/gpsd.socket.d" \
	  "$(DESTDIR)$(UNITDIR)/geoconsentd.service.d"
	$(INSTALL) -m 0644 systemd/gpsd.service.d/geoconsent.conf "$(DESTDIR)$(UNITDIR)/gpsd.service.d/geoconsent.conf"
	$(INSTALL) -m 0644 systemd/gpsd.socket.d/geoconsent.conf "$(DESTDIR)$(UNITDIR)/gpsd.socket.d/geoconsent.conf"
	$(INSTALL) -m 0644 systemd/geoconsentd.service.d/gpsd-lockdown.conf \
	  "$(DESTDIR)$(UNITDIR)/geoconsentd.service.d/gpsd-lockdown.conf"
	@if [ -z "$(DESTDIR)" ]; then \
	  echo "install: gpsd lockdown: systemctl daemon-reload;"; \
	  echo "         systemctl stop gpsd.service gpsd.socket geoconsentd.service; systemctl start gpsd.socket"; \
	  echo "         (README \"Install\", docs/gpsd-lockdown.md)"; \
	fi

# Removes the gpsd lockdown's files (uninstall does too). gpsd stays in its
# namespace until its units start again (docs/gpsd-lockdown.md, "Undo").
uninstall-lockdown:
	@if [ -z "$(DESTDIR)" ] && [ -e "$(UNITDIR)/gpsd.socket.d/geoconsent.conf" ]; then \
	  echo "uninstall: to give gpsd back to the machine, then run: systemctl daemon-reload;"; \
	  echo "         systemctl stop gpsd.service gpsd.socket geoconsentd.service; systemctl start gpsd.socket"; \
	fi
	rm -f "$(DESTDIR)$(UNITDIR)/gpsd.service.d/geoconsent.conf" "$(DESTDIR)$(UNITDIR)/gpsd.socket.d/geoconsent.conf" \
	  "$(DESTDIR)$(UNITDIR)/geoconsentd.service.d/gpsd-lockdown.conf"
	-rmdir "$(DESTDIR)$(UNITDIR)/gpsd.service.d" "$(DESTDIR)$(UNITDIR)/gpsd.socket.d" \
	  "$(DESTDIR)$(UNITDIR)/geoconsentd.service.d" 2>/dev/null

# The graphical consent agent and the settings window (desktop/; debian/rules
# installs them into the package geoconsent-agent): the programs (thin launchers,
# and the package geoconsent_desktop in PREFIX/share/geoconsent/python), their man pages, its XDG autostart
# entry (started with the desktop session; systemd's user manager runs it as
# a unit of xdg-desktop-autostart.target), its .desktop file and its icon.
AUTOSTARTDIR ?= $(SYSCONFDIR)/xdg/autostart
install-agent:
	$(INSTALL) -d "$(DESTDIR)$(BINDIR)" "$(DESTDIR)$(MANDIR)/man1" "$(DESTDIR)$(AUTOSTARTDIR)" \
	  "$(DESTDIR)$(PREFIX)/share/applications" "$(DESTDIR)$(PREFIX)/share/icons/hicolor/scalable/apps"
	$(INSTALL) -d "$(DESTDIR)$(PREFIX)/share/geoconsent/python/geoconsent_desktop"
	$(INSTALL) -m 0644 desktop/geoconsent_desktop/*.py "$(DESTDIR)$(PREFIX)/share/geoconsent/python/geoconsent_desktop/"
	$(INSTALL) -m 0755 desktop/geoconsent-agent "$(DESTDIR)$(BINDIR)/geoconsent-agent"
	$(INSTALL) -m 0755 desktop/geoconsent-settings "$(DESTDIR)$(BINDIR)/geoconsent-settings"
	$(INSTALL) -m 0644 man/geoconsent-agent.1 man/geoconsent-settings.1 "$(DESTDIR)$(MANDIR)/man1/"
	$(INSTALL) -m 0644 desktop/data/geoconsent-agent-autostart.desktop \
	  "$(DESTDIR)$(AUTOSTARTDIR)/org.geoconsent.Agent.desktop"
	$(INSTALL) -m 0644 desktop/data/org.geoconsent.Agent.desktop desktop/data/org.geoconsent.Settings.desktop \
	  "$(DESTDIR)$(PREFIX)/share/applications/"
	$(INSTALL) -m 0644 desktop/data/org.geoconsent.Agent.svg "$(DESTDIR)$(PREFIX)/share/icons/hicolor/scalable/apps/"

# Removes what install put there, except the config (yours) and the state.
uninstall: uninstall-lockdown
	rm -f "$(DESTDIR)$(BINDIR)/geoconsentd" "$(DESTDIR)$(BINDIR)/geoconsentctl" \
	  "$(DESTDIR)$(LIBEXECDIR)/geoconsent/geoconsent-wifi-helper" "$(DESTDIR)$(MANDIR)/man8/geoconsent-wifi-helper.8" \
	  "$(DESTDIR)$(UNITDIR)/geoconsent-wifi.socket" "$(DESTDIR)$(UNITDIR)/geoconsent-wifi@.service" \
	  "$(DESTDIR)$(UNITDIR)/geoconsentd.service" \
	  "$(DESTDIR)$(SYSUSERSDIR)/geoconsent.conf" \
	  "$(DESTDIR)$(DBUSPOLICYDIR)/org.geoconsent.GeoConsent1.conf" \
	  "$(DESTDIR)$(DBUSDATADIR)/system-services/org.geoconsent.GeoConsent1.service" \
	  "$(DESTDIR)$(DBUSDATADIR)/interfaces/org.geoconsent.GeoConsent1.xml" \
	  "$(DESTDIR)$(POLKITDIR)/org.geoconsent.policy" \
	  "$(DESTDIR)$(MANDIR)/man1/geoconsentctl.1" "$(DESTDIR)$(MANDIR)/man5/geoconsent.conf.5" \
	  "$(DESTDIR)$(MANDIR)/man8/geoconsentd.8"
	rm -rf "$(DESTDIR)$(PREFIX)/share/geoconsent/python"
	rm -f "$(DESTDIR)$(BINDIR)/geoconsent-agent" "$(DESTDIR)$(MANDIR)/man1/geoconsent-agent.1" \
	  "$(DESTDIR)$(BINDIR)/geoconsent-settings" "$(DESTDIR)$(MANDIR)/man1/geoconsent-settings.1" \
	  "$(DESTDIR)$(PREFIX)/share/applications/org.geoconsent.Settings.desktop" \
	  "$(DESTDIR)$(AUTOSTARTDIR)/org.geoconsent.Agent.desktop" \
	  "$(DESTDIR)$(PREFIX)/share/applications/org.geoconsent.Agent.desktop" \
	  "$(DESTDIR)$(PREFIX)/share/icons/hicolor/scalable/apps/org.geoconsent.Agent.svg"
	for lang in $$(cat po/LINGUAS); do rm -f "$(DESTDIR)$(PREFIX)/share/locale/$$lang/LC_MESSAGES/geoconsent.mo"; done
	@# The GeoClue2 facade's files (GEOCLUE=1), if they are ours: the activation
	@# file has GeoClue's path, so it goes only when it names our unit.
	rm -f "$(DESTDIR)$(DBUSPOLICYDIR)/org.freedesktop.GeoClue2.geoconsent.conf" \
	  "$(DESTDIR)$(UNITDIR)/geoconsentd.service.d/geoclue.conf"
	@f="$(DESTDIR)$(DBUSDATADIR)/system-services/org.freedesktop.GeoClue2.service"; \
	  if grep -qx 'SystemdService=geoconsentd.service' "$$f" 2>/dev/null; then echo "rm -f $$f"; rm -f "$$f"; fi
	-rmdir "$(DESTDIR)$(LIBEXECDIR)/geoconsent" 2>/dev/null
	-rmdir "$(DESTDIR)$(UNITDIR)/geoconsentd.service.d" 2>/dev/null
