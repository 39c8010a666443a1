// Churn to a first fix in plain C on libdbus-1; see include/fix_churn.h.
#include "fix_churn.h"
#include "bench_floor_private.h"

#include <stdio.h>
#include <stdlib.h>

static const char *const GEOCLUE_CLIENT_IFACE = "org.freedesktop.GeoClue2.Client";

/// Reads until a LocationUpdated of `iface` is in: 1, or 0 with the reason in
/// `error` (a LocationError, the connection lost, or `deadline` passed).
static int wait_for_fix(DBusConnection *c, const char *iface, uint64_t deadline, char *error, int error_len) {
    for (;;) {
        DBusMessage *m;
        while ((m = dbus_connection_pop_message(c))) {
            int fix = dbus_message_is_signal(m, iface, "LocationUpdated");
            int failed = dbus_message_is_signal(m, iface, "LocationError");
            dbus_message_unref(m);
            if (fix) return 1;
            if (failed) { bf_set_error(error, error_len, "LocationError instead of a fix", NULL); return 0; }
        }
        uint64_t now = bf_now();
        if (now >= deadline) { bf_set_error(error, error_len, "no LocationUpdated in time", NULL); return 0; }
        if (!dbus_connection_read_write(c, (int)((deadline - now) / 1000000u) + 1)) {
            bf_set_error(error, error_len, "disconnected before the fix", NULL);
            return 0;
        }
    }
}

/// One client's updates started, its first fix awaited: 1, or 0 (the reason in `error`).
static int first_fix(DBusConnection *c, const bf_churn_service *s, uint64_t deadline, char *error, int error_len) {
    if (s->protocol == BF_CHURN_OWN) {
        return bf_call_and_wait(c, s->dest, s->path, s->iface, "RequestOneTimeAuthorization", error, error_len) &&
               bf_call_and_wait(c, s->dest, s->path, s->iface, "StartUpdates", error, error_len) &&
               wait_for_fix(c, s->iface, deadline, error, error_len);
    }
    char *client = bf_gc_become_client(c, s->dest, s->desktop_id, s->level, error, error_len);
    if (!client) return 0;
    DBusMessage *reply = bf_call_blocking(c, dbus_message_new_method_call(s->dest, client, GEOCLUE_CLIENT_IFACE, "Start"),
                                          "Start", error, error_len);
    free(client);
    if (!reply) return 0;
    dbus_message_unref(reply);
    return wait_for_fix(c, GEOCLUE_CLIENT_IFACE, deadline, error, error_len);
}

int bf_fix_churn(const char *address, const bf_churn_service *service, int cycles, uint64_t *cycle_nanos,
                 int timeout_ms, char *error, int error_len) {
    for (int i = 0; i < cycles; i++) {
        uint64_t t0 = bf_now();
        DBusConnection *c = bf_open_registered(address, error, error_len);
        if (!c) return -1;
        int ok = first_fix(c, service, t0 + (uint64_t)timeout_ms * 1000000u, error, error_len);
        bf_close_connection(c);
        if (!ok) return -1;
        cycle_nanos[i] = bf_now() - t0;
    }
    return 0;
}
