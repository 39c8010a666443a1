#ifndef GEOCONSENT_FIX_CHURN_H
#define GEOCONSENT_FIX_CHURN_H
// Churn to a first fix in plain C on libdbus-1, for the bench's "facade churn"
// section (docs/performance.md): one client after another connects, starts
// location updates, waits for its first fix and leaves. The same loop runs
// against the daemon's GeoClue2 facade, against GeoClue 2.6 itself and, in the
// daemon's own protocol, against our own API, so that the rows differ only in
// the service.
#include <stdint.h>

/// The protocol a cycle speaks.
enum {
    /// GeoClue2: Manager.GetClient, Set DesktopId and RequestedAccuracyLevel
    /// (geoclue_floor.h), Client.Start, then the client's LocationUpdated.
    BF_CHURN_GEOCLUE = 0,
    /// geoconsentd's own: RequestOneTimeAuthorization and StartUpdates (each
    /// with an empty a{sv}), then LocationUpdated.
    BF_CHURN_OWN = 1,
};

/// The service a churn runs against.
typedef struct {
    int protocol;                 // BF_CHURN_GEOCLUE or BF_CHURN_OWN
    const char *dest;             // its bus name
    const char *path, *iface;     // BF_CHURN_OWN: its object and interface
    const char *desktop_id;       // BF_CHURN_GEOCLUE: the client's DesktopId
    uint32_t level;               // BF_CHURN_GEOCLUE: its RequestedAccuracyLevel
} bf_churn_service;

/// `cycles` clients, one after another, each on a private connection of its
/// own: connect (Hello), start updates, wait for the first LocationUpdated (a
/// LocationError fails the cycle), close. `cycle_nanos[i]`: cycle i's time from
/// before the connect to after the close. Returns 0, or -1 when a cycle failed
/// or had no fix within `timeout_ms` (the reason in `error`).
int bf_fix_churn(const char *address, const bf_churn_service *service, int cycles, uint64_t *cycle_nanos,
                 int timeout_ms, char *error, int error_len);

#endif
