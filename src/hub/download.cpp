#include "hub/download.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/error.h"
#include "hub/digest.h"
#include "hub/http.h"

namespace ltx::hub {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::vector<std::string> request_headers(const HubConfig& hub) {
  std::vector<std::string> h = {"Accept-Encoding: identity"};  // the real size, no compression
  if (!hub.token.empty()) h.push_back("Authorization: Bearer " + hub.token);
  return h;
}

std::string normalise_etag(std::string etag) {
  if (etag.rfind("W/", 0) == 0) etag.erase(0, 2);
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') etag = etag.substr(1, etag.size() - 2);
  return etag;
}

int64_t to_int(const std::string& s) {
  if (s.empty()) return -1;
  try {
    size_t used = 0;
    const long long v = std::stoll(s, &used);
    return used == s.size() && v >= 0 ? v : -1;
  } catch (const std::exception&) {
    return -1;
  }
}

// The one error of a refused hub request, with what to do about it.
[[noreturn]] void fail_status(const HubConfig& hub, const std::string& what, const std::string& repo,
                              long status, const std::string& error_code,
                              const std::string& error_message) {
  const std::string page = hub.endpoint + "/" + repo;
  const std::string detail = error_message.empty() ? "" : " (" + error_message + ")";
  if (status == 401 || status == 403 || error_code == "GatedRepo") {
    if (hub.token.empty())
      fail(what, ": the hub answered HTTP ", status, detail, ": ", repo,
           " is gated or private (or does not exist). Accept its terms at ", page,
           " while logged in, then pass a token: --token TOKEN or HF_TOKEN=TOKEN (a read token "
           "from ", hub.endpoint, "/settings/tokens; `hf auth login` also works)");
    fail(what, ": the hub refused the token (HTTP ", status, detail, "): accept the terms of ",
         repo, " at ", page, " with the token's account, and check that the token may read it "
         "(fine-grained tokens need \"read access to public gated repos\")");
  }
  if (status == 404) {
    if (error_code == "RevisionNotFound") fail(what, ": ", repo, " has no such revision", detail);
    if (error_code == "RepoNotFound") fail(what, ": no repository ", repo, " on ", hub.endpoint, detail);
    fail(what, ": not found on ", hub.endpoint, " (HTTP 404", detail, "); check the repository and "
         "the file name (", page, "/tree/main lists the files)");
  }
  fail(what, ": the hub answered HTTP ", status, detail, " (", hub.endpoint, "); try again later");
}

// ------------------------------------------------------------------- the lock

class FileLock {
 public:
  FileLock(const std::string& path, const FileRef& ref, const DownloadOptions& o) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    LTX_CHECK(fd_ >= 0, "cannot create the lock file ", path, ": ", std::strerror(errno),
              " (is the model cache writable? --cache-dir picks another)");
    if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) return;
    if (o.notice)
      o.notice("waiting for another ltx that is downloading " + ref.str() + " (lock " + path + ")");
    // Blocks until the other process is done; a signal (Ctrl-C) interrupts the wait.
    while (::flock(fd_, LOCK_EX) != 0) {
      LTX_CHECK(errno == EINTR, "cannot lock ", path, ": ", std::strerror(errno));
      if (o.cancel) o.cancel->check("the wait for another download of " + ref.str());
    }
  }
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);  // closing releases the lock
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

// ------------------------------------------------------------------- the partial file's record

struct PartState {
  std::string etag;
  int64_t size = 0;
  int64_t chunk = 0;
  std::vector<int64_t> done;  // bytes written from the start of each chunk

  int64_t chunk_begin(size_t i) const { return static_cast<int64_t>(i) * chunk; }
  int64_t chunk_length(size_t i) const {
    return std::min(chunk, size - chunk_begin(i));
  }
  int64_t total_done() const {
    int64_t t = 0;
    for (int64_t d : done) t += d;
    return t;
  }
};

std::optional<PartState> load_state(const std::string& path) {
  std::ifstream f(path);
  if (!f) return std::nullopt;
  try {
    const json j = json::parse(f);
    PartState s;
    s.etag = j.at("etag").get<std::string>();
    s.size = j.at("size").get<int64_t>();
    s.chunk = j.at("chunk").get<int64_t>();
    s.done = j.at("done").get<std::vector<int64_t>>();
    if (s.size < 0 || s.chunk <= 0) return std::nullopt;
    const size_t n = static_cast<size_t>(s.size == 0 ? 0 : (s.size + s.chunk - 1) / s.chunk);
    if (s.done.size() != n) return std::nullopt;
    for (size_t i = 0; i < n; ++i)
      if (s.done[i] < 0 || s.done[i] > s.chunk_length(i)) return std::nullopt;
    return s;
  } catch (const std::exception&) {
    return std::nullopt;  // unreadable: start over
  }
}

void save_state(const std::string& path, const PartState& s) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << json{{"etag", s.etag}, {"size", s.size}, {"chunk", s.chunk}, {"done", s.done}}.dump();
    if (!f) return;  // the record is an optimisation: without it the next run starts over
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
}

// ------------------------------------------------------------------- the transfer

class Transfer {
 public:
  Transfer(const HubConfig& hub, const FileRef& ref, const std::string& part_path,
           const std::string& state_path, PartState state, const DownloadOptions& o)
      : hub_(hub), ref_(ref), part_path_(part_path), state_path_(state_path),
        state_(std::move(state)), o_(o), start_(std::chrono::steady_clock::now()) {
    resumed_from_ = state_.total_done();
    done_total_ = resumed_from_;
    fd_ = ::open(part_path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    LTX_CHECK(fd_ >= 0, "cannot write ", part_path, ": ", std::strerror(errno),
              " (is the model cache writable? --cache-dir picks another)");
  }
  ~Transfer() {
    if (fd_ >= 0) ::close(fd_);
  }
  Transfer(const Transfer&) = delete;
  Transfer& operator=(const Transfer&) = delete;

  // Fetches every missing byte; throws on failure or a stop (the record saved either way).
  void run() {
    const size_t chunks = state_.done.size();
    const int workers = static_cast<int>(std::min<size_t>(
        static_cast<size_t>(std::max(1, o_.connections)), std::max<size_t>(1, chunks)));
    std::vector<std::thread> threads;
    for (int w = 1; w < workers; ++w) threads.emplace_back([this] { work(); });
    work();
    for (std::thread& t : threads) t.join();
    {
      std::lock_guard<std::mutex> g(mu_);
      save_state(state_path_, state_);
    }
    if (o_.cancel && o_.cancel->requested())
      throw Cancelled(str("the download of ", ref_.str(), " stopped with ", done_total_.load(),
                          " of ", state_.size, " bytes in ", part_path_,
                          "; run the same command again to resume"),
                      o_.cancel->reason());
    if (!failure_.empty()) fail(failure_);
    LTX_CHECK(::fsync(fd_) == 0, "writing ", part_path_, " failed: ", std::strerror(errno));
  }

  void report(bool verifying) {
    if (!o_.progress) return;
    TransferProgress p;
    p.file = ref_;
    p.done = done_total_.load();
    p.total = state_.size;
    p.resumed_from = resumed_from_;
    p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    p.verifying = verifying;
    o_.progress(p);
  }

 private:
  bool should_stop() const {
    return stopping_.load() || (o_.cancel != nullptr && o_.cancel->requested());
  }

  void set_failure(const std::string& message) {
    std::lock_guard<std::mutex> g(mu_);
    if (failure_.empty()) failure_ = message;
    stopping_ = true;
  }

  void work() {
    while (!should_stop()) {
      size_t i = 0;
      {
        std::lock_guard<std::mutex> g(mu_);
        while (next_ < state_.done.size() && state_.done[next_] == state_.chunk_length(next_)) ++next_;
        if (next_ >= state_.done.size()) return;
        i = next_++;
      }
      fetch_chunk(i);
    }
  }

  void fetch_chunk(size_t i) {
    const int64_t end = state_.chunk_begin(i) + state_.chunk_length(i);  // exclusive
    int attempts = 0;
    HttpRequest req{resolve_url(hub_, ref_), request_headers(hub_), true};
    while (!should_stop()) {
      int64_t pos = 0;
      {
        std::lock_guard<std::mutex> g(mu_);
        pos = state_.chunk_begin(i) + state_.done[i];
      }
      if (pos >= end) break;
      int write_errno = 0;
      auto sink = [&](const char* data, size_t n) -> bool {
        const int64_t room = end - pos;
        const size_t take = static_cast<size_t>(std::min<int64_t>(room, static_cast<int64_t>(n)));
        size_t off = 0;
        while (off < take) {
          const ssize_t w = ::pwrite(fd_, data + off, take - off, pos + static_cast<int64_t>(off));
          if (w < 0) {
            if (errno == EINTR) continue;
            write_errno = errno;
            return false;
          }
          off += static_cast<size_t>(w);
        }
        pos += static_cast<int64_t>(take);
        done_total_ += static_cast<int64_t>(take);
        {
          std::lock_guard<std::mutex> g(mu_);
          state_.done[i] = pos - state_.chunk_begin(i);
        }
        maybe_report();
        return take == n;  // more than the range asked for: stop reading
      };
      const RangeResult r = http_get_range(req, pos, end - 1, sink, [this] { return should_stop(); });
      if (write_errno != 0) {
        set_failure(str("writing ", part_path_, " failed: ", std::strerror(write_errno),
                        write_errno == ENOSPC || write_errno == EFBIG || write_errno == EDQUOT
                            ? " (the disk is full: free space, or pick a cache folder on a larger "
                              "disk with --cache-dir)"
                            : ""));
        return;
      }
      if (r.stopped) return;
      if (r.status == 200 && pos != 0 && r.received == 0) {
        set_failure(str(ref_.str(), ": the server ignored the byte range request (HTTP 200 to a "
                        "Range GET); cannot download in parts from ", hub_.endpoint));
        return;
      }
      if (!r.transport_error && r.status != 206 && r.status != 200) {
        if (r.status >= 500 || r.status == 429 || r.status == 408) {
          if (++attempts >= o_.max_attempts) {
            set_failure(str(ref_.str(), ": the hub kept answering HTTP ", r.status, " (", attempts,
                            " tries); try again later"));
            return;
          }
          backoff(attempts);
          continue;
        }
        try {
          const auto h = [&](const char* n) {
            const auto it = r.headers.find(n);
            return it == r.headers.end() ? std::string() : it->second;
          };
          fail_status(hub_, ref_.str(), ref_.repo, r.status, h("x-error-code"), h("x-error-message"));
        } catch (const Error& e) {
          set_failure(e.what());
        }
        return;
      }
      // A dropped connection or a short body: go on from where it stopped.
      if (r.received > 0) {
        attempts = 0;
      } else if (++attempts >= o_.max_attempts) {
        set_failure(str(ref_.str(), ": the download failed ", attempts, " times in a row without "
                        "progress (", r.transport_error ? r.error : "the body ended early",
                        "); run the same command again to resume"));
        return;
      } else {
        backoff(attempts);
      }
    }
    std::lock_guard<std::mutex> g(mu_);
    save_state(state_path_, state_);
  }

  // Waits attempts seconds before a retry, ending the wait early on a stop.
  void backoff(int attempts) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(attempts);
    while (!should_stop() && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }

  void maybe_report() {
    const auto now = std::chrono::steady_clock::now();
    std::unique_lock<std::mutex> g(report_mu_, std::try_to_lock);
    if (!g.owns_lock() || now - last_report_ < std::chrono::milliseconds(250)) return;
    last_report_ = now;
    if (now - last_save_ > std::chrono::seconds(2)) {
      last_save_ = now;
      std::lock_guard<std::mutex> s(mu_);
      save_state(state_path_, state_);
    }
    report(false);
  }

  const HubConfig& hub_;
  const FileRef& ref_;
  const std::string part_path_, state_path_;
  PartState state_;
  const DownloadOptions& o_;
  int fd_ = -1;
  std::mutex mu_;  // state_, next_, failure_
  size_t next_ = 0;
  std::string failure_;
  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> done_total_{0};
  int64_t resumed_from_ = 0;
  std::chrono::steady_clock::time_point start_;
  std::mutex report_mu_;
  std::chrono::steady_clock::time_point last_report_{}, last_save_{};
};

PartState fresh_state(const FileMetadata& meta, const DownloadOptions& o) {
  PartState s;
  s.etag = meta.etag;
  s.size = meta.size;
  const bool split = o.connections > 1 && o.chunk_bytes > 0 && meta.size >= 2 * o.chunk_bytes;
  s.chunk = split ? o.chunk_bytes : std::max<int64_t>(meta.size, 1);
  s.done.assign(static_cast<size_t>(meta.size == 0 ? 0 : (meta.size + s.chunk - 1) / s.chunk), 0);
  return s;
}

void check_free_space(const std::string& dir, int64_t needed) {
  struct statvfs v {};
  if (::statvfs(dir.c_str(), &v) != 0) return;
  const int64_t free = static_cast<int64_t>(v.f_bavail) * static_cast<int64_t>(v.f_frsize);
  LTX_CHECK(free >= needed, "not enough disk space in ", dir, ": the download needs ", needed,
            " more bytes, ", free, " are free (free space, or pick a cache folder on a larger disk "
            "with --cache-dir)");
}

}  // namespace

FileMetadata fetch_metadata(const HubConfig& hub, const FileRef& ref) {
  check_file_ref(ref, "the file to download");
  HttpRequest req{resolve_url(hub, ref), request_headers(hub), false};
  for (int hop = 0;; ++hop) {
    const HttpResponse r = http_head(req);
    const std::string location = r.header("location");
    if (r.status >= 300 && r.status < 400 && !location.empty() && location.front() == '/' && hop < 10) {
      // A relative redirect (a renamed repository) is the hub's own: follow it.
      const size_t scheme = req.url.find("://");
      const size_t host_end = req.url.find('/', scheme == std::string::npos ? 0 : scheme + 3);
      req.url = req.url.substr(0, host_end) + location;
      continue;
    }
    if (r.status >= 400) fail_status(hub, ref.str(), ref.repo, r.status, r.header("x-error-code"),
                                     r.header("x-error-message"));
    FileMetadata m;
    m.etag = normalise_etag(!r.header("x-linked-etag").empty() ? r.header("x-linked-etag")
                                                                : r.header("etag"));
    m.size = to_int(r.header("x-linked-size"));
    if (m.size < 0 && r.status < 300) m.size = to_int(r.header("content-length"));
    m.commit = r.header("x-repo-commit");
    LTX_CHECK(!m.etag.empty() && m.size >= 0, ref.str(), ": the hub's answer (HTTP ", r.status,
              " from ", req.url, ") has no ETag or size; is ", hub.endpoint,
              " a Hugging Face hub? (HF_ENDPOINT)");
    return m;
  }
}

std::vector<RepoFile> list_repo_files(const HubConfig& hub, const std::string& repo,
                                      const std::string& revision) {
  check_repo_id(repo, "the repository to list");
  const std::string url = model_info_url(hub, repo, revision) + "?blobs=true";
  const HttpResponse r = http_get_text({url, request_headers(hub), true});
  if (r.status >= 400)
    fail_status(hub, "listing " + repo, repo, r.status, r.header("x-error-code"),
                r.header("x-error-message"));
  std::vector<RepoFile> files;
  try {
    const json j = json::parse(r.body);
    for (const json& s : j.at("siblings")) {
      RepoFile f;
      f.path = s.at("rfilename").get<std::string>();
      if (s.contains("size") && s.at("size").is_number_integer()) f.size = s.at("size").get<int64_t>();
      check_file_ref({repo, revision, f.path}, "a file the hub lists");
      files.push_back(std::move(f));
    }
  } catch (const json::exception& e) {
    fail("listing ", repo, ": the hub's answer from ", url, " is not the expected JSON (", e.what(), ")");
  }
  return files;
}

FetchedFile fetch_file(const HubConfig& hub, const ModelCache& cache, const FileRef& ref,
                       const DownloadOptions& o) {
  check_file_ref(ref, "the file to download");
  const std::string final_path = cache.file_path(ref);
  std::error_code ec;
  auto found = [&](const std::string& p) {
    return FetchedFile{p, p == final_path ? FileSource::Cache : FileSource::HuggingFaceCache,
                       static_cast<int64_t>(fs::file_size(p, ec))};
  };
  if (fs::is_regular_file(final_path, ec)) return found(final_path);
  if (o.hf_cache)
    if (const auto p = find_in_hf_cache(ref)) return found(*p);
  LTX_CHECK(!hub.offline, ref.str(), " is not downloaded and the hub is off limits (--offline or "
            "HF_HUB_OFFLINE): run `ltx pull ", ref.str(), "` with the network first");

  const std::string part = cache.partial_path(ref);
  fs::create_directories(fs::path(part).parent_path(), ec);
  LTX_CHECK(!ec, "cannot create ", fs::path(part).parent_path().string(), ": ", ec.message(),
            " (is the model cache writable? --cache-dir picks another)");
  fs::create_directories(fs::path(final_path).parent_path(), ec);
  LTX_CHECK(!ec, "cannot create ", fs::path(final_path).parent_path().string(), ": ", ec.message());

  const FileLock lock(cache.lock_path(ref), ref, o);
  if (fs::is_regular_file(final_path, ec)) return found(final_path);  // the other process got it

  const FileMetadata meta = fetch_metadata(hub, ref);
  const std::string state_path = cache.state_path(ref);
  std::optional<PartState> state = load_state(state_path);
  if (!state || state->etag != meta.etag || state->size != meta.size ||
      !fs::is_regular_file(part, ec)) {
    // Nothing to resume (or another version of the file): start over.
    state = fresh_state(meta, o);
    fs::remove(part, ec);
  }
  check_free_space(fs::path(part).parent_path().string(), meta.size - state->total_done());

  Transfer transfer(hub, ref, part, state_path, *state, o);
  transfer.run();

  const int64_t on_disk = static_cast<int64_t>(fs::file_size(part, ec));
  const EtagKind kind = etag_kind(meta.etag);
  std::string mismatch;
  if (on_disk != meta.size) {
    mismatch = str("the hub says ", meta.size, " bytes, ", on_disk, " arrived");
  } else if (kind != EtagKind::Opaque) {
    transfer.report(true);
    const std::string digest = file_digest(part, kind);
    if (digest != meta.etag)
      mismatch = str("its ", kind == EtagKind::Sha256 ? "SHA-256" : "Git blob SHA-1", " is ",
                     digest, ", the hub's ETag says ", meta.etag);
  } else if (o.notice) {
    o.notice(str(ref.str(), ": the hub's ETag '", meta.etag,
                 "' is not a digest, so only the size of the download was checked"));
  }
  if (!mismatch.empty()) {
    fs::remove(part, ec);
    fs::remove(state_path, ec);
    fail(ref.str(), ": the downloaded file is corrupt (", mismatch, "); it was removed, run the "
         "same command again to download it anew");
  }
  fs::rename(part, final_path, ec);
  LTX_CHECK(!ec, "cannot move ", part, " to ", final_path, ": ", ec.message());
  fs::remove(state_path, ec);
  return {final_path, FileSource::Downloaded, meta.size};
}

}  // namespace ltx::hub
