#include "hub/http.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"

#if LTX_WITH_HUB
#include <curl/curl.h>

#include <mutex>
#endif

namespace ltx::hub {

std::string HttpResponse::header(const std::string& lower_name) const {
  const auto it = headers.find(lower_name);
  return it == headers.end() ? std::string() : it->second;
}

#if LTX_WITH_HUB

namespace {

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] {
    const CURLcode rc = curl_global_init(CURL_GLOBAL_DEFAULT);
    LTX_CHECK(rc == CURLE_OK, "libcurl could not be initialised: ", curl_easy_strerror(rc));
  });
}

struct Easy {
  CURL* h = nullptr;
  curl_slist* list = nullptr;
  Easy() {
    global_init();
    h = curl_easy_init();
    LTX_CHECK(h != nullptr, "libcurl: curl_easy_init failed");
  }
  ~Easy() {
    curl_slist_free_all(list);
    curl_easy_cleanup(h);
  }
  Easy(const Easy&) = delete;
  Easy& operator=(const Easy&) = delete;
};

// Collects the headers of the last response: a status line starts a new response (redirects).
size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* headers = static_cast<std::map<std::string, std::string>*>(user);
  std::string line(data, size * n);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  if (line.rfind("HTTP/", 0) == 0) {
    headers->clear();
  } else if (const size_t colon = line.find(':'); colon != std::string::npos) {
    std::string name = line.substr(0, colon);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    size_t v = colon + 1;
    while (v < line.size() && line[v] == ' ') ++v;
    (*headers)[name] = line.substr(v);
  }
  return size * n;
}

void configure(Easy& e, const HttpRequest& r, std::map<std::string, std::string>* headers) {
  for (const std::string& h : r.headers) e.list = curl_slist_append(e.list, h.c_str());
  curl_easy_setopt(e.h, CURLOPT_URL, r.url.c_str());
  curl_easy_setopt(e.h, CURLOPT_HTTPHEADER, e.list);
  curl_easy_setopt(e.h, CURLOPT_USERAGENT, "ltx.cpp");
  curl_easy_setopt(e.h, CURLOPT_FOLLOWLOCATION, r.follow_redirects ? 1L : 0L);
  curl_easy_setopt(e.h, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(e.h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e.h, CURLOPT_CONNECTTIMEOUT, 30L);
  // A connection that delivers nothing for a minute is dead: end it (the caller retries).
  curl_easy_setopt(e.h, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(e.h, CURLOPT_LOW_SPEED_TIME, 60L);
  curl_easy_setopt(e.h, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(e.h, CURLOPT_HEADERDATA, headers);
}

[[noreturn]] void transport_failure(const HttpRequest& r, CURLcode rc) {
  fail("cannot reach ", r.url, ": ", curl_easy_strerror(rc),
       " (check the network, or HF_ENDPOINT; with the files already downloaded, --offline or "
       "HF_HUB_OFFLINE=1 uses them without the network)");
}

size_t append_text(char* data, size_t size, size_t n, void* user) {
  auto* p = static_cast<std::pair<std::string*, int64_t>*>(user);
  if (static_cast<int64_t>(p->first->size() + size * n) > p->second) return 0;
  p->first->append(data, size * n);
  return size * n;
}

struct RangeCall {
  const std::function<bool(const char*, size_t)>* sink;
  const std::function<bool()>* stop;
  RangeResult* result;
  CURL* h;
  int64_t first;
};

size_t on_range_data(char* data, size_t size, size_t n, void* user) {
  auto* c = static_cast<RangeCall*>(user);
  long status = 0;
  curl_easy_getinfo(c->h, CURLINFO_RESPONSE_CODE, &status);
  // Bodies of errors are not file bytes, nor is a whole file sent in answer to a range that does
  // not start at 0 (a server that ignores Range).
  if (status != 206 && !(status == 200 && c->first == 0)) return size * n;
  if (!(*c->sink)(data, size * n)) {
    c->result->sink_refused = true;
    return 0;
  }
  c->result->received += static_cast<int64_t>(size * n);
  return size * n;
}

int on_range_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* c = static_cast<RangeCall*>(user);
  if (*c->stop && (*c->stop)()) {
    c->result->stopped = true;
    return 1;
  }
  return 0;
}

}  // namespace

bool http_available() { return true; }

HttpResponse http_head(const HttpRequest& r) {
  Easy e;
  HttpResponse out;
  configure(e, r, &out.headers);
  curl_easy_setopt(e.h, CURLOPT_NOBODY, 1L);
  curl_easy_setopt(e.h, CURLOPT_TIMEOUT, 120L);
  const CURLcode rc = curl_easy_perform(e.h);
  if (rc != CURLE_OK) transport_failure(r, rc);
  curl_easy_getinfo(e.h, CURLINFO_RESPONSE_CODE, &out.status);
  return out;
}

HttpResponse http_get_text(const HttpRequest& r, int64_t max_bytes) {
  Easy e;
  HttpResponse out;
  configure(e, r, &out.headers);
  std::pair<std::string*, int64_t> body{&out.body, max_bytes};
  curl_easy_setopt(e.h, CURLOPT_WRITEFUNCTION, append_text);
  curl_easy_setopt(e.h, CURLOPT_WRITEDATA, &body);
  curl_easy_setopt(e.h, CURLOPT_TIMEOUT, 300L);
  const CURLcode rc = curl_easy_perform(e.h);
  if (rc == CURLE_WRITE_ERROR) fail(r.url, ": the answer is larger than ", max_bytes, " bytes");
  if (rc != CURLE_OK) transport_failure(r, rc);
  curl_easy_getinfo(e.h, CURLINFO_RESPONSE_CODE, &out.status);
  return out;
}

RangeResult http_get_range(const HttpRequest& r, int64_t first, int64_t last,
                           const std::function<bool(const char*, size_t)>& sink,
                           const std::function<bool()>& stop) {
  Easy e;
  RangeResult out;
  HttpRequest ranged = r;
  ranged.headers.push_back("Range: bytes=" + std::to_string(first) + "-" +
                           (last >= 0 ? std::to_string(last) : std::string()));
  configure(e, ranged, &out.headers);
  RangeCall call{&sink, &stop, &out, e.h, first};
  curl_easy_setopt(e.h, CURLOPT_WRITEFUNCTION, on_range_data);
  curl_easy_setopt(e.h, CURLOPT_WRITEDATA, &call);
  curl_easy_setopt(e.h, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(e.h, CURLOPT_XFERINFOFUNCTION, on_range_progress);
  curl_easy_setopt(e.h, CURLOPT_XFERINFODATA, &call);
  const CURLcode rc = curl_easy_perform(e.h);
  curl_easy_getinfo(e.h, CURLINFO_RESPONSE_CODE, &out.status);
  if (rc != CURLE_OK && !out.stopped && !out.sink_refused) {
    out.transport_error = true;
    out.error = curl_easy_strerror(rc);
  }
  return out;
}

#else  // !LTX_WITH_HUB

namespace {
[[noreturn]] void no_client() {
  fail("this ltx was built without libcurl, so it cannot download models: install "
       "libcurl4-openssl-dev (scripts/install-deps) and rebuild, or pass local files with the "
       "model flags");
}
}  // namespace

bool http_available() { return false; }
HttpResponse http_head(const HttpRequest&) { no_client(); }
HttpResponse http_get_text(const HttpRequest&, int64_t) { no_client(); }
RangeResult http_get_range(const HttpRequest&, int64_t, int64_t,
                           const std::function<bool(const char*, size_t)>&,
                           const std::function<bool()>&) {
  no_client();
}

#endif

}  // namespace ltx::hub
