#include "models/transformer/perturbations.h"

#include <algorithm>

namespace ltx::models::transformer {

bool Perturbation::is_perturbed(PerturbationType t, int64_t block) const {
  if (type != t) return false;
  if (!blocks) return true;
  return std::find(blocks->begin(), blocks->end(), block) != blocks->end();
}

bool PerturbationConfig::is_perturbed(PerturbationType t, int64_t block) const {
  return std::any_of(perturbations.begin(), perturbations.end(),
                     [&](const Perturbation& p) { return p.is_perturbed(t, block); });
}

BatchedPerturbationConfig::BatchedPerturbationConfig(const std::vector<PerturbationConfig>& per_sample,
                                                     int64_t num_blocks)
    : batch_(static_cast<int64_t>(per_sample.size())), blocks_(num_blocks) {
  LTX_CHECK(num_blocks >= 0, "perturbations: negative block count");
  keep_.resize(static_cast<size_t>(kNumPerturbationTypes * blocks_ * batch_));
  for (int t = 0; t < kNumPerturbationTypes; ++t)
    for (int64_t b = 0; b < blocks_; ++b)
      for (int64_t s = 0; s < batch_; ++s)
        keep_[index(static_cast<PerturbationType>(t), b, s)] =
            !per_sample[s].is_perturbed(static_cast<PerturbationType>(t), b);
}

BatchedPerturbationConfig BatchedPerturbationConfig::empty(int64_t batch_size, int64_t num_blocks) {
  return BatchedPerturbationConfig(std::vector<PerturbationConfig>(batch_size), num_blocks);
}

BatchedPerturbationConfig BatchedPerturbationConfig::uniform(const PerturbationConfig& config,
                                                             int64_t batch_size,
                                                             int64_t num_blocks) {
  return BatchedPerturbationConfig(std::vector<PerturbationConfig>(batch_size, config), num_blocks);
}

size_t BatchedPerturbationConfig::index(PerturbationType t, int64_t block, int64_t sample) const {
  const int ti = static_cast<int>(t);
  LTX_CHECK(ti >= 0 && ti < kNumPerturbationTypes && block >= 0 && block < blocks_ && sample >= 0 &&
                sample < batch_,
            "perturbations: (type ", ti, ", block ", block, ", sample ", sample,
            ") is outside a config of ", blocks_, " blocks and ", batch_, " samples");
  return static_cast<size_t>((ti * blocks_ + block) * batch_ + sample);
}

bool BatchedPerturbationConfig::keep(PerturbationType t, int64_t block, int64_t sample) const {
  return keep_[index(t, block, sample)] != 0;
}

Tensor BatchedPerturbationConfig::mask(PerturbationType t, int64_t block, Device device) const {
  std::vector<float> m(static_cast<size_t>(batch_));
  for (int64_t s = 0; s < batch_; ++s) m[s] = keep(t, block, s) ? 1.f : 0.f;
  return Tensor::from_vector(m, {batch_, 1, 1}).to(device);
}

bool BatchedPerturbationConfig::any_in_batch(PerturbationType t, int64_t block) const {
  for (int64_t s = 0; s < batch_; ++s)
    if (!keep(t, block, s)) return true;
  return false;
}

bool BatchedPerturbationConfig::all_in_batch(PerturbationType t, int64_t block) const {
  for (int64_t s = 0; s < batch_; ++s)
    if (keep(t, block, s)) return false;
  return true;
}

}  // namespace ltx::models::transformer
