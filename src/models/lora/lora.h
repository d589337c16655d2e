#pragma once
// LoRA adapters for the transformer (reference: loader/fuse_loras.py, loader/sd_ops.py
// LTXV_LORA_COMFY_RENAMING_MAP, ltx-pipelines utils/args.py LoraAction).
//
// File format: safetensors with factor pairs `<target>.lora_A.weight` [r, in] and
// `<target>.lora_B.weight` [out, r], usually under a `diffusion_model.` prefix (ComfyUI layout, as
// the reference's trainer saves them). The reference removes every "diffusion_model." from the
// names; what remains, with ".weight" for ".lora_A.weight", is the name of the model weight the
// pair adapts, exactly as the transformer's WeightMap names it ("transformer_blocks.0.attn1.to_q
// .weight"). `<target>.alpha` tensors are accepted and ignored: the reference applies no alpha/rank
// scaling (its trainer saves LoRAs with alpha = rank, i.e. a scale of 1).
//
// Stricter than the reference, which skips silently what it does not understand: a file opened
// strict (the default) rejects names that are neither factor nor alpha, half pairs, factors that
// are not 2-D or whose ranks differ, duplicate names after renaming and files without any pair;
// fusing rejects targets the model's weights lack and factors that do not fit the target's
// [out, in]. Opened with strict = false, unknown names and absent targets are skipped with a
// warning, as the reference does (e.g. an audio-video LoRA on the audio-only model); shape
// mismatches stay errors (the reference fails on them too).
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "io/safetensors.h"

namespace ltx::lora {

// The strength `--lora PATH` and `--distilled-lora PATH` use when none is given
// (DEFAULT_LORA_STRENGTH).
inline constexpr double kDefaultStrength = 1.0;

// `--lora PATH [STRENGTH]` as given on the command line.
struct LoraSpec {
  std::string path;
  double strength = kDefaultStrength;
};

struct OpenOptions {
  bool strict = true;
};

// One LoRA file, validated, with its factor pairs keyed by the model weight they adapt.
class LoraFile {
 public:
  struct Pair {
    Tensor a;  // lora_A [rank, in], zero-copy view of the file (its stored dtype)
    Tensor b;  // lora_B [out, rank]
    int64_t rank() const { return a.size(0); }
  };

  // Opens, maps and validates `path` (errors name the file and the offending tensor).
  static std::shared_ptr<const LoraFile> open(const std::string& path, const OpenOptions& opt = {});
  // The same checks on a file already opened (e.g. SafetensorsFile::from_bytes).
  static std::shared_ptr<const LoraFile> from_file(std::shared_ptr<const io::SafetensorsFile> file,
                                                   const OpenOptions& opt = {});

  const std::string& path() const { return file_->path(); }
  bool strict() const { return strict_; }
  // target weight name ("transformer_blocks.0.attn1.to_q.weight") -> factors, sorted by name.
  const std::map<std::string, Pair>& targets() const { return targets_; }
  // The underlying file, e.g. for metadata the pipelines read (IC-LoRA
  // `reference_downscale_factor`: file().metadata_json("reference_downscale_factor")).
  const io::SafetensorsFile& file() const { return *file_; }

 private:
  std::shared_ptr<const io::SafetensorsFile> file_;
  bool strict_ = true;
  std::map<std::string, Pair> targets_;
};

// A LoRA at the strength one stage uses it.
struct WeightedLora {
  std::shared_ptr<const LoraFile> lora;
  double strength = kDefaultStrength;
};

// The LoRAs fused into one stage's weights, in order. The order matters at the bit level (the
// reference rounds the first product differently from the later ones): keep the reference's,
// i.e. the user's `--lora` list first, then the distilled LoRA (ti2vid_two_stages.py stage 2).
using LoraSet = std::vector<WeightedLora>;

// Opens every spec's file (a path given twice is opened once) with its strength, in order.
LoraSet open_set(const std::vector<LoraSpec>& specs, const OpenOptions& opt = {});

// True when the set fuses nothing: empty, or every strength 0 (the reference then loads the base
// weights untouched, even where a zero-strength LoRA would otherwise round them to bf16).
bool is_identity(const LoraSet& set);

// "a.safetensors (0.8), b.safetensors (1)" for logs.
std::string describe(const LoraSet& set);

namespace detail {
// "a, b, c and 4 more": the first `max_items` items of a list, for error messages.
std::string list_some(const std::vector<std::string>& items, size_t max_items = 8);
}  // namespace detail

}  // namespace ltx::lora
