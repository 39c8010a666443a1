// The GeoClue2 protocol in plain C on libdbus-1; see include/geoclue_floor.h.
// The clients are bench_floor.c's receivers with a little state each; the floor
// sender is a thread with its own connection (bf_rounds), like bench_floor.c's sender.
#include "geoclue_floor.h"
#include "bench_floor_private.h"

#include <sched.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const MANAGER_PATH = "/org/freedesktop/GeoClue2/Manager";
static const char *const MANAGER_IFACE = "org.freedesktop.GeoClue2.Manager";
static const char *const CLIENT_IFACE = "org.freedesktop.GeoClue2.Client";
static const char *const LOCATION_IFACE = "org.freedesktop.GeoClue2.Location";
static const char *const PROPERTIES_IFACE = "org.freedesktop.DBus.Properties";

// MARK: Clients

struct bf_gc_state {
    char *client;                  // the client object's path
    dbus_uint32_t start_serial;
    char started;
    dbus_uint32_t getall_serial;   // the latest GetAll sent, 0 when none is awaited
    uint64_t signal_at;            // when the LocationUpdated that caused it was popped
};

static void bf_gc_state_free(bf_receivers *r) {
    if (!r->gc) return;
    for (int i = 0; i < r->n; i++) free(r->gc[i].client);
    free(r->gc);
    r->gc = NULL;
}

const char *bf_gc_client_path(bf_receivers *r, int i) { return r->gc ? r->gc[i].client : NULL; }

DBusMessage *bf_call_blocking(DBusConnection *c, DBusMessage *m, const char *what, char *error, int error_len) {
    if (!m) { bf_set_error(error, error_len, what, NULL); return NULL; }
    DBusError e;
    dbus_error_init(&e);
    DBusMessage *reply = dbus_connection_send_with_reply_and_block(c, m, 10000, &e);
    dbus_message_unref(m);
    if (!reply) bf_set_error(error, error_len, what, &e);
    return reply;
}

/// Properties.Set(CLIENT_IFACE, name, variant of `type`) on the client, waiting for the reply.
static int set_property(DBusConnection *c, const char *dest, const char *client, const char *name,
                        int type, const char *sig, const void *value, char *error, int error_len) {
    DBusMessage *m = dbus_message_new_method_call(dest, client, PROPERTIES_IFACE, "Set");
    if (m) {
        DBusMessageIter it, var;
        dbus_message_iter_init_append(m, &it);
        dbus_message_iter_append_basic(&it, DBUS_TYPE_STRING, &CLIENT_IFACE);
        dbus_message_iter_append_basic(&it, DBUS_TYPE_STRING, &name);
        dbus_message_iter_open_container(&it, DBUS_TYPE_VARIANT, sig, &var);
        dbus_message_iter_append_basic(&var, type, value);
        dbus_message_iter_close_container(&it, &var);
    }
    DBusMessage *reply = bf_call_blocking(c, m, name, error, error_len);
    if (reply) dbus_message_unref(reply);
    return reply != NULL;
}

char *bf_gc_become_client(DBusConnection *c, const char *dest, const char *desktop_id, uint32_t level,
                          char *error, int error_len) {
    DBusMessage *reply = bf_call_blocking(c, dbus_message_new_method_call(dest, MANAGER_PATH, MANAGER_IFACE, "GetClient"),
                                       "GetClient", error, error_len);
    if (!reply) return NULL;
    const char *path = NULL;
    char *client = NULL;
    if (dbus_message_get_type(reply) == DBUS_MESSAGE_TYPE_METHOD_RETURN)
        dbus_message_get_args(reply, NULL, DBUS_TYPE_OBJECT_PATH, &path, DBUS_TYPE_INVALID);
    if (path) client = strdup(path);
    dbus_message_unref(reply);
    if (!client) { bf_set_error(error, error_len, "GetClient", NULL); return NULL; }
    dbus_uint32_t lvl = level;
    if (!set_property(c, dest, client, "DesktopId", DBUS_TYPE_STRING, "s", &desktop_id, error, error_len) ||
        !set_property(c, dest, client, "RequestedAccuracyLevel", DBUS_TYPE_UINT32, "u", &lvl, error, error_len)) {
        free(client);
        return NULL;
    }
    return client;
}

int bf_gc_clients_setup(bf_receivers *r, const char *dest, const char *desktop_id, uint32_t level,
                        char *error, int error_len) {
    bf_gc_state_free(r);
    r->gc = calloc((size_t)r->n, sizeof *r->gc);
    r->release_extra = bf_gc_state_free;
    for (int i = 0; i < r->n; i++) {
        r->gc[i].client = bf_gc_become_client(r->c[i], dest, desktop_id, level, error, error_len);
        if (!r->gc[i].client) return -1;
    }
    for (int i = 0; i < r->n; i++) {
        DBusMessage *m = dbus_message_new_method_call(dest, r->gc[i].client, CLIENT_IFACE, "Start");
        if (!m || !dbus_connection_send(r->c[i], m, &r->gc[i].start_serial)) {
            if (m) dbus_message_unref(m);
            bf_set_error(error, error_len, "Start", NULL);
            return -1;
        }
        dbus_message_unref(m);
    }
    return 0;
}

int bf_gc_clients_started(bf_receivers *r, int timeout_ms, char *error, int error_len) {
    uint64_t deadline = bf_now() + (uint64_t)timeout_ms * 1000000u;
    struct pollfd *p = calloc((size_t)r->n, sizeof *p);
    for (;;) {
        int left = 0, k = 0;
        for (int i = 0; i < r->n; i++) {
            bf_gc_state *g = &r->gc[i];
            if (g->started) continue;
            dbus_connection_read_write(r->c[i], 0);
            DBusMessage *m;
            while ((m = dbus_connection_pop_message(r->c[i]))) {
                if (!g->started && dbus_message_get_reply_serial(m) == g->start_serial) {
                    g->started = 1;
                    if (dbus_message_get_type(m) == DBUS_MESSAGE_TYPE_ERROR) {
                        if (error && error_len > 0)
                            snprintf(error, (size_t)error_len, "Start: %s", dbus_message_get_error_name(m));
                        dbus_message_unref(m);
                        free(p);
                        return -1;
                    }
                }
                dbus_message_unref(m);
            }
            if (!g->started) {
                left++;
                p[k++] = (struct pollfd){ .fd = r->fds[i].fd, .events = POLLIN };
            }
        }
        uint64_t now = bf_now();
        if (left == 0 || now >= deadline) { free(p); return left; }
        poll(p, (nfds_t)k, (int)((deadline - now) / 1000000u) + 1);
    }
}

/// The Location's Timestamp (seconds, microseconds) in a GetAll reply, as
/// microseconds; 0 if it has none.
static uint64_t location_timestamp(DBusMessage *m) {
    DBusMessageIter var, tt;
    if (!bf_dict_variant(m, "Timestamp", &var) || dbus_message_iter_get_arg_type(&var) != DBUS_TYPE_STRUCT) return 0;
    dbus_message_iter_recurse(&var, &tt);
    dbus_uint64_t s = 0, us = 0;
    if (dbus_message_iter_get_arg_type(&tt) != DBUS_TYPE_UINT64) return 0;
    dbus_message_iter_get_basic(&tt, &s);
    if (!dbus_message_iter_next(&tt) || dbus_message_iter_get_arg_type(&tt) != DBUS_TYPE_UINT64) return 0;
    dbus_message_iter_get_basic(&tt, &us);
    return s * 1000000u + us;
}

/// GetAll(LOCATION_IFACE) on `path` at `dest`; the serial, 0 if it could not be sent.
static dbus_uint32_t send_get_all(DBusConnection *c, const char *dest, const char *path) {
    DBusMessage *m = dbus_message_new_method_call(dest, path, PROPERTIES_IFACE, "GetAll");
    if (!m) return 0;
    dbus_uint32_t serial = 0;
    dbus_message_append_args(m, DBUS_TYPE_STRING, &LOCATION_IFACE, DBUS_TYPE_INVALID);
    if (!dbus_connection_send(c, m, &serial)) serial = 0;
    dbus_message_unref(m);
    return serial;
}

/// Pops what client `i` has: a LocationUpdated is answered with a GetAll of its
/// new path, the reply to the latest GetAll ends the wait if it is this fix.
/// 1 when client i is done.
static int take(bf_receivers *r, int i, uint64_t stamp, uint64_t *signal_at, uint64_t *in_hand_at) {
    bf_gc_state *g = &r->gc[i];
    int done = 0;
    DBusMessage *m;
    while ((m = dbus_connection_pop_message(r->c[i]))) {
        uint64_t now = bf_now();
        int type = dbus_message_get_type(m);
        if (r->got[i]) {
            // done: the rest is PropertiesChanged and the like
        } else if (type == DBUS_MESSAGE_TYPE_SIGNAL && dbus_message_is_signal(m, CLIENT_IFACE, "LocationUpdated")) {
            const char *old = NULL, *new = NULL;
            const char *sender = dbus_message_get_sender(m);
            if (sender && dbus_message_get_args(m, NULL, DBUS_TYPE_OBJECT_PATH, &old, DBUS_TYPE_OBJECT_PATH, &new,
                                                DBUS_TYPE_INVALID)) {
                g->getall_serial = send_get_all(r->c[i], sender, new);
                g->signal_at = now;
            }
        } else if (g->getall_serial && dbus_message_get_reply_serial(m) == g->getall_serial) {
            g->getall_serial = 0;
            // A reply for an older fix (one gpsd held back) leaves the client waiting for this one.
            if (type == DBUS_MESSAGE_TYPE_METHOD_RETURN && location_timestamp(m) == stamp) {
                signal_at[i] = g->signal_at;
                in_hand_at[i] = now;
                r->got[i] = 1;
                done = 1;
            }
        }
        dbus_message_unref(m);
    }
    return done;
}

/// What `bf_gc_clients_wait` looks for.
struct awaited { uint64_t stamp; uint64_t *signal_at, *in_hand_at; };

static int take_awaited(bf_receivers *r, int i, void *ctx) {
    struct awaited *a = ctx;
    return take(r, i, a->stamp, a->signal_at, a->in_hand_at);
}

int bf_gc_clients_wait(bf_receivers *r, uint64_t stamp_micros, uint64_t *signal_at, uint64_t *in_hand_at,
                       int timeout_ms) {
    int left = r->n;
    memset(r->got, 0, (size_t)r->n);
    for (int i = 0; i < r->n; i++) r->gc[i].getall_serial = 0;
    for (int i = 0; i < r->n; i++) left -= take(r, i, stamp_micros, signal_at, in_hand_at);
    struct awaited a = { stamp_micros, signal_at, in_hand_at };
    return bf_receivers_poll(r, left, timeout_ms, take_awaited, &a);
}

// MARK: The floor sender

struct bf_gc_floor {
    DBusConnection *c;
    int n;
    char **destinations;   // the clients' unique names
    char **clients;        // the client object path each client hears from
    char **locations;      // each client's current Location path ("/" before the first)
    DBusMessage **updated, **changed;   // the round's prebuilt signals
    unsigned round;
    uint64_t stamp, started;
    int all_answered;
    /// 0: the floor (every signal prebuilt before the clock starts). Else the C
    /// relay, which streams as the facade does (GeoClueFacade.deliver): each
    /// client's signals built as they go out, the processor given up once after
    /// this many LocationUpdated (LocationService.signalsBeforeYield).
    int yield_after;
    bf_rounds rounds;
};

void bf_gc_floor_stream(bf_gc_floor *f, int yield_after) { f->yield_after = yield_after; }

/// A unicast signal; the destination is set before the body, as the daemon does.
static DBusMessage *unicast_signal(const char *path, const char *iface, const char *member, const char *destination,
                                   DBusMessageIter *it) {
    DBusMessage *m = dbus_message_new_signal(path, iface, member);
    if (!m) return NULL;
    dbus_message_set_destination(m, destination);
    dbus_message_iter_init_append(m, it);
    return m;
}

/// LocationUpdated(old, new) from the client object.
static DBusMessage *location_updated(const char *client, const char *destination, const char *old, const char *new) {
    DBusMessageIter it;
    DBusMessage *m = unicast_signal(client, CLIENT_IFACE, "LocationUpdated", destination, &it);
    if (!m) return NULL;
    dbus_message_iter_append_basic(&it, DBUS_TYPE_OBJECT_PATH, &old);
    dbus_message_iter_append_basic(&it, DBUS_TYPE_OBJECT_PATH, &new);
    return m;
}

/// PropertiesChanged(CLIENT_IFACE, {Location: new}, []) from the client object.
static DBusMessage *location_changed(const char *client, const char *destination, const char *new) {
    DBusMessageIter it, dict, none;
    DBusMessage *m = unicast_signal(client, PROPERTIES_IFACE, "PropertiesChanged", destination, &it);
    if (!m) return NULL;
    dbus_message_iter_append_basic(&it, DBUS_TYPE_STRING, &CLIENT_IFACE);
    dbus_message_iter_open_container(&it, DBUS_TYPE_ARRAY, "{sv}", &dict);
    bf_put_variant(&dict, "Location", DBUS_TYPE_OBJECT_PATH, "o", &new);
    dbus_message_iter_close_container(&it, &dict);
    dbus_message_iter_open_container(&it, DBUS_TYPE_ARRAY, "s", &none);
    dbus_message_iter_close_container(&it, &none);
    return m;
}

static void put_double(DBusMessageIter *dict, const char *key, double v) { bf_put_variant(dict, key, DBUS_TYPE_DOUBLE, "d", &v); }

/// The GetAll reply of this round's Location objects, without reply serial and
/// destination: the same keys and types as the facade's (LocationProperties in
/// GeoConsentAPI, in GeoClue's order), Timestamp (seconds, microseconds).
static DBusMessage *location_reply_template(uint64_t stamp) {
    DBusMessage *m = dbus_message_new(DBUS_MESSAGE_TYPE_METHOD_RETURN);
    if (!m) return NULL;
    dbus_message_set_no_reply(m, TRUE);   // as dbus_message_new_method_return does
    DBusMessageIter it, dict, entry, var, tt;
    dbus_message_iter_init_append(m, &it);
    dbus_message_iter_open_container(&it, DBUS_TYPE_ARRAY, "{sv}", &dict);
    put_double(&dict, "Latitude", 52.52);
    put_double(&dict, "Longitude", 13.405);
    put_double(&dict, "Accuracy", 5);
    put_double(&dict, "Altitude", 40);
    put_double(&dict, "Speed", 5.14);
    put_double(&dict, "Heading", 90);
    const char *description = "", *key = "Timestamp";
    bf_put_variant(&dict, "Description", DBUS_TYPE_STRING, "s", &description);
    dbus_uint64_t s = stamp / 1000000u, us = stamp % 1000000u;
    dbus_message_iter_open_container(&dict, DBUS_TYPE_DICT_ENTRY, NULL, &entry);
    dbus_message_iter_append_basic(&entry, DBUS_TYPE_STRING, &key);
    dbus_message_iter_open_container(&entry, DBUS_TYPE_VARIANT, "(tt)", &var);
    dbus_message_iter_open_container(&var, DBUS_TYPE_STRUCT, NULL, &tt);
    dbus_message_iter_append_basic(&tt, DBUS_TYPE_UINT64, &s);
    dbus_message_iter_append_basic(&tt, DBUS_TYPE_UINT64, &us);
    dbus_message_iter_close_container(&var, &tt);
    dbus_message_iter_close_container(&entry, &var);
    dbus_message_iter_close_container(&dict, &entry);
    dbus_message_iter_close_container(&it, &dict);
    return m;
}

/// Answers what has arrived: each GetAll with a copy of `reply` (its body is
/// not marshalled again: only the reply serial and destination are set), any
/// other call with an empty reply. Returns how many GetAll were answered.
static int answer(DBusConnection *c, DBusMessage *reply) {
    int answered = 0;
    DBusMessage *m;
    while ((m = dbus_connection_pop_message(c))) {
        if (dbus_message_get_type(m) == DBUS_MESSAGE_TYPE_METHOD_CALL && !dbus_message_get_no_reply(m)) {
            DBusMessage *r;
            if (dbus_message_is_method_call(m, PROPERTIES_IFACE, "GetAll") && reply) {
                r = dbus_message_copy(reply);
                if (r) {
                    dbus_message_set_reply_serial(r, dbus_message_get_serial(m));
                    dbus_message_set_destination(r, dbus_message_get_sender(m));
                }
                answered++;
            } else {
                r = dbus_message_new_method_return(m);
            }
            if (r) { dbus_connection_send(c, r, NULL); dbus_message_unref(r); }
        }
        dbus_message_unref(m);
    }
    return answered;
}

static void floor_round(void *arg) {
    bf_gc_floor *f = arg;
    // Prebuilt before the clock starts: every client's LocationUpdated and
    // PropertiesChanged, and the GetAll reply's template.
    f->round++;
    int stream = f->yield_after > 0;
    char **fresh = calloc((size_t)f->n, sizeof *fresh);
    for (int i = 0; i < f->n; i++) {
        size_t len = strlen(f->clients[i]) + 32;
        fresh[i] = malloc(len);
        snprintf(fresh[i], len, "%s/Location/%u", f->clients[i], f->round);
        if (stream) continue;
        f->updated[i] = location_updated(f->clients[i], f->destinations[i], f->locations[i], fresh[i]);
        f->changed[i] = location_changed(f->clients[i], f->destinations[i], fresh[i]);
    }
    DBusMessage *reply = stream ? NULL : location_reply_template(f->stamp);
    int fd = -1;
    dbus_connection_get_unix_fd(f->c, &fd);

    f->started = bf_now();
    // As the facade: every LocationUpdated first; then, turn by turn, the GetAll
    // calls read by then are answered, and up to 16 PropertiesChanged follow
    // (the facade's GeoClueFacade.noticeBatch) until all are out.
    for (int i = 0; i < f->n; i++) {
        if (stream) f->updated[i] = location_updated(f->clients[i], f->destinations[i], f->locations[i], fresh[i]);
        if (f->updated[i]) { dbus_connection_send(f->c, f->updated[i], NULL); dbus_message_unref(f->updated[i]); }
        if (stream && i + 1 == f->yield_after) sched_yield();
    }
    if (stream) reply = location_reply_template(f->stamp);
    int answered = 0, changed = 0;
    uint64_t deadline = f->started + 5000000000u;
    for (;;) {
        dbus_connection_read_write(f->c, 0);
        answered += answer(f->c, reply);
        for (int k = 0; k < 16 && changed < f->n; k++, changed++) {
            if (stream) f->changed[changed] = location_changed(f->clients[changed], f->destinations[changed], fresh[changed]);
            if (f->changed[changed]) { dbus_connection_send(f->c, f->changed[changed], NULL); dbus_message_unref(f->changed[changed]); }
        }
        uint64_t now = bf_now();
        if ((answered >= f->n && changed >= f->n) || now >= deadline) break;
        if (changed < f->n) continue;   // more to send: read what came, without waiting
        short events = POLLIN | (dbus_connection_has_messages_to_send(f->c) ? POLLOUT : 0);
        struct pollfd p = { .fd = fd, .events = events };
        if (poll(&p, 1, (int)((deadline - now) / 1000000u) + 1) > 0 && !dbus_connection_read_write(f->c, 0)) break;
    }
    if (!stream) for (; changed < f->n; changed++) if (f->changed[changed]) dbus_message_unref(f->changed[changed]);
    dbus_connection_flush(f->c);
    f->all_answered = answered >= f->n;
    if (reply) dbus_message_unref(reply);
    for (int i = 0; i < f->n; i++) {
        free(f->locations[i]);
        f->locations[i] = fresh[i];
    }
    free(fresh);
}

bf_gc_floor *bf_gc_floor_start(const char *address, const char *const *destinations, int n,
                               char *error, int error_len) {
    bf_gc_floor *f = bf_gc_floor_open(address, destinations, n, error, error_len);
    if (f && bf_rounds_start(&f->rounds, floor_round, f, error, error_len) != 0) {
        bf_gc_floor_stop(f);
        return NULL;
    }
    return f;
}

bf_gc_floor *bf_gc_floor_open(const char *address, const char *const *destinations, int n,
                              char *error, int error_len) {
    DBusConnection *c = bf_open_registered(address, error, error_len);
    if (!c) return NULL;
    bf_gc_floor *f = calloc(1, sizeof *f);
    f->rounds.go = f->rounds.done = -1;   // no thread until bf_gc_floor_start starts one
    f->c = c;
    f->n = n;
    f->destinations = calloc((size_t)n, sizeof *f->destinations);
    f->clients = calloc((size_t)n, sizeof *f->clients);
    f->locations = calloc((size_t)n, sizeof *f->locations);
    f->updated = calloc((size_t)n, sizeof *f->updated);
    f->changed = calloc((size_t)n, sizeof *f->changed);
    for (int i = 0; i < n; i++) {
        char path[64];
        snprintf(path, sizeof path, "/org/freedesktop/GeoClue2/Client/%d", i + 1);
        f->destinations[i] = strdup(destinations[i]);
        f->clients[i] = strdup(path);
        f->locations[i] = strdup("/");
    }
    return f;
}

DBusConnection *bf_gc_floor_connection(bf_gc_floor *f) { return f->c; }

int bf_gc_floor_serve(bf_gc_floor *f, uint64_t stamp_micros) {
    f->stamp = stamp_micros;
    floor_round(f);
    return f->all_answered;
}

void bf_gc_floor_fire(bf_gc_floor *f, uint64_t stamp_micros) {
    f->stamp = stamp_micros;
    bf_rounds_fire(&f->rounds);
}

uint64_t bf_gc_floor_finish(bf_gc_floor *f) {
    bf_rounds_wait(&f->rounds);
    return f->all_answered ? f->started : 0;
}

void bf_gc_floor_stop(bf_gc_floor *f) {
    if (!f) return;
    bf_rounds_stop(&f->rounds);
    bf_close_connection(f->c);
    for (int i = 0; i < f->n; i++) {
        free(f->destinations[i]);
        free(f->clients[i]);
        free(f->locations[i]);
    }
    free(f->destinations);
    free(f->clients);
    free(f->locations);
    free(f->updated);
    free(f->changed);
    free(f);
}
