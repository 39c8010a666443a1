#ifndef GEOCONSENT_CGPS_SHIM_H
#define GEOCONSENT_CGPS_SHIM_H
// libgps, seen from Swift. The Swift wrapper reads gps_data_t fields written
// for API major version 11 (gpsd 3.22, Debian 12): refuse to build against
// anything else rather than misread the struct.
#include <gps.h>

#if GPSD_API_MAJOR_VERSION != 11
#error "geoconsent is written against libgps API major version 11 (gpsd 3.22)"
#endif

#endif
