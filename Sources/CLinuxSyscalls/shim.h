// Linux system calls that glibc has no wrapper for, or only a variadic one, as
// static inline functions Swift can call (Swift cannot call the variadic
// syscall(2) or prctl(2) itself). Part of the kernel interface: nothing to link.
#ifndef GEOCONSENT_CLINUXSYSCALLS_SHIM_H
#define GEOCONSENT_CLINUXSYSCALLS_SHIM_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <linux/openat2.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/epoll.h>

#ifndef SYS_openat2
#define SYS_openat2 437
#endif

/// openat2(2): opens `path` relative to `dirfd` with `flags` (O_*) and
/// `resolve` (RESOLVE_*). Returns the descriptor, or -1 with errno set
/// (ENOSYS before Linux 5.6, EPERM where a seccomp filter denies it).
static inline int geo_openat2(int dirfd, const char *path, uint64_t flags, uint64_t resolve) {
    struct open_how how;
    memset(&how, 0, sizeof how);
    how.flags = flags;
    how.resolve = resolve;
    return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof how);
}

// The RESOLVE_* flags as plain constants (Swift does not import every macro).
static const uint64_t GEO_RESOLVE_NO_XDEV = RESOLVE_NO_XDEV;
static const uint64_t GEO_RESOLVE_NO_MAGICLINKS = RESOLVE_NO_MAGICLINKS;
static const uint64_t GEO_RESOLVE_NO_SYMLINKS = RESOLVE_NO_SYMLINKS;
static const uint64_t GEO_RESOLVE_BENEATH = RESOLVE_BENEATH;
static const uint64_t GEO_RESOLVE_IN_ROOT = RESOLVE_IN_ROOT;

// O_PATH: glibc defines it only under _GNU_SOURCE, which Swift's Glibc module
// is not built with; __O_PATH is always there.
static const int GEO_O_PATH = __O_PATH;

// --- capabilities (the identity helper split: geoconsentd(8), SECURITY) ---

/// capget(2) of this process: each set as a 64-bit mask (bit N = capability N).
/// Returns 0, or -1 with errno set.
static inline int geo_capget(uint64_t *effective, uint64_t *permitted, uint64_t *inheritable) {
    struct __user_cap_header_struct header = { _LINUX_CAPABILITY_VERSION_3, 0 };
    struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
    memset(data, 0, sizeof data);
    if (syscall(SYS_capget, &header, data) != 0) return -1;
    *effective = (uint64_t)data[1].effective << 32 | data[0].effective;
    *permitted = (uint64_t)data[1].permitted << 32 | data[0].permitted;
    *inheritable = (uint64_t)data[1].inheritable << 32 | data[0].inheritable;
    return 0;
}

/// capset(2) of this process to the given masks. Returns 0, or -1 with errno
/// set (EPERM also where a seccomp filter denies capset, as systemd's
/// `SystemCallFilter=~@privileged` does).
static inline int geo_capset(uint64_t effective, uint64_t permitted, uint64_t inheritable) {
    struct __user_cap_header_struct header = { _LINUX_CAPABILITY_VERSION_3, 0 };
    struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
    memset(data, 0, sizeof data);
    data[0].effective = (uint32_t)effective;
    data[1].effective = (uint32_t)(effective >> 32);
    data[0].permitted = (uint32_t)permitted;
    data[1].permitted = (uint32_t)(permitted >> 32);
    data[0].inheritable = (uint32_t)inheritable;
    data[1].inheritable = (uint32_t)(inheritable >> 32);
    return (int)syscall(SYS_capset, &header, data);
}

/// prctl(2) with all five arguments (glibc's prctl is variadic).
static inline int geo_prctl(int option, unsigned long arg2, unsigned long arg3, unsigned long arg4, unsigned long arg5) {
    return prctl(option, arg2, arg3, arg4, arg5);
}

static const int GEO_CAP_SETPCAP = CAP_SETPCAP;
static const int GEO_CAP_SYS_PTRACE = CAP_SYS_PTRACE;
static const int GEO_PR_CAPBSET_READ = PR_CAPBSET_READ;
static const int GEO_PR_CAPBSET_DROP = PR_CAPBSET_DROP;
static const int GEO_PR_CAP_AMBIENT = PR_CAP_AMBIENT;
static const unsigned long GEO_PR_CAP_AMBIENT_IS_SET = PR_CAP_AMBIENT_IS_SET;
static const unsigned long GEO_PR_CAP_AMBIENT_CLEAR_ALL = PR_CAP_AMBIENT_CLEAR_ALL;
static const int GEO_PR_SET_NO_NEW_PRIVS = PR_SET_NO_NEW_PRIVS;
static const int GEO_PR_GET_NO_NEW_PRIVS = PR_GET_NO_NEW_PRIVS;
static const int GEO_PR_SET_DUMPABLE = PR_SET_DUMPABLE;
static const int GEO_PR_SET_NAME = PR_SET_NAME;

#ifndef SYS_close_range
#define SYS_close_range 436
#endif

/// close_range(2) (Linux 5.9): closes descriptors first...last. Returns 0, or
/// -1 with errno set (ENOSYS before 5.9: close them one by one instead).
static inline int geo_close_range(unsigned int first, unsigned int last) {
    return (int)syscall(SYS_close_range, first, last, 0);
}

// --- process descriptors (a session's process: geoconsentd(8)) ---

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

/// pidfd_open(2) (Linux 5.3): a descriptor for the process `pid`, close-on-exec,
/// that poll(2) reports readable once that process has exited. Returns it, or
/// -1 with errno set: ESRCH (no such process), ENOSYS (before 5.3), EPERM
/// (a seccomp filter denies it: systemd's SystemCallErrorNumber=EPERM).
static inline int geo_pidfd_open(int pid) {
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

// --- an epoll set of such descriptors (ProcessExitSet) ---
// Wrapped because struct epoll_event is packed, and <sys/epoll.h> is not in Swift's Glibc module.

/// epoll_create1(2), close-on-exec: the set, or -1 with errno set.
static inline int geo_epoll_create(void) {
    return epoll_create1(EPOLL_CLOEXEC);
}

/// Adds `fd` to the set `ep`, polled for readability, its own number as the
/// event's data. 0, or -1 with errno set.
static inline int geo_epoll_add_readable(int ep, int fd) {
    struct epoll_event e;
    memset(&e, 0, sizeof e);
    e.events = EPOLLIN;
    e.data.fd = fd;
    return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
}

/// Takes `fd` out of the set `ep`. 0, or -1 with errno set.
static inline int geo_epoll_remove(int ep, int fd) {
    return epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
}

/// The descriptors of `ep` that are ready now, without waiting: at most `max`
/// (at most 64) into `fds`. Their count, or -1 with errno set.
static inline int geo_epoll_ready(int ep, int *fds, int max) {
    struct epoll_event e[64];
    int n = epoll_wait(ep, e, max < 64 ? max : 64, 0);
    for (int i = 0; i < n; i++) fds[i] = e[i].data.fd;
    return n;
}

#endif
