// The recorder of the scaling rows (include/scaling_floor.h).
#include "bench_floor_private.h"
#include "scaling_floor.h"

#include <dbus/dbus.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

struct bf_recorder {
    bf_receivers *r;
    char *member;
    uint64_t *stamps;
    int n_stamps;
    uint64_t *arrivals;   // n_stamps × r->n, fix-major
    int *got;             // per stamp: how many receivers have it (under lock)
    int epfd, stopfd;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t changed;
};

/// The index of `stamp` in `stamps`, or -1. Fixes arrive in order, so the search
/// starts where the last one was found.
static int stamp_index(bf_recorder *rec, uint64_t stamp, int *hint) {
    for (int j = 0; j < rec->n_stamps; j++) {
        int k = (*hint + j) % rec->n_stamps;
        if (rec->stamps[k] == stamp) { *hint = k; return k; }
    }
    return -1;
}

/// Pops everything receiver `i` has read and records the awaited signals.
static void take_all(bf_recorder *rec, int i, int *hint) {
    DBusConnection *c = rec->r->c[i];
    DBusMessage *m;
    while ((m = dbus_connection_pop_message(c))) {
        uint64_t now = bf_now();
        DBusMessageIter var;
        dbus_uint64_t stamp = 0;
        if (dbus_message_get_type(m) == DBUS_MESSAGE_TYPE_SIGNAL && dbus_message_has_member(m, rec->member) &&
            bf_dict_variant(m, "timestamp", &var) && dbus_message_iter_get_arg_type(&var) == DBUS_TYPE_UINT64) {
            dbus_message_iter_get_basic(&var, &stamp);
            int k = stamp_index(rec, stamp, hint);
            uint64_t *slot = k >= 0 ? &rec->arrivals[(size_t)k * (size_t)rec->r->n + (size_t)i] : NULL;
            if (slot && *slot == 0) {
                pthread_mutex_lock(&rec->lock);
                *slot = now;
                if (++rec->got[k] == rec->r->n) pthread_cond_broadcast(&rec->changed);
                pthread_mutex_unlock(&rec->lock);
            }
        }
        dbus_message_unref(m);
    }
}

static void *recorder_main(void *arg) {
    bf_recorder *rec = arg;
    // epoll, not poll: with 1,000 receivers a poll() per wake-up would scan
    // every descriptor while the fan-out makes them readable one by one, and
    // that scan would be the receivers' cost, charged to the daemon's rows.
    struct epoll_event events[64];
    int hint = 0;
    for (;;) {
        int k = epoll_wait(rec->epfd, events, 64, -1);
        if (k < 0) { if (errno == EINTR) continue; break; }
        for (int j = 0; j < k; j++) {
            int i = (int)events[j].data.u32;
            if (i < 0 || i >= rec->r->n) return NULL;   // the stop eventfd
            dbus_connection_read_write(rec->r->c[i], 0);
            take_all(rec, i, &hint);
        }
    }
    return NULL;
}

bf_recorder *bf_recorder_start(bf_receivers *r, const char *member, const uint64_t *stamps, int n_stamps,
                               char *error, int error_len) {
    bf_recorder *rec = calloc(1, sizeof *rec);
    rec->r = r;
    rec->member = strdup(member);
    rec->n_stamps = n_stamps;
    rec->stamps = calloc((size_t)n_stamps, sizeof *rec->stamps);
    memcpy(rec->stamps, stamps, (size_t)n_stamps * sizeof *stamps);
    rec->arrivals = calloc((size_t)n_stamps * (size_t)r->n, sizeof *rec->arrivals);
    rec->got = calloc((size_t)n_stamps, sizeof *rec->got);
    pthread_mutex_init(&rec->lock, NULL);
    pthread_cond_init(&rec->changed, NULL);
    rec->epfd = epoll_create1(EPOLL_CLOEXEC);
    rec->stopfd = eventfd(0, EFD_CLOEXEC);
    int ok = rec->epfd >= 0 && rec->stopfd >= 0;
    for (int i = 0; ok && i < r->n; i++) {
        struct epoll_event ev = { .events = EPOLLIN, .data.u32 = (uint32_t)i };
        ok = epoll_ctl(rec->epfd, EPOLL_CTL_ADD, r->fds[i].fd, &ev) == 0;
    }
    struct epoll_event stop = { .events = EPOLLIN, .data.u32 = UINT32_MAX };
    ok = ok && epoll_ctl(rec->epfd, EPOLL_CTL_ADD, rec->stopfd, &stop) == 0;
    // What libdbus has read already raises no epoll event: take it first.
    int hint = 0;
    for (int i = 0; ok && i < r->n; i++) take_all(rec, i, &hint);
    if (!ok || pthread_create(&rec->thread, NULL, recorder_main, rec) != 0) {
        if (error && error_len > 0) snprintf(error, (size_t)error_len, "cannot start the recorder: %s", strerror(errno));
        rec->thread = 0;
        bf_recorder_stop(rec, NULL);
        return NULL;
    }
    return rec;
}

int bf_recorder_wait(bf_recorder *rec, int k, int timeout_ms) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);   // pthread_cond_timedwait's default clock
    uint64_t ns = (uint64_t)until.tv_nsec + (uint64_t)timeout_ms * 1000000u;
    until.tv_sec += (time_t)(ns / 1000000000u);
    until.tv_nsec = (long)(ns % 1000000000u);
    pthread_mutex_lock(&rec->lock);
    int rc = 0;
    while (rec->got[k] < rec->r->n && rc == 0) rc = pthread_cond_timedwait(&rec->changed, &rec->lock, &until);
    int done = rec->got[k] == rec->r->n;
    pthread_mutex_unlock(&rec->lock);
    return done ? 0 : -1;
}

void bf_recorder_stop(bf_recorder *rec, uint64_t *arrivals) {
    if (!rec) return;
    if (rec->thread) {
        uint64_t v = 1;
        (void)!write(rec->stopfd, &v, sizeof v);
        pthread_join(rec->thread, NULL);
    }
    if (arrivals) memcpy(arrivals, rec->arrivals, (size_t)rec->n_stamps * (size_t)rec->r->n * sizeof *arrivals);
    if (rec->epfd >= 0) close(rec->epfd);
    if (rec->stopfd >= 0) close(rec->stopfd);
    pthread_mutex_destroy(&rec->lock);
    pthread_cond_destroy(&rec->changed);
    free(rec->member);
    free(rec->stamps);
    free(rec->arrivals);
    free(rec->got);
    free(rec);
}
