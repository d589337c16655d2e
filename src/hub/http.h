#pragma once
// The HTTP requests the hub client makes, over libcurl (Debian libcurl4-openssl-dev). A build
// without libcurl (LTX_HUB off: no libcurl or libcrypto) compiles these to functions that throw an ltx::Error saying how to
// rebuild. Header names in HttpResponse are lower-cased; the headers are those of the last response
// (after redirects that were followed).
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace ltx::hub {

struct HttpResponse {
  long status = 0;
  std::map<std::string, std::string> headers;  // lower-case name -> value
  std::string body;                            // text requests only
  std::string header(const std::string& lower_name) const;
};

struct HttpRequest {
  std::string url;
  std::vector<std::string> headers;  // "Name: value"
  bool follow_redirects = false;     // libcurl drops Authorization when the host or port changes
};

// True when this build has an HTTP client.
bool http_available();

// HEAD (no body, no redirect followed unless asked). Throws an ltx::Error on a transport failure
// (no connection, DNS, TLS), naming the URL; any HTTP status is returned.
HttpResponse http_head(const HttpRequest& request);
// GET of a small text body (the hub's JSON API), at most `max_bytes`.
HttpResponse http_get_text(const HttpRequest& request, int64_t max_bytes = 64 << 20);

// GET of bytes [first, last] (last = -1: to the end) with redirects followed. Each received block
// goes to `sink`, which returns false to stop (a write error). `stop` is polled while waiting
// (at least once a second) and ends the transfer when it returns true.
struct RangeResult {
  long status = 0;
  int64_t received = 0;         // bytes given to the sink
  bool transport_error = false; // the connection failed or dropped mid-body
  bool stopped = false;         // `stop` said so
  bool sink_refused = false;    // `sink` returned false
  std::string error;            // libcurl's message, for transport errors
  std::map<std::string, std::string> headers;
};
RangeResult http_get_range(const HttpRequest& request, int64_t first, int64_t last,
                           const std::function<bool(const char* data, size_t n)>& sink,
                           const std::function<bool()>& stop);

}  // namespace ltx::hub
