import CCurl
import GeoCore
import GeoGeolocate

/// POSTs a JSON body to the geolocate server over HTTPS with libcurl (the
/// only file that calls it): certificate verification on (libcurl's
/// default), HTTPS only and no redirects, a total time limit, and a reply
/// cut off at `maxReplyBytes`. One easy handle for the helper's life, so a
/// refresh reuses the TLS connection.
final class HTTPPost {
    /// Largest reply read: a geolocate reply is under a kilobyte.
    static let maxReplyBytes = 64 * 1024
    /// Seconds a request may take in all, by default; connecting takes half of it at most.
    static let defaultTimeout = 10.0

    struct Response {
        var status: Int
        var body: [UInt8]
        /// The `Retry-After` header's value, if any.
        var retryAfter: String?
    }

    /// What the callbacks fill in while a request runs.
    private final class Transfer {
        var body: [UInt8] = []
        var retryAfter: String?
        var tooLarge = false
    }

    private let handle: UnsafeMutableRawPointer
    private let url: String
    private var headers: UnsafeMutablePointer<curl_slist>?

    /// `caFile`: verify the server with this CA file instead of the system's
    /// (`[sources] wifi-ca-file`; libcurl reads no environment variable for it).
    init?(url: String, caFile: String, userAgent: String, timeout: Double = HTTPPost.defaultTimeout) {
        guard curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK, let h = curl_easy_init() else { return nil }
        handle = h
        self.url = url
        headers = curl_slist_append(nil, "Content-Type: application/json")
        headers = curl_slist_append(headers, "Accept: application/json")
        geo_curl_set_string(h, CURLOPT_URL, url)
        geo_curl_set_string(h, CURLOPT_PROTOCOLS_STR, "https")
        geo_curl_set_long(h, CURLOPT_FOLLOWLOCATION, 0)
        geo_curl_set_long(h, CURLOPT_SSL_VERIFYPEER, 1)
        geo_curl_set_long(h, CURLOPT_SSL_VERIFYHOST, 2)
        if !caFile.isEmpty { geo_curl_set_string(h, CURLOPT_CAINFO, caFile) }
        geo_curl_set_string(h, CURLOPT_USERAGENT, userAgent)
        geo_curl_set_slist(h, CURLOPT_HTTPHEADER, headers)
        geo_curl_set_long(h, CURLOPT_TIMEOUT_MS, Int(timeout * 1000))
        geo_curl_set_long(h, CURLOPT_CONNECTTIMEOUT_MS, Int(timeout * 500))
        geo_curl_set_long(h, CURLOPT_NOSIGNAL, 1)
        // No cookies, no proxy from the environment (the unit has none; a test must not either).
        geo_curl_set_string(h, CURLOPT_PROXY, "")
        geo_curl_set_size(h, CURLOPT_MAXFILESIZE_LARGE, curl_off_t(HTTPPost.maxReplyBytes))
        geo_curl_set_callback(h, CURLOPT_WRITEFUNCTION) { data, size, count, context in
            let transfer = Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue()
            let n = size * count
            guard transfer.body.count + n <= HTTPPost.maxReplyBytes else {
                transfer.tooLarge = true
                return 0   // libcurl stops the transfer: CURLE_WRITE_ERROR
            }
            data!.withMemoryRebound(to: UInt8.self, capacity: n) {
                transfer.body.append(contentsOf: UnsafeBufferPointer(start: $0, count: n))
            }
            return n
        }
        geo_curl_set_callback(h, CURLOPT_HEADERFUNCTION) { data, size, count, context in
            let transfer = Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue()
            let n = size * count
            let line = data!.withMemoryRebound(to: UInt8.self, capacity: n) {
                String(decoding: UnsafeBufferPointer(start: $0, count: min(n, 256)), as: UTF8.self)
            }
            if line.lowercased().hasPrefix("retry-after:") {
                transfer.retryAfter = String(line.dropFirst(12).filter { !$0.isNewline && !$0.isWhitespace })
            }
            return n
        }
    }

    deinit {
        curl_easy_cleanup(handle)
        curl_slist_free_all(headers)
    }

    /// The reply, or why there was none.
    func post(_ body: [UInt8]) -> Result<Response, WiFiLookupPolicy.TransportFailure> {
        let transfer = Transfer()
        let context = Unmanaged.passRetained(transfer)
        defer { context.release() }
        geo_curl_set_pointer(handle, CURLOPT_WRITEDATA, context.toOpaque())
        geo_curl_set_pointer(handle, CURLOPT_HEADERDATA, context.toOpaque())
        let code: CURLcode = body.withUnsafeBufferPointer { buffer in
            geo_curl_set_size(handle, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(buffer.count))
            geo_curl_set_pointer(handle, CURLOPT_POSTFIELDS, UnsafeMutableRawPointer(mutating: buffer.baseAddress))
            return curl_easy_perform(handle)
        }
        geo_curl_set_pointer(handle, CURLOPT_POSTFIELDS, nil)
        if transfer.tooLarge || code == CURLE_FILESIZE_EXCEEDED { return .failure(.tooLarge(HTTPPost.maxReplyBytes)) }
        guard code == CURLE_OK else {
            return .failure(.noReply("\(Self.kind(of: code)): \(String(cString: curl_easy_strerror(code)))"))
        }
        return .success(Response(status: geo_curl_response_code(handle), body: transfer.body,
                                 retryAfter: transfer.retryAfter))
    }

    /// The failure's kind in words a log reader looks for.
    static func kind(of code: CURLcode) -> String {
        switch code {
        case CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CONNECT_ERROR, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CACERT_BADFILE:
            return "TLS failed"
        case CURLE_OPERATION_TIMEDOUT: return "timed out"
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_CONNECT: return "cannot reach the server"
        default: return "the request failed"
        }
    }
}
