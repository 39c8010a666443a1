#ifndef GEOCONSENT_SCALING_FLOOR_H
#define GEOCONSENT_SCALING_FLOOR_H
// The bench's scaling rows (Instruments/geoconsent-bench/Scaling.swift): fixes
// sent at a steady rate to up to 1,000 subscribers, where the next fix may be
// sent before every subscriber has the last one. bf_receivers_wait waits for one
// signal at a time on the caller's thread; the recorder instead reads every
// receiver on a thread of its own for the whole run and notes when each one
// popped each awaited signal, whichever came first.
#include "bench_floor.h"

/// A thread reading the receivers of a bf_receivers as soon as each is readable.
typedef struct bf_recorder bf_recorder;

/// Starts the thread. It records, for every signal named `member` whose
/// location "timestamp" is `stamps[k]` (`n_stamps` distinct values, of the
/// daemon's fixes and the floor's rounds alike), bf_now() when receiver i
/// popped it; everything else it reads is dropped. The receivers must not be
/// used by anyone else until bf_recorder_stop. NULL on failure (`error`).
bf_recorder *bf_recorder_start(bf_receivers *r, const char *member, const uint64_t *stamps, int n_stamps,
                               char *error, int error_len);
/// Waits until every receiver has popped the signal of `stamps[k]`, at most
/// `timeout_ms`; 0 when all have, else -1.
int bf_recorder_wait(bf_recorder *rec, int k, int timeout_ms);
/// Stops the thread and frees the recorder. `arrivals` (n_stamps × receivers,
/// fix-major: arrivals[k * n + i]) gets the times; 0 where none came.
void bf_recorder_stop(bf_recorder *rec, uint64_t *arrivals);

#endif
