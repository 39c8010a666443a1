#ifndef GEOCONSENT_BENCH_FLOOR_PRIVATE_H
#define GEOCONSENT_BENCH_FLOOR_PRIVATE_H
// What bench_floor.c shares with geoclue_floor.c: the receivers' layout and the
// connection helpers. Not part of the module's interface (include/ is).
#include "bench_floor.h"

#include <dbus/dbus.h>
#include <poll.h>
#include <pthread.h>

/// A receiver's GeoClue client state (geoclue_floor.c); NULL until set up.
typedef struct bf_gc_state bf_gc_state;

struct bf_receivers {
    int n;
    DBusConnection **c;
    struct pollfd *fds;
    char *got;
    bf_gc_state *gc;   // one per receiver once they are GeoClue clients
    /// Frees what a floor set up on the receivers (its own cleanup, set by it):
    /// bench_floor.c calls it on close and knows nothing of what it frees.
    void (*release_extra)(bf_receivers *r);
};

/// Writes "what: message" into `error` and frees `e` if set.
void bf_set_error(char *error, int len, const char *what, DBusError *e);
/// A private connection to `address`, registered with the bus; NULL on failure.
DBusConnection *bf_open_registered(const char *address, char *error, int error_len);
void bf_close_connection(DBusConnection *c);
/// Finds `key` in the a{sv} that is the message's first argument: 1 with `var`
/// inside its variant, else 0 (no such key, or not an a{sv} of string keys).
int bf_dict_variant(DBusMessage *m, const char *key, DBusMessageIter *var);
/// Appends the entry {key: variant of `sig`} to an open a{sv}.
void bf_put_variant(DBusMessageIter *dict, const char *key, int type, const char *sig, const void *value);
/// Sends `m` (consumed) and waits for the reply (geoclue_floor.c); NULL on an
/// error reply or none in 10 s (the reason in `error`).
DBusMessage *bf_call_blocking(DBusConnection *c, DBusMessage *m, const char *what, char *error, int error_len);
/// Calls `member` on `dest` with one empty a{sv} and waits for the reply
/// (bench_floor.c); 1, or 0 with the reason in `error`.
int bf_call_and_wait(DBusConnection *c, const char *dest, const char *path, const char *iface, const char *member,
                     char *error, int error_len);
/// Makes connection `c` a GeoClue client of `dest` as where-am-i does
/// (geoclue_floor.c): Manager.GetClient, then Set DesktopId and
/// RequestedAccuracyLevel, each waiting for its reply. The client's path
/// (malloc'd), or NULL with the reason in `error`.
char *bf_gc_become_client(DBusConnection *c, const char *dest, const char *desktop_id, uint32_t level,
                          char *error, int error_len);
/// A location signal with the same 13 keys, in the same order, as the daemon's
/// location dictionary, and "timestamp" = `stamp`; no destination if NULL.
DBusMessage *bf_location_signal(const char *path, const char *iface, const char *member,
                                const char *destination, uint64_t stamp);
/// A thread behind a socketpair that reads a caller's /proc identity
/// (proc_helper_floor.c): the identity helper's part of the churn reference.
typedef struct bf_proc_helper bf_proc_helper;
bf_proc_helper *bf_proc_helper_start(void);
/// One round trip: the thread reads /proc/`pid`; 1 if the process was there.
int bf_proc_helper_ask(bf_proc_helper *h, uint32_t pid);
void bf_proc_helper_stop(bf_proc_helper *h);
/// The GeoClue floor without its thread (geoclue_floor.c), for the C relay's
/// GeoClue mode: opened on its own connection, then served one fix at a time on
/// the caller's thread (the same round as a fired one, messages built after the
/// fix came); 1 when every client's GetAll was answered. Freed by bf_gc_floor_stop.
typedef struct bf_gc_floor bf_gc_floor;
bf_gc_floor *bf_gc_floor_open(const char *address, const char *const *destinations, int n,
                              char *error, int error_len);
DBusConnection *bf_gc_floor_connection(bf_gc_floor *f);
int bf_gc_floor_serve(bf_gc_floor *f, uint64_t stamp_micros);
/// Makes `f` the C relay's: it streams (see `yield_after` in geoclue_floor.c).
void bf_gc_floor_stream(bf_gc_floor *f, int yield_after);
void bf_gc_floor_stop(bf_gc_floor *f);

/// Polls the receivers not done yet (`got` unset) and calls `take(r, i, ctx)` for
/// each one with something to read, until `left` are done (each `take` returns
/// how many it finished, 0 or 1) or `timeout_ms` have passed. 0 when all are done.
int bf_receivers_poll(bf_receivers *r, int left, int timeout_ms, int (*take)(bf_receivers *, int, void *), void *ctx);

/// A thread with its own work that runs one round each time it is fired and
/// says when the round is over: the floor senders of both files.
typedef struct {
    int go, done;          // eventfds: main -> thread, thread -> main
    volatile int stop;
    pthread_t thread;      // 0 when not started
    void (*round)(void *arg);
    void *arg;
} bf_rounds;

/// Starts the thread; 0 on success, else -1 with the reason in `error`.
int bf_rounds_start(bf_rounds *r, void (*round)(void *), void *arg, char *error, int error_len);
/// Runs one round on the thread; returns at once.
void bf_rounds_fire(bf_rounds *r);
/// Waits until the round fired last is over.
void bf_rounds_wait(bf_rounds *r);
/// Ends the thread (if it runs) and closes the eventfds.
void bf_rounds_stop(bf_rounds *r);

#endif
