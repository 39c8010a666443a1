// Linux system calls that glibc has no wrapper for, as static inline functions
// Swift can call (Swift cannot call the variadic syscall(2) itself). Part of
// the kernel interface: nothing to link.
#ifndef GEOCONSENT_CLINUXSYSCALLS_SHIM_H
#define GEOCONSENT_CLINUXSYSCALLS_SHIM_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <linux/openat2.h>

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

#endif
