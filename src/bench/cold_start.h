#pragma once
// `ltx bench cold-start`: how long a user waits from starting `ltx generate` to its first
// denoising step, with real model files (bench/model_files.h, written first when missing) that
// are in the page cache. The generation runs as a child process of this binary (so process
// start, library loading and argument parsing count) with its progress as plain lines on a pipe;
// each line is stamped on arrival. The child is interrupted (SIGINT) once the first denoising
// step has finished, unless the whole clip was asked for.
//
// Runs: the first one reads the files (after writing them, they are usually cached already);
// later ones (`runs` > 1) see a warm page cache for sure. The report keeps every run.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ltx::bench {

struct ColdStartOptions {
  std::string preset = "ltx23-22b";
  std::string dir;  // where the model files are (written when missing)
  std::string device = "cpu";
  std::string pipeline = "distilled";
  int64_t width = 768, height = 512, frames = 121;
  int runs = 2;
  bool whole_clip = false;  // let every run finish the clip instead of stopping after step 1
  std::vector<std::string> extra_args;  // more `ltx generate` flags (e.g. --quantization fp8-cast)
  std::string ltx_binary;  // empty: this process's own executable
};

// One line of the child's output and when it arrived (seconds since the child was started).
struct StampedLine {
  double seconds = 0;
  std::string text;
};

struct ColdStartRun {
  std::vector<StampedLine> lines;
  // Seconds since the child started; negative when the line never came.
  double first_output = -1;  // the first line
  double denoising_start = -1;  // "ltx: stage 1 ..."
  double first_step = -1;       // "ltx: stage 1: step 1/N"
  double exit_seconds = -1;
  int exit_code = 0;            // the child's status (130 when interrupted after the first step)
  bool interrupted = false;
};

struct ColdStartResult {
  ColdStartOptions options;
  std::vector<std::string> files;
  std::vector<std::pair<std::string, double>> written;  // files written by this run, seconds
  std::vector<ColdStartRun> runs;
};

ColdStartResult run_cold_start(const ColdStartOptions& o);
nlohmann::json cold_start_json(const ColdStartResult& r);
std::string format_cold_start(const ColdStartResult& r);

}  // namespace ltx::bench
