import COpenSSL

/// Readies OpenSSL, libcurl's TLS library, before the first lookup, so that
/// the lookup a grant is waiting for does not pay for it.
///
/// Why: the first TLS client context of a process loads OpenSSL's
/// configuration and providers and fetches its algorithms. Measured on the
/// loopback test server, a fresh process's first HTTPS POST took 4.2–5.9 ms
/// against 2.7–3.4 ms for its second; after this warm-up the first took
/// 2.8–4.8 ms (docs/performance.md, "Wi-Fi positioning"). The daemon starts
/// the helper when a grant begins and GPS is silent, before any lookup is
/// asked for, so this runs off the lookup's path.
///
/// Nothing here touches the network: a client context is made, given the CA
/// file the lookups will trust (or the system's), and freed.
enum TLSWarmUp {
    static func run(caFile: String) {
        guard let context = SSL_CTX_new(TLS_client_method()) else { return }
        defer { SSL_CTX_free(context) }
        if caFile.isEmpty {
            _ = SSL_CTX_set_default_verify_paths(context)
        } else {
            _ = SSL_CTX_load_verify_locations(context, caFile, nil)
        }
    }
}
