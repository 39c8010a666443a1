// The identity-reading part of the churn reference (bench_floor.c, the echo
// with identify = 2): a thread behind a socketpair that reads a caller's /proc
// entries, so that each new caller costs the echo one more round trip and the
// reads any identity needs, as the daemon's identity helper does. A thread, not
// a process: switching to it is no dearer than to the daemon's helper process,
// so the reference stays a lower bound.
#define _GNU_SOURCE   // O_PATH
#include "bench_floor_private.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

struct bf_proc_helper {
    int fds[2];        // [0]: the echo's end, [1]: the thread's
    pthread_t thread;
};

/// Reads `name` under the open /proc/PID directory `dir` once (the kernel's
/// single-record files come whole in one read); its length, or -1.
static ssize_t read_entry(int dir, const char *name, char *buf, size_t size) {
    int fd = openat(dir, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) return -1;
    ssize_t n = read(fd, buf, size);
    close(fd);
    return n;
}

/// What an app's identity takes from /proc, at the least: whose process it is
/// (the directory's owner), its start time (`stat`, against PID reuse), its
/// executable (`exe`, shown in prompts), a sandbox's marker in its root
/// (`root/.flatpak-info`), its cgroup (a systemd app unit). 1 if it was there.
static int read_identity(uint32_t pid) {
    char path[32], buf[4096];
    snprintf(path, sizeof path, "/proc/%u", pid);
    int dir = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0) return 0;
    struct stat st;
    int ok = fstat(dir, &st) == 0 && read_entry(dir, "stat", buf, sizeof buf) > 0 &&
             readlinkat(dir, "exe", buf, sizeof buf) > 0;
    if (ok) {
        int root = openat(dir, "root", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root >= 0) {
            int marker = openat(root, ".flatpak-info", O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
            if (marker >= 0) close(marker);
            close(root);
        }
        ok = read_entry(dir, "cgroup", buf, sizeof buf) > 0;
    }
    close(dir);
    return ok;
}

static void *helper_main(void *arg) {
    bf_proc_helper *h = arg;
    for (;;) {
        uint32_t pid;
        ssize_t n = recv(h->fds[1], &pid, sizeof pid, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n != sizeof pid) break;   // the echo's end closed
        unsigned char answer = (unsigned char)read_identity(pid);
        if (send(h->fds[1], &answer, 1, MSG_NOSIGNAL) != 1) break;
    }
    // Whatever ended the loop, a later question must not wait for an answer.
    shutdown(h->fds[1], SHUT_RDWR);
    return NULL;
}

bf_proc_helper *bf_proc_helper_start(void) {
    bf_proc_helper *h = calloc(1, sizeof *h);
    if (!h) return NULL;
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, h->fds) != 0) {
        free(h);
        return NULL;
    }
    if (pthread_create(&h->thread, NULL, helper_main, h) != 0) {
        close(h->fds[0]);
        close(h->fds[1]);
        free(h);
        return NULL;
    }
    return h;
}

int bf_proc_helper_ask(bf_proc_helper *h, uint32_t pid) {
    if (send(h->fds[0], &pid, sizeof pid, MSG_NOSIGNAL) != sizeof pid) return 0;
    unsigned char answer = 0;
    ssize_t n;
    while ((n = recv(h->fds[0], &answer, 1, 0)) < 0 && errno == EINTR) {}
    return n == 1 && answer == 1;
}

void bf_proc_helper_stop(bf_proc_helper *h) {
    if (!h) return;
    shutdown(h->fds[0], SHUT_RDWR);   // the thread's recv returns 0
    pthread_join(h->thread, NULL);
    close(h->fds[0]);
    close(h->fds[1]);
    free(h);
}
