#pragma once
// Attention perturbations used by guidance (reference: guidance/perturbations.py): STG skips a
// stream's self-attention in chosen blocks, modality guidance skips the audio<->video
// cross-attention. Each sample of a batch has its own list; the batched form holds keep-masks
// [type][block][sample] (1 = keep, 0 = perturbed).
#include <cstdint>
#include <optional>
#include <vector>

#include "core/tensor.h"

namespace ltx::models::transformer {

enum class PerturbationType : int {
  SkipVideoSelfAttn = 0,
  SkipAudioSelfAttn = 1,
  SkipA2VCrossAttn = 2,
  SkipV2ACrossAttn = 3,
};
inline constexpr int kNumPerturbationTypes = 4;

struct Perturbation {
  PerturbationType type;
  std::optional<std::vector<int64_t>> blocks;  // nullopt: every block (0-based indices)
  bool is_perturbed(PerturbationType t, int64_t block) const;
};

// The perturbations of one sample (empty: none).
struct PerturbationConfig {
  std::vector<Perturbation> perturbations;
  bool is_perturbed(PerturbationType t, int64_t block) const;
};

class BatchedPerturbationConfig {
 public:
  BatchedPerturbationConfig(const std::vector<PerturbationConfig>& per_sample, int64_t num_blocks);
  // Nothing perturbed.
  static BatchedPerturbationConfig empty(int64_t batch_size, int64_t num_blocks);
  // The same perturbations for every sample.
  static BatchedPerturbationConfig uniform(const PerturbationConfig& config, int64_t batch_size,
                                           int64_t num_blocks);

  int64_t batch_size() const { return batch_; }
  int64_t num_blocks() const { return blocks_; }
  bool keep(PerturbationType t, int64_t block, int64_t sample) const;
  // This block's [B, 1, 1] f32 keep-mask for one type.
  Tensor mask(PerturbationType t, int64_t block, Device device = Device::cpu()) const;
  bool any_in_batch(PerturbationType t, int64_t block) const;  // some sample perturbed
  bool all_in_batch(PerturbationType t, int64_t block) const;  // every sample perturbed

 private:
  int64_t batch_ = 0, blocks_ = 0;
  std::vector<uint8_t> keep_;  // [type][block][sample]
  size_t index(PerturbationType t, int64_t block, int64_t sample) const;
};

}  // namespace ltx::models::transformer
