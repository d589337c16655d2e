#pragma once
// The server's data dir (--data-dir) and the files in it:
//   DATA/ltx-serve.db          the job store (server/job_store.h), with SQLite's -wal and -shm
//   DATA/lock                  flock'd by the one server using the dir; holds its pid
//   DATA/outputs/<id>.mp4      a completed job's video (written as <id>.mp4.tmp, then renamed),
//                              or <id>.wav (audio only) / <id>.png (one frame) / <id>.tar
//                              (hdr-ic-lora: its EXR frames and preview, built in
//                              <id>.parts.tmp/ and archived)
//   DATA/outputs/<id>.png      a video's thumbnail (server/thumbnail_sink.h), when one was made
//   DATA/inputs/<id>/<n>.<ext> a job's uploads: conditioning images, then video / audio files
//                              (written in <id>.tmp/, then renamed)
// Every path is built from a checked job id (is_job_id) and names the store chose; none comes from
// request text. Writes that must survive a crash go to a temporary name, are fsync'd, renamed and
// the folder fsync'd, so after a crash a file is either whole under its final name or a *.tmp
// leftover that recovery deletes.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ltx::server {

// "video_" + 32 lowercase hex digits (128 bits) from getrandom.
std::string new_job_id();
// 64 lowercase hex digits (256 bits) from getrandom: a job's download token.
std::string new_token();

// SHA-256 (OpenSSL's libcrypto) as 64 lowercase hex digits.
std::string sha256_hex(std::string_view bytes);
std::string sha256_hex_of_file(const std::string& path);  // throws ltx::Error naming the file

// fsync of a file / a folder (after a rename in it); throw ltx::Error naming the path.
void fsync_file(const std::string& path);
void fsync_folder(const std::string& path);
// Writes `bytes` to "<path>.tmp", fsyncs it, renames it onto `path` and fsyncs the folder.
void write_file_atomic(const std::string& path, std::string_view bytes);

// An upload to keep with a new job (a conditioning image, a video / audio file, a safetensors
// file): its bytes and the file extension of its format ("png", "jpg", "exr", "mp4",
// "safetensors", ...: 1-12 lowercase letters or digits, chosen by the caller from the checked
// format, never from a client's file name).
struct InputImage {
  std::string bytes;
  std::string ext;
};

// Bytes the data dir holds, for /ready, /metrics and the log.
struct DiskUsage {
  int64_t outputs_bytes = 0;   // videos and thumbnails (temporaries included)
  int64_t inputs_bytes = 0;    // conditioning images
  int64_t database_bytes = 0;  // the job store with its WAL
  int64_t total() const { return outputs_bytes + inputs_bytes + database_bytes; }
};

// What is on disk under outputs/ and inputs/, by job id, for recovery.
struct DirListing {
  std::vector<std::string> output_ids;   // ids with <id>.mp4, <id>.wav, <id>.png or <id>.tar
  std::vector<std::string> input_ids;    // ids with an inputs/<id>/ folder
  std::vector<std::string> temporaries;  // *.tmp files and folders (full paths)
};

class DataDir {
 public:
  // Creates `root` and its outputs/ and inputs/ folders when missing and takes the lock: one server
  // per data dir. Throws ltx::Error naming the folder at fault (a file in the way, no permission)
  // or, when another process holds the lock, naming the dir and that process's pid.
  explicit DataDir(std::string root);
  ~DataDir();  // releases the lock
  DataDir(const DataDir&) = delete;
  DataDir& operator=(const DataDir&) = delete;

  const std::string& root() const { return root_; }
  std::string db_path() const;
  std::string outputs_dir() const;
  std::string inputs_dir() const;

  // Paths of a job's files; throw ltx::Error unless `id` is a job id (and `file` one of the names
  // store_inputs gives).
  // outputs/<id>.<ext>: ext "mp4" (a video), "wav" (audio only), "png" (one frame: the same
  // file as its thumbnail, an image being its own) or "tar" (several files: hdr-ic-lora's).
  std::string output_path(const std::string& id, const std::string& ext = "mp4") const;
  // outputs/<id>.parts.tmp: a folder where a job builds the files its tar output archives (a
  // temporary: removed with the job's outputs, and by recovery).
  std::string parts_path(const std::string& id) const;
  // outputs/<file> when `file` is one of the names output_path gives `id`.
  std::string output_file_path(const std::string& id, const std::string& file) const;
  std::string thumbnail_path(const std::string& id) const;  // outputs/<id>.png
  std::string inputs_path(const std::string& id) const;     // inputs/<id>
  std::string input_path(const std::string& id, const std::string& file) const;

  // Writes the images as inputs/<id>.tmp/<n>.<ext> (n = 0, 1, ...), fsyncs them and the folder,
  // renames it to inputs/<id> and fsyncs inputs/. Returns the file names, in order. Nothing is left
  // behind when it throws. No images: nothing is written and the result is empty.
  std::vector<std::string> store_inputs(const std::string& id,
                                        const std::vector<InputImage>& images) const;
  // Removes a job's output, thumbnail, inputs and their temporaries (missing ones are fine).
  void remove_job_files(const std::string& id) const;
  void remove_job_inputs(const std::string& id) const;
  void remove_job_outputs(const std::string& id) const;

  // fsyncs a completed job's output and outputs/ (after the writer's rename): the output is then
  // on disk before the store records it.
  void sync_output(const std::string& id, const std::string& ext = "mp4") const;

  DirListing listing() const;
  // Deletes the leftovers of interrupted writes; returns how many.
  int remove_temporaries() const;
  DiskUsage disk_usage() const;

 private:
  std::string root_;
  int lock_fd_ = -1;
};

}  // namespace ltx::server
