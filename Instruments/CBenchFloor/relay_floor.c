// The C relay (include/bench_floor.h, "Relay"): a process in the daemon's place
// between gpsd and N subscribers that does nothing but what any such process
// must: read gpsd's report, build one signal from it, send it to each
// subscriber. Its first and last arrivals show how much of a fan-out row's gap
// to its floor is the third process itself, not the daemon's work.
#include "bench_floor_private.h"

#include <dbus/dbus.h>
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/// The "time" of a TPV line ("2026-12-03T10:00:00.000Z") in µs since the epoch,
/// the unit of our location's "timestamp"; 0 when the line has none.
static uint64_t tpv_micros(const char *line) {
    const char *t = strstr(line, "\"time\":\"");
    if (!t) return 0;
    struct tm tm = {0};
    int ms = 0;
    int got = sscanf(t + 8, "%4d-%2d-%2dT%2d:%2d:%2d.%3d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                     &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms);
    if (got < 6) return 0;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    time_t secs = timegm(&tm);
    if (secs < 0) return 0;
    return (uint64_t)secs * 1000000u + (uint64_t)(got == 7 ? ms : 0) * 1000u;
}

/// One fix to every destination: the signal built once, a copy per destination.
static void relay_fix(DBusConnection *c, uint64_t stamp, const char *const *destinations, int n,
                      const char *path, const char *iface, const char *member, int yield_after) {
    DBusMessage *template = bf_location_signal(path, iface, member, NULL, stamp);
    if (!template) return;
    for (int i = 0; i < n; i++) {
        DBusMessage *m = dbus_message_copy(template);
        if (!m) continue;
        dbus_message_set_destination(m, destinations[i]);
        dbus_connection_send(c, m, NULL);
        dbus_message_unref(m);
        if (i + 1 == yield_after) sched_yield();
    }
    dbus_message_unref(template);
    dbus_connection_flush(c);
}

int bf_relay_run(const char *address, int gpsd_fd, const char *const *destinations, int n,
                 const char *path, const char *iface, const char *member, int yield_after, int geoclue,
                 char *error, int error_len) {
    enum { CAPACITY = 1 << 16 };
    char *buf = malloc(CAPACITY + 1);
    if (!buf) {
        if (error && error_len > 0) snprintf(error, (size_t)error_len, "out of memory");
        return -1;
    }
    // GeoClue mode: the GeoClue floor's round, served from here for each fix.
    bf_gc_floor *gc = geoclue ? bf_gc_floor_open(address, destinations, n, error, error_len) : NULL;
    if (gc) bf_gc_floor_stream(gc, yield_after);
    DBusConnection *c = geoclue ? (gc ? bf_gc_floor_connection(gc) : NULL) : bf_open_registered(address, error, error_len);
    if (!c) { free(buf); return -1; }
    int bus_fd = -1;
    dbus_connection_get_unix_fd(c, &bus_fd);
    printf("ready\n");
    fflush(stdout);
    static const char tpv[] = "{\"class\":\"TPV\"";
    size_t have = 0;
    const char *failed = NULL;   // why the loop ended, when not because gpsd closed
    for (;;) {
        struct pollfd p[2] = { { .fd = gpsd_fd, .events = POLLIN }, { .fd = bus_fd, .events = POLLIN } };
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR) continue;
            failed = "poll failed";
            break;
        }
        if (p[1].revents) {
            // Whatever the bus sends (NameAcquired, errors for gone receivers) is dropped.
            if (!dbus_connection_read_write(c, 0)) { failed = "the bus went away"; break; }
            DBusMessage *m;
            while ((m = dbus_connection_pop_message(c))) dbus_message_unref(m);
        }
        if (!p[0].revents) continue;
        if (have == CAPACITY) have = 0;   // a line longer than gpsd ever writes: start over
        ssize_t r = read(gpsd_fd, buf + have, CAPACITY - have);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) { failed = "reading gpsd failed"; break; }
        if (r == 0) break;   // gpsd closed: the normal end
        have += (size_t)r;
        buf[have] = 0;
        char *line = buf, *nl;
        while ((nl = memchr(line, '\n', have - (size_t)(line - buf)))) {
            *nl = 0;
            if (strncmp(line, tpv, sizeof tpv - 1) == 0) {
                uint64_t stamp = tpv_micros(line);
                if (stamp && gc) {
                    if (!bf_gc_floor_serve(gc, stamp)) fprintf(stderr, "relay-c: a GetAll did not come within 5 s\n");
                } else if (stamp) {
                    relay_fix(c, stamp, destinations, n, path, iface, member, yield_after);
                }
            }
            line = nl + 1;
        }
        have -= (size_t)(line - buf);
        memmove(buf, line, have);
    }
    if (failed && error && error_len > 0) snprintf(error, (size_t)error_len, "%s", failed);
    free(buf);
    if (gc) bf_gc_floor_stop(gc); else bf_close_connection(c);
    return failed ? -1 : 0;
}
