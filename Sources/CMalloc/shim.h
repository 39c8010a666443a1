// glibc's malloc extensions (malloc_trim), which Swift's Glibc module does not
// export. Part of libc itself: nothing to link.
#include <malloc.h>
