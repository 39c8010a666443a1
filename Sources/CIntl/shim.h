// glibc's gettext (libintl.h: bindtextdomain, dgettext, dngettext), which
// Swift's Glibc module does not export. Part of libc itself: nothing to link.
// Only geoconsentctl's Localization.swift calls it.
#include <libintl.h>
#include <locale.h>
