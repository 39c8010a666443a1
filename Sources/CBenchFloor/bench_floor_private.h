#ifndef GEOCONSENT_BENCH_FLOOR_PRIVATE_H
#define GEOCONSENT_BENCH_FLOOR_PRIVATE_H
// What bench_floor.c shares with geoclue_floor.c: the receivers' layout and the
// connection helpers. Not part of the module's interface (include/ is).
#include "bench_floor.h"

#include <dbus/dbus.h>
#include <poll.h>

/// A receiver's GeoClue client state (geoclue_floor.c); NULL until set up.
typedef struct bf_gc_state bf_gc_state;

struct bf_receivers {
    int n;
    DBusConnection **c;
    struct pollfd *fds;
    char *got;
    bf_gc_state *gc;   // one per receiver once they are GeoClue clients
};

/// Writes "what: message" into `error` and frees `e` if set.
void bf_set_error(char *error, int len, const char *what, DBusError *e);
/// A private connection to `address`, registered with the bus; NULL on failure.
DBusConnection *bf_open_registered(const char *address, char *error, int error_len);
void bf_close_connection(DBusConnection *c);
/// Appends the entry {key: variant of `sig`} to an open a{sv}.
void bf_put_variant(DBusMessageIter *dict, const char *key, int type, const char *sig, const void *value);
/// Frees the receivers' GeoClue state (geoclue_floor.c).
void bf_gc_state_free(bf_receivers *r);

#endif
