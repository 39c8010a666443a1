#!/usr/bin/env bash
# deps.sh: install the Debian packages geoconsent needs to build, test and
# `make run`, and nothing else. Safe to re-run: packages already installed are
# left alone, and `apt-get update` runs only when something is missing.
#
#   libdbus-1-dev libgps-dev pkg-config   build (CDBus, CGPS system libraries)
#   gpsd                                  tests and `make run` start private gpsds
#   dbus-daemon dbus-bin                  private test buses (dbus-daemon, dbus-send)
#   systemd                               busctl (test harness, hints); in a
#                                         container it is just a package, not init
#   python3                               tools/gen-nmea-track.py, scripts/run-stack.sh
#   iproute2 libglib2.0-bin groff-base    service tests: ip netns (gpsd lockdown),
#                                         gdbus (policy tests as other uids),
#                                         groff (man pages render without warnings)
#   python3-gi                            the policy test's interface-less calls
#                                         (GDBus from /usr/bin/python3)
#   geoclue-2-demo gir1.2-geoclue-2.0     real GeoClue2 clients for the tests of
#                                         the GeoClue2 facade: where-am-i, and
#                                         libgeoclue's GClue.Simple from Python;
#                                         geoclue-2.0 comes with them, for its
#                                         published interface XML and as the
#                                         reference the same clients also run
#                                         against (its daemon on a private bus;
#                                         its service is only D-Bus activated on
#                                         the system bus: nothing runs there)
#   xdg-desktop-portal                    the Location portal in front of the
#                                         facade (its D-Bus activation files
#                                         are for the session bus; the tests
#                                         start it on a private one)
#   gjs libglib2.0-dev                    README's examples for app developers in
#                                         GJS and in C on GDBus run against the
#                                         daemon (ReadmeAppExamplesTests)
#   python3-dbusmock                      stand-ins on the test bus for logind (the
#                                         tests of grants pausing with the session)
#                                         and NetworkManager (Wi-Fi positioning)
#   libcurl4-openssl-dev                  the Wi-Fi network helper's HTTPS (CCurl)
#   libssl-dev                            OpenSSL, libcurl's TLS library: the helper
#                                         readies it before its first lookup (COpenSSL)
#   openssl                               the Wi-Fi tests' loopback HTTPS server
#                                         makes its test CA and certificate
#   make                                  make install test
#   gettext                               msgfmt, msgcmp, xgettext: the translations
#                                         (po/) are checked and compiled (po-check.sh)
#   g++                                   libstdc++.a: the release links the Swift
#                                         runtime's C++ runtime in (Makefile)
#
# `deps.sh --bench` (make bench) adds:
#   strace                                geoconsent-bench counts the idle
#                                         daemon's system calls with it
#   gnuplot-nox                           and draws its scaling rows as a PNG
#                                         (docs/performance-scaling.png); without
#                                         it the plot is skipped, nothing fails
#
# `deps.sh --desktop` (desktop/test-desktop.sh, run by make test) adds:
#   xvfb xdotool                          a headless X server, and clicks in it
#   python3-gi python3-gi-cairo           PyGObject (GTK, GDK, GDBus) and its
#   gir1.2-gtk-3.0                        cairo glue, for desktop/geoconsent-agent,
#                                         desktop/location-button-demo and the
#                                         screenshots (GDK reads the screen:
#                                         no imagemagick or xwd needed)
#   fonts-dejavu-core                     so text renders
#   fonts-nanum                           Hangul, for the dialog in Korean
#   python3-xlib                          the agent's focus check on X11 (XRes,
#                                         XInput 2 raw presses: focus.py)
#   openbox                               a real EWMH window manager for its
#                                         test (desktop/tests/test-focus.sh)
#   gir1.2-ayatanaappindicator3-0.1       the agent's indicator (a StatusNotifierItem
#                                         through libayatana-appindicator: indicator.py)
#   gir1.2-notify-0.7                     its notices at silent grants (libnotify)
#   dunst                                 a notification server that draws under
#                                         Xvfb, so the test sees and shoots the notice
#   haskell-status-notifier-item-utils    a real StatusNotifierWatcher (status-notifier-watcher)
#   haskell-gtk-sni-tray-utils            a tray that draws StatusNotifierItems
#                                         (gtk-sni-tray-standalone), for the indicator's pictures
#   locales                               and the ko_KR.UTF-8 and de_DE.UTF-8
#                                         locales it runs in (made with
#                                         localedef when missing)
#
# `deps.sh --package` (make deb, run by make test) adds:
#   debhelper dpkg-dev build-essential    dpkg-buildpackage with debhelper 13
#   libstdc++-12-dev                      (a Build-Depends of debian/control)
#   lintian                               checks the package
#
# `deps.sh --container` (tests/systemd/test-units.sh, run by make test) adds:
#   systemd-container                     systemd-nspawn, which boots the real
#                                         systemd the unit tests run under.
#                                         Installed without recommends: its
#                                         recommended libnss-mymachines would
#                                         edit /etc/nsswitch.conf
#   util-linux                            unshare, nsenter, setpriv, mountpoint
#   firefox-esr                           unmodified Firefox in the desktop end to
#                                         end (tests/systemd/desktop-e2e.sh), with
#                                         xvfb and xdotool of --desktop
#
# gpsd-clients (gpspipe, gpsfake) is deliberately not needed: it pulls in GTK.
set -euo pipefail

PKGS=(libdbus-1-dev libgps-dev gpsd dbus-daemon dbus-bin pkg-config python3 systemd
      iproute2 libglib2.0-bin groff-base python3-gi make g++ geoclue-2-demo gir1.2-geoclue-2.0
      xdg-desktop-portal python3-dbusmock gettext libcurl4-openssl-dev libssl-dev openssl gjs libglib2.0-dev)
for arg in "$@"; do
    case $arg in
        --bench) PKGS+=(strace gnuplot-nox) ;;
        --package) PKGS+=(debhelper dpkg-dev build-essential libstdc++-12-dev lintian) ;;
        --container) PKGS+=(systemd-container util-linux firefox-esr) ;;
        --desktop) PKGS+=(xvfb xdotool python3-gi python3-gi-cairo gir1.2-gtk-3.0 fonts-dejavu-core fonts-nanum locales
                          openbox python3-xlib gir1.2-ayatanaappindicator3-0.1 gir1.2-notify-0.7 dunst
                          haskell-status-notifier-item-utils haskell-gtk-sni-tray-utils adwaita-icon-theme) ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed -n 's/^# \{0,1\}//p'; exit 0 ;;
        *) echo "deps: unknown argument $arg (usage: deps.sh [--bench] [--desktop] [--package] [--container])" >&2; exit 2 ;;
    esac
done

missing=()
for p in "${PKGS[@]}"; do
    status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
    [[ $status == installed ]] || missing+=("$p")
done

# The desktop test shows the dialog in Korean and in German: the C library
# needs those locales.
needs_locale=no
if [[ " $* " == *" --desktop "* ]]; then
    for l in ko_KR de_DE; do locale -a 2>/dev/null | grep -qix "$l.utf8" || needs_locale=yes; done
fi
korean_locale() {
    [[ $needs_locale == yes ]] || return 0
    for l in ko_KR de_DE; do
        locale -a 2>/dev/null | grep -qix "$l.utf8" && continue
        echo "deps: making the $l.UTF-8 locale (localedef)"
        "${SUDO[@]}" localedef -i "$l" -f UTF-8 "$l.UTF-8"
    done
}

SUDO=()
if ((EUID != 0)) && { ((${#missing[@]} > 0)) || [[ $needs_locale == yes ]]; }; then
    command -v sudo >/dev/null || { echo "deps: need root or sudo to install: ${missing[*]} (or a locale)" >&2; exit 1; }
    SUDO=(sudo)
fi

if ((${#missing[@]} == 0)); then
    korean_locale
    echo "deps: all present (${PKGS[*]})"
    exit 0
fi

# Was something already serving gpsd's default port before we install gpsd?
port_2947_busy() { (exec 3<>/dev/tcp/127.0.0.1/2947) 2>/dev/null; }
busy_before=no
port_2947_busy && busy_before=yes

echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"

# The gpsd package may start its service (gpsd.socket, or /etc/init.d/gpsd in
# a container without systemd). That is harmless: our tests and `make run`
# never use the fixed port 2947, they pick free ports. We leave such a gpsd
# alone (it belongs to the system, not to us) and just say so.
if [[ $busy_before == no ]] && port_2947_busy; then
    echo "deps: note: installing gpsd started a system gpsd on 127.0.0.1:2947;" \
         "geoconsent's tests do not use it (they use free ports). Stop it with" \
         "'systemctl stop gpsd.socket gpsd' or 'service gpsd stop' if unwanted."
fi
korean_locale
echo "deps: done"
