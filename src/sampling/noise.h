#pragma once
// Random noise for sampling.
//
// TorchCpuGenerator reproduces torch.Generator(device="cpu").manual_seed(seed) followed by
// torch.randn(shape, dtype=float32 | float64, generator=g) bit for bit (see docs/SAMPLING.md):
//   * the engine is MT19937 seeded with the low 32 bits of the seed (a negative seed is taken
//     modulo 2^64 first, as torch does, so -1 seeds with 0xFFFFFFFF);
//   * tensors of >= 16 elements: every element first gets a uniform draw (f32: 24 bits of one
//     32-bit output; f64: 53 bits of two outputs), then each block of 16 is turned into normals by
//     Box-Muller on pairs (j, j + 8); when numel % 16 != 0 the last 16 elements are drawn again and
//     transformed. f32 uses the AVX2 kernel's Cephes-style log/sincos polynomials with the fused
//     multiply-adds the reference build produces; f64 uses the C library's log/sin/cos;
//   * tensors of < 16 elements: one double Box-Muller pair per two elements, with the second value
//     cached in the generator (torch's normal_distribution<double>), consumed by the next such draw.
// The uniform stream is serial; the Box-Muller transform runs on the thread pool in fixed blocks,
// so results do not depend on the thread count.
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <random>
#include <string>

#include "core/tensor.h"

namespace ltx::sampling {

// Anything that hands out standard-normal tensors (CPU tensors of the requested shape/dtype).
class NoiseSource {
 public:
  virtual ~NoiseSource() = default;
  // A new tensor of independent N(0, 1) samples. dtype F32, F64 or BF16 (BF16 is drawn as F32 and
  // rounded; torch's own bf16 CPU path is not reproduced).
  virtual Tensor randn(const Shape& shape, DType dtype = DType::F32) = 0;
};

class TorchCpuGenerator final : public NoiseSource {
 public:
  explicit TorchCpuGenerator(int64_t seed) { manual_seed(seed); }
  // torch.Generator.manual_seed: resets the engine and drops any cached normal sample.
  void manual_seed(int64_t seed);
  int64_t initial_seed() const { return seed_; }

  Tensor randn(const Shape& shape, DType dtype = DType::F32) override;

  // Raw engine outputs, for tests and for other distributions built on the same stream.
  uint32_t random() { return engine_(); }
  uint64_t random64();  // two outputs, the first in the high half

 private:
  void fill_f32(float* out, int64_t n);
  void fill_f64(double* out, int64_t n);
  double next_normal_double();  // torch's normal_distribution<double>, with its cache

  std::mt19937 engine_;
  int64_t seed_ = 0;
  std::optional<double> cached_normal_;
};

// Hands out pre-recorded tensors in order (parity tests, or noise exported from the reference).
// randn() checks that the requested shape matches the next tensor and returns it converted to the
// requested dtype; running out or a shape mismatch throws.
class RecordedNoise final : public NoiseSource {
 public:
  RecordedNoise() = default;
  explicit RecordedNoise(std::vector<Tensor> tensors) : queue_(tensors.begin(), tensors.end()) {}
  void push(const Tensor& t) { queue_.push_back(t); }
  size_t remaining() const { return queue_.size(); }
  size_t consumed() const { return consumed_; }
  // Returns the next tensor exactly as recorded (dtype unchanged); checks the shape.
  Tensor next(const Shape& shape);
  Tensor randn(const Shape& shape, DType dtype = DType::F32) override;

 private:
  std::deque<Tensor> queue_;
  size_t consumed_ = 0;
};

// The samplers' noise hook (the reference's `new_noise_fn(latent, generator)`): returns the noise
// for a latent of `shape` / `dtype`, drawing from `generator`.
using NoiseFn = std::function<Tensor(const Shape& shape, DType dtype, NoiseSource& generator)>;

// `generator.randn(shape, dtype)`: the ancestral / CFG++ samplers' plain noise.
Tensor plain_noise(const Shape& shape, DType dtype, NoiseSource& generator);
// The res_2s noise: f64 randn of `shape`, normalised to zero mean / unit (unbiased) std over the
// whole tensor, then again per leading index over the last two dims. Returns F64 (dtype ignored).
Tensor res2s_noise(const Shape& shape, DType dtype, NoiseSource& generator);
// The normalisation of res2s_noise applied to an existing tensor (returned as F64).
Tensor normalize_res2s_noise(const Tensor& noise);

}  // namespace ltx::sampling
