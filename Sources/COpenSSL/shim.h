// OpenSSL, libcurl's TLS library on Debian (libcurl4-openssl-dev), for the
// Wi-Fi network helper's warm-up alone (TLSWarmUp.swift).
#include <openssl/ssl.h>
