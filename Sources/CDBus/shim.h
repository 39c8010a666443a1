#ifndef GEOCONSENT_CDBUS_SHIM_H
#define GEOCONSENT_CDBUS_SHIM_H
// libdbus-1, seen from Swift. The DBUS_TYPE_* codes are ((int) 'x') macros that
// Swift cannot import, so the few the Swift layer needs are re-exported here
// as constants. Everything else imports directly.
#include <dbus/dbus.h>

static const int cdbus_type_invalid = DBUS_TYPE_INVALID;
static const int cdbus_type_byte = DBUS_TYPE_BYTE;
static const int cdbus_type_boolean = DBUS_TYPE_BOOLEAN;
static const int cdbus_type_int16 = DBUS_TYPE_INT16;
static const int cdbus_type_uint16 = DBUS_TYPE_UINT16;
static const int cdbus_type_int32 = DBUS_TYPE_INT32;
static const int cdbus_type_uint32 = DBUS_TYPE_UINT32;
static const int cdbus_type_int64 = DBUS_TYPE_INT64;
static const int cdbus_type_uint64 = DBUS_TYPE_UINT64;
static const int cdbus_type_double = DBUS_TYPE_DOUBLE;
static const int cdbus_type_string = DBUS_TYPE_STRING;
static const int cdbus_type_object_path = DBUS_TYPE_OBJECT_PATH;
static const int cdbus_type_signature = DBUS_TYPE_SIGNATURE;
static const int cdbus_type_unix_fd = DBUS_TYPE_UNIX_FD;
static const int cdbus_type_array = DBUS_TYPE_ARRAY;
static const int cdbus_type_variant = DBUS_TYPE_VARIANT;
static const int cdbus_type_struct = DBUS_TYPE_STRUCT;
static const int cdbus_type_dict_entry = DBUS_TYPE_DICT_ENTRY;

/// Zero-initialised DBusError (DBUS_ERROR_INIT is a brace initialiser macro).
static inline DBusError cdbus_error_init(void) {
    DBusError e;
    dbus_error_init(&e);
    return e;
}

#endif
