#pragma once
// The cuDNN convolution choices (conv_cudnn.cpp) kept on disk, so that a later process skips the
// timing: the first conv VAE decode of a process otherwise times cudnnFind's algorithms and up to
// 8 backend plans for each of its ~80 geometries (about 2.5 s on an H200, more than the decode;
// bench/RESULTS.md).
//
// One JSON file; entries are grouped by a device key (GPU name, compute capability, SM count,
// cuDNN runtime version), so a file shared between GPUs or cuDNN upgrades never hands one's
// choice to another. The file: LTX_TUNING_CACHE when set (a path; "0" or "off": memory only),
// else $XDG_CACHE_HOME/ltx/cudnn-conv-v1.json, else $HOME/.cache/ltx/cudnn-conv-v1.json, else
// memory only. Read once on first use; every new choice rewrites it (merged with what other
// processes wrote meanwhile, through a temporary file and a rename, so a reader never sees half a
// file). An unreadable or malformed file is ignored (and replaced by the next write); a write that
// fails only costs the next process its timing.
#include <optional>
#include <string>

namespace ltx::cuda::conv_tuning {

// A stored choice. `value` is the caller's own encoding (conv_cudnn.cpp: the legacy algorithm and
// its workspace, or the backend plan's engine config name and the times).
std::optional<std::string> lookup(int device, const std::string& key);
void store(int device, const std::string& key, const std::string& value);

// The file in use ("" when memory only).
std::string path();
// Tests: use `file` from now on ("" for memory only) and forget what was loaded.
void set_path_for_tests(const std::string& file);

}  // namespace ltx::cuda::conv_tuning
