// libcurl for the Wi-Fi network helper. curl_easy_setopt and
// curl_easy_getinfo are variadic, which Swift cannot call: these typed
// wrappers are the only way in.
#include <curl/curl.h>

static inline CURLcode geo_curl_set_long(CURL *h, CURLoption o, long v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode geo_curl_set_string(CURL *h, CURLoption o, const char *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode geo_curl_set_pointer(CURL *h, CURLoption o, void *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode geo_curl_set_slist(CURL *h, CURLoption o, struct curl_slist *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode geo_curl_set_size(CURL *h, CURLoption o, curl_off_t v) { return curl_easy_setopt(h, o, v); }

typedef size_t (*geo_curl_data_callback)(char *data, size_t size, size_t count, void *context);
static inline CURLcode geo_curl_set_callback(CURL *h, CURLoption o, geo_curl_data_callback f) {
    return curl_easy_setopt(h, o, f);
}

static inline long geo_curl_response_code(CURL *h) {
    long code = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    return code;
}
