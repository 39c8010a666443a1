// The benchmark's floors in plain C on libdbus-1; see include/bench_floor.h.
// Plain libdbus the way a lean C client uses it: private connections, messages
// built with iterators, dbus_connection_send (which writes at once when the
// socket takes it), dbus_connection_read_write + pop_message to receive.
#include "bench_floor_private.h"

#include <dbus/dbus.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

uint64_t bf_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void bf_set_error(char *error, int len, const char *what, DBusError *e) {
    if (error && len > 0) snprintf(error, (size_t)len, "%s: %s", what, e && e->message ? e->message : "failed");
    if (e && dbus_error_is_set(e)) dbus_error_free(e);
}

DBusConnection *bf_open_registered(const char *address, char *error, int error_len) {
    DBusError e;
    dbus_error_init(&e);
    DBusConnection *c = dbus_connection_open_private(address, &e);
    if (!c) { bf_set_error(error, error_len, "connect", &e); return NULL; }
    dbus_connection_set_exit_on_disconnect(c, FALSE);
    if (!dbus_bus_register(c, &e)) {
        bf_set_error(error, error_len, "Hello", &e);
        dbus_connection_close(c);
        dbus_connection_unref(c);
        return NULL;
    }
    return c;
}

void bf_close_connection(DBusConnection *c) {
    dbus_connection_close(c);
    dbus_connection_unref(c);
}

/// A method call with one empty a{sv} (the options argument of our calls).
static DBusMessage *call_with_empty_options(const char *dest, const char *path, const char *iface, const char *member) {
    DBusMessage *m = dbus_message_new_method_call(dest, path, iface, member);
    if (!m) return NULL;
    DBusMessageIter it, dict;
    dbus_message_iter_init_append(m, &it);
    dbus_message_iter_open_container(&it, DBUS_TYPE_ARRAY, "{sv}", &dict);
    dbus_message_iter_close_container(&it, &dict);
    return m;
}

// MARK: Receivers

bf_receivers *bf_receivers_open(const char *address, int n, char *error, int error_len) {
    bf_receivers *r = calloc(1, sizeof *r);
    r->c = calloc((size_t)n, sizeof *r->c);
    r->fds = calloc((size_t)n, sizeof *r->fds);
    r->got = calloc((size_t)n, 1);
    for (int i = 0; i < n; i++) {
        r->c[i] = bf_open_registered(address, error, error_len);
        if (!r->c[i]) { bf_receivers_close(r); return NULL; }
        r->n = i + 1;
        int fd = -1;
        dbus_connection_get_unix_fd(r->c[i], &fd);
        r->fds[i].fd = fd;
    }
    return r;
}

void bf_receivers_close(bf_receivers *r) {
    if (!r) return;
    if (r->release_extra) r->release_extra(r);
    for (int i = 0; i < r->n; i++) bf_close_connection(r->c[i]);
    free(r->c);
    free(r->fds);
    free(r->got);
    free(r);
}

const char *bf_receivers_name(bf_receivers *r, int i) { return dbus_bus_get_unique_name(r->c[i]); }

int bf_receivers_call_all(bf_receivers *r, const char *dest, const char *path, const char *iface,
                          const char *member, int timeout_ms) {
    dbus_uint32_t *serials = calloc((size_t)r->n, sizeof *serials);
    struct pollfd *p = calloc((size_t)r->n, sizeof *p);
    int failed = 0, left = r->n;
    for (int i = 0; i < r->n; i++) {
        DBusMessage *m = call_with_empty_options(dest, path, iface, member);
        r->got[i] = 0;
        if (!m || !dbus_connection_send(r->c[i], m, &serials[i])) { failed++; left--; r->got[i] = 1; }
        if (m) dbus_message_unref(m);
    }
    uint64_t deadline = bf_now() + (uint64_t)timeout_ms * 1000000u;
    while (left > 0 && bf_now() < deadline) {
        int k = 0;
        for (int i = 0; i < r->n; i++) {
            if (r->got[i]) continue;
            dbus_connection_read_write(r->c[i], 0);
            DBusMessage *m;
            while ((m = dbus_connection_pop_message(r->c[i]))) {
                if (!r->got[i] && dbus_message_get_reply_serial(m) == serials[i]) {
                    r->got[i] = 1;
                    left--;
                    if (dbus_message_get_type(m) == DBUS_MESSAGE_TYPE_ERROR) failed++;
                }
                dbus_message_unref(m);
            }
            if (!r->got[i]) p[k++] = (struct pollfd){ .fd = r->fds[i].fd, .events = POLLIN };
        }
        if (k > 0) poll(p, (nfds_t)k, 50);
    }
    free(p);
    free(serials);
    return failed + left;
}

void bf_receivers_drain(bf_receivers *r) {
    for (int i = 0; i < r->n; i++) {
        dbus_connection_read_write(r->c[i], 0);
        DBusMessage *m;
        while ((m = dbus_connection_pop_message(r->c[i]))) dbus_message_unref(m);
    }
}

int bf_dict_variant(DBusMessage *m, const char *key, DBusMessageIter *var) {
    DBusMessageIter it, dict;
    if (!dbus_message_iter_init(m, &it) || dbus_message_iter_get_arg_type(&it) != DBUS_TYPE_ARRAY) return 0;
    dbus_message_iter_recurse(&it, &dict);
    while (dbus_message_iter_get_arg_type(&dict) == DBUS_TYPE_DICT_ENTRY) {
        DBusMessageIter entry;
        const char *k = NULL;
        dbus_message_iter_recurse(&dict, &entry);
        if (dbus_message_iter_get_arg_type(&entry) != DBUS_TYPE_STRING) return 0;
        dbus_message_iter_get_basic(&entry, &k);
        if (strcmp(k, key) == 0 && dbus_message_iter_next(&entry) &&
            dbus_message_iter_get_arg_type(&entry) == DBUS_TYPE_VARIANT) {
            dbus_message_iter_recurse(&entry, var);
            return 1;
        }
        dbus_message_iter_next(&dict);
    }
    return 0;
}

/// The value of `key` in the a{sv} that is the message's first argument, when it
/// is a basic value of `type`: stored at `out`, and 1; else 0.
static int first_dict_value(DBusMessage *m, const char *key, int type, void *out) {
    DBusMessageIter var;
    if (!bf_dict_variant(m, key, &var) || dbus_message_iter_get_arg_type(&var) != type) return 0;
    dbus_message_iter_get_basic(&var, out);
    return 1;
}

/// The "timestamp" (uint64) of a location a{sv} that is the message's first argument; 0 if none.
static uint64_t location_timestamp(DBusMessage *m) {
    dbus_uint64_t t = 0;
    return first_dict_value(m, "timestamp", DBUS_TYPE_UINT64, &t) ? t : 0;
}

/// Pops what receiver `i` has; records the arrival of the awaited signal.
static int take(bf_receivers *r, int i, const char *member, uint64_t stamp, uint64_t *arrivals) {
    int found = 0;
    DBusMessage *m;
    while ((m = dbus_connection_pop_message(r->c[i]))) {
        if (!r->got[i] && dbus_message_get_type(m) == DBUS_MESSAGE_TYPE_SIGNAL &&
            dbus_message_has_member(m, member) && location_timestamp(m) == stamp) {
            arrivals[i] = bf_now();
            r->got[i] = 1;
            found = 1;
        }
        dbus_message_unref(m);
    }
    return found;
}

int bf_receivers_poll(bf_receivers *r, int left, int timeout_ms, int (*take)(bf_receivers *, int, void *), void *ctx) {
    struct pollfd *p = calloc((size_t)r->n, sizeof *p);
    int *index = calloc((size_t)r->n, sizeof *index);
    uint64_t deadline = bf_now() + (uint64_t)timeout_ms * 1000000u;
    while (left > 0) {
        uint64_t now = bf_now();
        if (now >= deadline) break;
        int k = 0;
        for (int i = 0; i < r->n; i++) {
            if (r->got[i]) continue;
            p[k] = (struct pollfd){ .fd = r->fds[i].fd, .events = POLLIN };
            index[k++] = i;
        }
        int ms = (int)((deadline - now) / 1000000u) + 1;
        if (poll(p, (nfds_t)k, ms) <= 0) continue;
        for (int j = 0; j < k; j++) {
            if (!p[j].revents) continue;
            int i = index[j];
            dbus_connection_read_write(r->c[i], 0);
            left -= take(r, i, ctx);
        }
    }
    free(p);
    free(index);
    return left == 0 ? 0 : -1;
}

/// What `bf_receivers_wait` looks for.
struct awaited { const char *member; uint64_t stamp; uint64_t *arrivals; };

static int take_awaited(bf_receivers *r, int i, void *ctx) {
    struct awaited *a = ctx;
    return take(r, i, a->member, a->stamp, a->arrivals);
}

int bf_receivers_wait(bf_receivers *r, const char *member, uint64_t stamp, uint64_t *arrivals, int timeout_ms) {
    int left = r->n;
    memset(r->got, 0, (size_t)r->n);
    for (int i = 0; i < r->n; i++) left -= take(r, i, member, stamp, arrivals);
    struct awaited a = { member, stamp, arrivals };
    return bf_receivers_poll(r, left, timeout_ms, take_awaited, &a);
}

// MARK: Sender

struct bf_sender {
    DBusConnection *c;
    int n;
    char **destinations;
    char *path, *iface, *member;
    DBusMessage **batch;   // the round's signals
    uint64_t stamp, started;
    bf_rounds rounds;
};

static void *rounds_main(void *arg) {
    bf_rounds *r = arg;
    for (;;) {
        uint64_t v;
        if (read(r->go, &v, sizeof v) != sizeof v) { if (errno == EINTR) continue; break; }
        if (r->stop) break;
        r->round(r->arg);
        v = 1;
        (void)!write(r->done, &v, sizeof v);
    }
    return NULL;
}

int bf_rounds_start(bf_rounds *r, void (*round)(void *), void *arg, char *error, int error_len) {
    r->round = round;
    r->arg = arg;
    r->go = eventfd(0, EFD_CLOEXEC);
    r->done = eventfd(0, EFD_CLOEXEC);
    if (r->go < 0 || r->done < 0 || pthread_create(&r->thread, NULL, rounds_main, r) != 0) {
        if (error && error_len > 0) snprintf(error, (size_t)error_len, "cannot start a floor thread");
        r->thread = 0;
        return -1;
    }
    return 0;
}

void bf_rounds_fire(bf_rounds *r) {
    uint64_t v = 1;
    (void)!write(r->go, &v, sizeof v);
}

void bf_rounds_wait(bf_rounds *r) {
    uint64_t v;
    while (read(r->done, &v, sizeof v) != sizeof v && errno == EINTR) {}
}

void bf_rounds_stop(bf_rounds *r) {
    if (r->thread) {
        r->stop = 1;
        bf_rounds_fire(r);
        pthread_join(r->thread, NULL);
        r->thread = 0;
    }
    if (r->go >= 0) close(r->go);
    if (r->done >= 0) close(r->done);
    r->go = r->done = -1;
}

void bf_put_variant(DBusMessageIter *dict, const char *key, int type, const char *sig, const void *value) {
    DBusMessageIter entry, var;
    dbus_message_iter_open_container(dict, DBUS_TYPE_DICT_ENTRY, NULL, &entry);
    dbus_message_iter_append_basic(&entry, DBUS_TYPE_STRING, &key);
    dbus_message_iter_open_container(&entry, DBUS_TYPE_VARIANT, sig, &var);
    dbus_message_iter_append_basic(&var, type, value);
    dbus_message_iter_close_container(&entry, &var);
    dbus_message_iter_close_container(dict, &entry);
}

static void put_double(DBusMessageIter *dict, const char *key, double v) { bf_put_variant(dict, key, DBUS_TYPE_DOUBLE, "d", &v); }
static void put_string(DBusMessageIter *dict, const char *key, const char *v) { bf_put_variant(dict, key, DBUS_TYPE_STRING, "s", &v); }

DBusMessage *bf_location_signal(const char *path, const char *iface, const char *member,
                                const char *destination, uint64_t stamp) {
    DBusMessage *m = dbus_message_new_signal(path, iface, member);
    if (!m) return NULL;
    if (destination) dbus_message_set_destination(m, destination);   // before the body, as the daemon does
    DBusMessageIter it, dict;
    dbus_message_iter_init_append(m, &it);
    dbus_message_iter_open_container(&it, DBUS_TYPE_ARRAY, "{sv}", &dict);
    put_string(&dict, "accuracy-authorization", "full");
    put_double(&dict, "altitude", 40);
    put_double(&dict, "course", 90);
    put_double(&dict, "course-accuracy", 1);
    put_double(&dict, "ellipsoidal-altitude", 87);
    put_string(&dict, "fix", "3d");
    put_double(&dict, "horizontal-accuracy", 5);
    put_double(&dict, "latitude", 52.52);
    put_double(&dict, "longitude", 13.405);
    put_double(&dict, "speed", 5.14);
    put_double(&dict, "speed-accuracy", 0.5);
    dbus_uint64_t t = stamp;
    bf_put_variant(&dict, "timestamp", DBUS_TYPE_UINT64, "t", &t);
    put_double(&dict, "vertical-accuracy", 8);
    dbus_message_iter_close_container(&it, &dict);
    return m;
}

static void sender_round(void *arg) {
    bf_sender *s = arg;
    for (int i = 0; i < s->n; i++) s->batch[i] = bf_location_signal(s->path, s->iface, s->member, s->destinations[i], s->stamp);
    s->started = bf_now();
    for (int i = 0; i < s->n; i++) {
        if (s->batch[i]) { dbus_connection_send(s->c, s->batch[i], NULL); dbus_message_unref(s->batch[i]); }
    }
    dbus_connection_flush(s->c);
    DBusMessage *m;
    while ((m = dbus_connection_pop_message(s->c))) dbus_message_unref(m);
}

bf_sender *bf_sender_start(const char *address, const char *const *destinations, int n,
                           const char *path, const char *iface, const char *member,
                           char *error, int error_len) {
    DBusConnection *c = bf_open_registered(address, error, error_len);
    if (!c) return NULL;
    bf_sender *s = calloc(1, sizeof *s);
    s->c = c;
    s->n = n;
    s->destinations = calloc((size_t)n, sizeof *s->destinations);
    for (int i = 0; i < n; i++) s->destinations[i] = strdup(destinations[i]);
    s->batch = calloc((size_t)n, sizeof *s->batch);
    s->path = strdup(path);
    s->iface = strdup(iface);
    s->member = strdup(member);
    if (bf_rounds_start(&s->rounds, sender_round, s, error, error_len) != 0) {
        bf_sender_stop(s);
        return NULL;
    }
    return s;
}

void bf_sender_fire(bf_sender *s, uint64_t stamp) {
    s->stamp = stamp;
    bf_rounds_fire(&s->rounds);
}

uint64_t bf_sender_finish(bf_sender *s) {
    bf_rounds_wait(&s->rounds);
    return s->started;
}

void bf_sender_stop(bf_sender *s) {
    if (!s) return;
    bf_rounds_stop(&s->rounds);
    bf_close_connection(s->c);
    for (int i = 0; i < s->n; i++) free(s->destinations[i]);
    free(s->destinations);
    free(s->batch);
    free(s->path);
    free(s->iface);
    free(s->member);
    free(s);
}

// MARK: Echo service

enum { BF_ECHO_SEEN = 64 };

struct bf_echo {
    DBusConnection *c;
    int stopfd;
    pthread_t thread;
    int identify;                         // 1: ask the bus for each new caller's credentials first;
                                          // 2: and read its /proc through a helper thread
    bf_proc_helper *helper;               // with identify = 2
    char *seen[BF_ECHO_SEEN];             // the last callers asked about (a ring)
    int next_seen;
    long identified;                      // callers identified (atomic: read by another thread)
};

/// The caller's PID from a GetConnectionCredentials reply (its a{sv}); 0 if none.
static uint32_t credentials_pid(DBusMessage *reply) {
    dbus_uint32_t pid = 0;
    return first_dict_value(reply, "ProcessID", DBUS_TYPE_UINT32, &pid) ? pid : 0;
}

/// What a service that must know its caller does before answering a new
/// connection's first call, at the least: one GetConnectionCredentials round
/// trip to the bus (dbus-daemon puts no credentials in the message itself),
/// and with identify = 2 the /proc reads an app's identity takes, through a
/// helper (one more round trip), as the daemon's privilege separation does.
static int identify_once(bf_echo *e, const char *sender) {
    if (!sender) return 0;
    for (int i = 0; i < BF_ECHO_SEEN; i++) if (e->seen[i] && strcmp(e->seen[i], sender) == 0) return 1;
    DBusMessage *q = dbus_message_new_method_call(DBUS_SERVICE_DBUS, DBUS_PATH_DBUS, DBUS_INTERFACE_DBUS,
                                                  "GetConnectionCredentials");
    if (!q) return 0;
    dbus_message_append_args(q, DBUS_TYPE_STRING, &sender, DBUS_TYPE_INVALID);
    DBusError err;
    dbus_error_init(&err);
    DBusMessage *r = dbus_connection_send_with_reply_and_block(e->c, q, 10000, &err);
    dbus_message_unref(q);
    if (!r) { dbus_error_free(&err); return 0; }
    uint32_t pid = credentials_pid(r);
    dbus_message_unref(r);
    if (e->helper && (pid == 0 || !bf_proc_helper_ask(e->helper, pid))) return 0;
    __atomic_fetch_add(&e->identified, 1, __ATOMIC_RELAXED);
    free(e->seen[e->next_seen]);
    e->seen[e->next_seen] = strdup(sender);
    e->next_seen = (e->next_seen + 1) % BF_ECHO_SEEN;
    return 1;
}

static void *echo_main(void *arg) {
    bf_echo *e = arg;
    int fd = -1;
    dbus_connection_get_unix_fd(e->c, &fd);
    for (;;) {
        struct pollfd p[2] = { { .fd = fd, .events = POLLIN }, { .fd = e->stopfd, .events = POLLIN } };
        if (poll(p, 2, -1) < 0 && errno != EINTR) break;
        if (p[1].revents) break;
        if (!p[0].revents) continue;
        if (!dbus_connection_read_write(e->c, 0)) break;
        DBusMessage *m;
        while ((m = dbus_connection_pop_message(e->c))) {
            if (dbus_message_get_type(m) == DBUS_MESSAGE_TYPE_METHOD_CALL && !dbus_message_get_no_reply(m)) {
                DBusMessage *reply = !e->identify || identify_once(e, dbus_message_get_sender(m))
                    ? dbus_message_new_method_return(m)
                    : dbus_message_new_error(m, DBUS_ERROR_FAILED, "no credentials");
                if (reply) { dbus_connection_send(e->c, reply, NULL); dbus_message_unref(reply); }
            }
            dbus_message_unref(m);
        }
        if (dbus_connection_has_messages_to_send(e->c)) dbus_connection_flush(e->c);
    }
    return NULL;
}

bf_echo *bf_echo_start(const char *address, int identify, char *error, int error_len) {
    DBusConnection *c = bf_open_registered(address, error, error_len);
    if (!c) return NULL;
    bf_echo *e = calloc(1, sizeof *e);
    e->c = c;
    e->identify = identify;
    if (identify >= 2 && !(e->helper = bf_proc_helper_start())) {
        if (error && error_len > 0) snprintf(error, (size_t)error_len, "cannot start the /proc helper thread");
        bf_close_connection(c);
        free(e);
        return NULL;
    }
    e->stopfd = eventfd(0, EFD_CLOEXEC);
    if (e->stopfd < 0 || pthread_create(&e->thread, NULL, echo_main, e) != 0) {
        if (error && error_len > 0) snprintf(error, (size_t)error_len, "cannot start the echo thread");
        bf_close_connection(c);
        if (e->stopfd >= 0) close(e->stopfd);
        bf_proc_helper_stop(e->helper);
        free(e);
        return NULL;
    }
    return e;
}

const char *bf_echo_name(bf_echo *e) { return dbus_bus_get_unique_name(e->c); }

long bf_echo_identified(bf_echo *e) { return __atomic_load_n(&e->identified, __ATOMIC_RELAXED); }

void bf_echo_stop(bf_echo *e) {
    if (!e) return;
    uint64_t v = 1;
    (void)!write(e->stopfd, &v, sizeof v);
    pthread_join(e->thread, NULL);
    bf_close_connection(e->c);
    close(e->stopfd);
    bf_proc_helper_stop(e->helper);
    for (int i = 0; i < BF_ECHO_SEEN; i++) free(e->seen[i]);
    free(e);
}

// MARK: Churn

int bf_call_and_wait(DBusConnection *c, const char *dest, const char *path, const char *iface, const char *member,
                         char *error, int error_len) {
    DBusMessage *m = call_with_empty_options(dest, path, iface, member);
    if (!m) { bf_set_error(error, error_len, member, NULL); return 0; }
    DBusError e;
    dbus_error_init(&e);
    DBusMessage *reply = dbus_connection_send_with_reply_and_block(c, m, 10000, &e);
    dbus_message_unref(m);
    if (!reply) { bf_set_error(error, error_len, member, &e); return 0; }
    dbus_message_unref(reply);
    return 1;
}

uint64_t bf_churn(const char *address, const char *dest, const char *path, const char *iface,
                  const char *first, const char *second, int cycles, char *error, int error_len) {
    uint64_t t0 = bf_now();
    for (int i = 0; i < cycles; i++) {
        DBusConnection *c = bf_open_registered(address, error, error_len);
        if (!c) return 0;
        int ok = bf_call_and_wait(c, dest, path, iface, first, error, error_len) &&
                 bf_call_and_wait(c, dest, path, iface, second, error, error_len);
        bf_close_connection(c);
        if (!ok) return 0;
    }
    return bf_now() - t0;
}

int bf_first_calls(const char *address, const char *dest, const char *path, const char *iface, const char *member,
                   int n, uint64_t *nanos, char *error, int error_len) {
    for (int i = 0; i < n; i++) {
        DBusConnection *c = bf_open_registered(address, error, error_len);
        if (!c) return 0;
        uint64_t t0 = bf_now();
        int ok = bf_call_and_wait(c, dest, path, iface, member, error, error_len);
        nanos[i] = bf_now() - t0;
        bf_close_connection(c);
        if (!ok) return 0;
    }
    return 1;
}
