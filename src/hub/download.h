#pragma once
// Downloading one file of a hub repository into the model cache (hub/model_cache.h), as
// huggingface_hub's hf_hub_download does, plus what it leaves out:
//
//   1. A file already complete in this cache or in Hugging Face's is used where it is.
//   2. One process downloads a file at a time: the others wait on its lock (flock) and then find
//      the file complete.
//   3. HEAD of the resolve URL (relative redirects followed, as for a renamed repository; an
//      absolute one is the CDN and not followed) gives the ETag (X-Linked-Etag, else ETag, quotes
//      and W/ removed), the size (X-Linked-Size, else Content-Length) and the commit
//      (X-Repo-Commit).
//   4. The bytes go to <file>.part with HTTP Range requests through the redirect to the CDN
//      (libcurl does not send the token to another host). Large files are cut into chunks that
//      several connections fetch at once; what each chunk holds is recorded in <file>.part.json,
//      so an interrupted download (Ctrl-C, a dropped connection, a crash) resumes where it stopped.
//      A connection that drops mid-file is retried from where it stopped.
//   5. The size and the digest the ETag names (SHA-256 for LFS files, the Git blob SHA-1 for small
//      ones) are checked before the file is renamed to its final name; a mismatch removes the
//      partial file. A file at its final name is therefore always complete.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/cancel.h"
#include "hub/hub_config.h"
#include "hub/model_cache.h"

namespace ltx::hub {

struct FileMetadata {
  std::string etag;    // normalised: no quotes, no W/
  int64_t size = -1;
  std::string commit;  // X-Repo-Commit ("" when the hub did not say)
};

// HEAD of the file's resolve URL. Throws an ltx::Error naming the file and what to do: a gated
// or private repository without (or with a refused) token names --token / HF_TOKEN and the page
// to accept the terms on; a missing file, revision or repository says which.
FileMetadata fetch_metadata(const HubConfig& hub, const FileRef& ref);

struct RepoFile {
  std::string path;
  int64_t size = -1;  // -1: not given by the hub
};
// Every file of a repository at a revision ({endpoint}/api/models/{repo}/revision/{rev}?blobs=true,
// huggingface_hub's model_info siblings), each path checked as check_file_ref does.
std::vector<RepoFile> list_repo_files(const HubConfig& hub, const std::string& repo,
                                      const std::string& revision);

struct TransferProgress {
  FileRef file;
  int64_t done = 0;          // bytes on disk
  int64_t total = 0;
  int64_t resumed_from = 0;  // bytes that were already there when this run started
  double seconds = 0.0;      // since this run started
  bool verifying = false;    // all bytes are there, the digest is being checked
};

struct DownloadOptions {
  int connections = 4;                  // parallel ranges of one file (1: one stream)
  int64_t chunk_bytes = int64_t{64} << 20;  // files of at least two chunks are split
  int max_attempts = 5;                 // tries of a range in a row that bring no new byte
  std::function<void(const TransferProgress&)> progress;  // a few times a second at most
  std::function<void(const std::string&)> notice;         // waiting on a lock, unverifiable ETag
  const CancelToken* cancel = nullptr;  // stops at once, keeping the .part for a resume
  bool hf_cache = true;  // a file Hugging Face's cache holds is used from there
};

enum class FileSource { Cache, HuggingFaceCache, Downloaded };

struct FetchedFile {
  std::string path;
  FileSource source = FileSource::Cache;
  int64_t size = 0;
};

// The file on disk, downloaded first when neither cache has it. Offline (hub.offline) a missing
// file is an error. A stop through options.cancel throws ltx::Cancelled and keeps the partial
// file; any other failure throws an ltx::Error. Nothing is ever left at the final path but a
// complete, verified file.
FetchedFile fetch_file(const HubConfig& hub, const ModelCache& cache, const FileRef& ref,
                       const DownloadOptions& options);

}  // namespace ltx::hub
