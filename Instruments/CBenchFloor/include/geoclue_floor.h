#ifndef GEOCONSENT_GEOCLUE_FLOOR_H
#define GEOCONSENT_GEOCLUE_FLOOR_H
// The GeoClue2 protocol in plain C on libdbus-1, for the bench's facade rows
// (docs/performance.md): the C receivers of bench_floor.h as GeoClue clients,
// and a floor sender that speaks the facade's side of a fix. Per client and fix
// that is four messages through the bus: LocationUpdated(old, new) and the
// client's PropertiesChanged of Location (both unicast to the client), the
// client's GetAll of the new Location object, and its reply.
#include "bench_floor.h"

// MARK: GeoClue clients

/// Makes every receiver a client of the GeoClue2 service `dest`, as where-am-i
/// does: Manager.GetClient, then Set DesktopId and RequestedAccuracyLevel on
/// the client, each waiting for its reply; then sends every client's Start at
/// once without waiting (a Start may wait for a consent agent that this thread
/// must not block: see bf_gc_clients_started). 0, or -1 (the reason in `error`).
int bf_gc_clients_setup(bf_receivers *r, const char *dest, const char *desktop_id, uint32_t level,
                        char *error, int error_len);
/// Reads Start replies for up to `timeout_ms`: how many are still missing, or
/// -1 when one failed (the reason in `error`).
int bf_gc_clients_started(bf_receivers *r, int timeout_ms, char *error, int error_len);
/// Receiver `i`'s client object path (owned by `r`).
const char *bf_gc_client_path(bf_receivers *r, int i);
/// One fix at every client: on LocationUpdated(old, new) a client calls
/// Properties.GetAll("org.freedesktop.GeoClue2.Location") on `new` at the
/// signal's sender; it is done when a reply whose Timestamp (seconds,
/// microseconds) is `stamp_micros` is in hand. `signal_at[i]`: bf_now() when
/// client i popped that LocationUpdated, `in_hand_at[i]` when it popped the
/// reply. Returns 0, or -1 at `timeout_ms`.
int bf_gc_clients_wait(bf_receivers *r, uint64_t stamp_micros, uint64_t *signal_at, uint64_t *in_hand_at,
                       int timeout_ms);

// MARK: The floor sender

/// A thread with its own connection that serves one fix to `n` GeoClue clients
/// (`destinations`) the way the facade does, as cheaply as libdbus allows.
typedef struct bf_gc_floor bf_gc_floor;

bf_gc_floor *bf_gc_floor_start(const char *address, const char *const *destinations, int n,
                               char *error, int error_len);
/// Fires one round: the thread prebuilds the round's messages (Timestamp
/// `stamp_micros`), takes its start time, sends every LocationUpdated, then,
/// as the facade does, answers the GetAll calls read by then and sends up to
/// 16 PropertiesChanged, turn after turn, until all `n` are answered and every
/// PropertiesChanged is out. Returns at once.
void bf_gc_floor_fire(bf_gc_floor *f, uint64_t stamp_micros);
/// Waits for the round to end; returns its start time (bf_now()), or 0 when
/// not every GetAll came within 5 s.
uint64_t bf_gc_floor_finish(bf_gc_floor *f);
void bf_gc_floor_stop(bf_gc_floor *f);

#endif
