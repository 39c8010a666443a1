#ifndef GEOCONSENT_BENCH_FLOOR_H
#define GEOCONSENT_BENCH_FLOOR_H
// The benchmark's floors in plain C on libdbus-1 (make bench, docs/performance.md):
// receivers that are as cheap as a libdbus client can be, a sender of prebuilt
// unicast signals, an echo service and a churn loop. The daemon is measured with
// the same receivers and the same churn loop, so only what stands in the middle
// differs between a row and its floor. The GeoClue2 protocol over the same
// receivers is in geoclue_floor.h.
#include <stdint.h>

/// Monotonic nanoseconds (CLOCK_MONOTONIC, the clock the Swift bench uses).
uint64_t bf_now(void);

// MARK: Receivers

/// `n` private connections to the bus at `address`, each registered (Hello).
typedef struct bf_receivers bf_receivers;

/// Opens the receivers; NULL on failure (the reason in `error`, `error_len` bytes).
bf_receivers *bf_receivers_open(const char *address, int n, char *error, int error_len);
void bf_receivers_close(bf_receivers *r);
/// The unique name of receiver `i` (owned by `r`).
const char *bf_receivers_name(bf_receivers *r, int i);
/// Calls `member` with one empty a{sv} from every receiver at once (pipelined) and
/// waits for all replies. Returns how many failed (error reply or timeout).
int bf_receivers_call_all(bf_receivers *r, const char *dest, const char *path, const char *iface,
                          const char *member, int timeout_ms);
/// Reads and drops whatever has arrived.
void bf_receivers_drain(bf_receivers *r);
/// Waits until every receiver has a signal named `member` whose first argument is
/// an a{sv} with "timestamp" = `stamp` (uint64). `arrivals[i]`: bf_now() when
/// receiver i popped it. Returns 0, or -1 at `timeout_ms`.
int bf_receivers_wait(bf_receivers *r, const char *member, uint64_t stamp, uint64_t *arrivals, int timeout_ms);

// MARK: Sender

/// A thread with its own connection that sends one prebuilt signal to each of
/// its destinations when fired.
typedef struct bf_sender bf_sender;

/// Starts the sender for `n` destinations; the signals have `path`, `iface`,
/// `member` and a 13-entry location a{sv} like the daemon's. NULL on failure.
bf_sender *bf_sender_start(const char *address, const char *const *destinations, int n,
                           const char *path, const char *iface, const char *member,
                           char *error, int error_len);
/// Fires one round: the thread builds the n messages (timestamp `stamp`), then
/// takes its start time and sends them back to back. Returns at once.
void bf_sender_fire(bf_sender *s, uint64_t stamp);
/// Waits for the round to be sent; returns its start time (bf_now()).
uint64_t bf_sender_finish(bf_sender *s);
void bf_sender_stop(bf_sender *s);

// MARK: Echo service and churn

/// A thread with its own connection answering every method call at once with an
/// empty reply: the cheapest service a call can reach through the bus. With
/// `identify` 1, it first asks the bus for the credentials of a caller it has
/// not seen (GetConnectionCredentials, one round trip, blocking): the cheapest
/// service that knows who calls it, as ours must. With 2, it also has a helper
/// thread read that caller's /proc (stat, exe, root/.flatpak-info, cgroup) over
/// a socketpair: the cheapest that also separates the reading, as ours does.
typedef struct bf_echo bf_echo;

bf_echo *bf_echo_start(const char *address, int identify, char *error, int error_len);
const char *bf_echo_name(bf_echo *e);
/// How many callers an identifying echo has asked the bus about so far.
long bf_echo_identified(bf_echo *e);
void bf_echo_stop(bf_echo *e);

/// `cycles` times: open a private connection, Hello, call `first` then `second`
/// on `dest` (each with one empty a{sv}, waiting for the reply), close. Returns
/// the total nanoseconds, or 0 on failure (the reason in `error`).
uint64_t bf_churn(const char *address, const char *dest, const char *path, const char *iface,
                  const char *first, const char *second, int cycles, char *error, int error_len);

/// `n` times: open a private connection and say Hello (not timed), call `member`
/// on `dest` with one empty a{sv} and wait for its reply (timed: nanoseconds into
/// `nanos[i]`), close. The first call of a new connection, as an app's first tap
/// is. Returns 1, or 0 on failure (the reason in `error`).
int bf_first_calls(const char *address, const char *dest, const char *path, const char *iface, const char *member,
                   int n, uint64_t *nanos, char *error, int error_len);

// MARK: Relay

/// The loop of the C relay process (`geoconsent-bench --relay-c`): the least a
/// process in the daemon's place can do for a fan-out. It reads gpsd's JSON on
/// `gpsd_fd`, and for each TPV builds one location signal (13 keys, the TPV's
/// time as "timestamp" in µs) without a destination, then sends a copy to each of
/// the `n` destinations, giving up the processor once after the first
/// `yield_after` (as the daemon does). No libgps, no consent, no filters.
/// With `geoclue`, the destinations are GeoClue clients (geoclue_floor.h) and
/// each fix is served to them as the GeoClue floor serves one (four messages a
/// client), the messages built after the fix came; `path`, `iface`, `member`
/// and `yield_after` are then unused.
/// Prints "ready" on stdout once registered on the bus. Returns 0 when gpsd
/// closes the connection, -1 with the reason in `error` on any other end.
int bf_relay_run(const char *address, int gpsd_fd, const char *const *destinations, int n,
                 const char *path, const char *iface, const char *member, int yield_after, int geoclue,
                 char *error, int error_len);

#endif
