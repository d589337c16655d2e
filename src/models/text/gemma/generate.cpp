#include "models/text/gemma/generate.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>

#include "core/error.h"
#include "sampling/noise.h"

namespace ltx::text {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

int64_t argmax(const std::vector<float>& v) {
  int64_t best = 0;
  for (size_t i = 1; i < v.size(); ++i)
    if (v[i] > v[static_cast<size_t>(best)]) best = static_cast<int64_t>(i);
  return best;
}

// softmax over finite entries, computed in double.
std::vector<double> softmax(const std::vector<float>& v) {
  double mx = -std::numeric_limits<double>::infinity();
  for (const float x : v) mx = std::max(mx, static_cast<double>(x));
  std::vector<double> p(v.size());
  double sum = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    p[i] = std::isinf(v[i]) && v[i] < 0 ? 0.0 : std::exp(static_cast<double>(v[i]) - mx);
    sum += p[i];
  }
  for (auto& x : p) x /= sum;
  return p;
}

}  // namespace

void apply_no_repeat_ngram(std::vector<float>& logits, const std::vector<int64_t>& sequence,
                           int64_t n) {
  const auto len = static_cast<int64_t>(sequence.size());
  if (n <= 0 || len + 1 < n) return;
  // The last n-1 tokens; every earlier occurrence of them bans the token that followed.
  const int64_t start = len + 1 - n;
  for (int64_t i = 0; i + n <= len; ++i) {
    bool match = true;
    for (int64_t j = 0; j < n - 1 && match; ++j)
      match = sequence[static_cast<size_t>(i + j)] == sequence[static_cast<size_t>(start + j)];
    if (!match) continue;
    const int64_t banned = sequence[static_cast<size_t>(i + n - 1)];
    if (banned >= 0 && banned < static_cast<int64_t>(logits.size()))
      logits[static_cast<size_t>(banned)] = kNegInf;
  }
}

void apply_sampling_warpers(std::vector<float>& logits, double temperature, int64_t top_k,
                            double top_p) {
  LTX_CHECK(temperature > 0, "generation: temperature must be positive, got ", temperature);
  if (temperature != 1.0) {
    const float t = static_cast<float>(temperature);
    for (auto& x : logits) x = x / t;
  }
  const auto V = static_cast<int64_t>(logits.size());
  if (top_k > 0 && top_k < V) {
    std::vector<float> sorted = logits;
    std::nth_element(sorted.begin(), sorted.begin() + (top_k - 1), sorted.end(),
                     std::greater<float>());
    const float kth = sorted[static_cast<size_t>(top_k - 1)];
    for (auto& x : logits)
      if (x < kth) x = kNegInf;
  }
  if (top_p < 1.0) {
    // HF: sort ascending, drop the entries whose cumulative probability is <= 1 - top_p, always
    // keeping the most likely one.
    std::vector<int64_t> order(static_cast<size_t>(V));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return logits[static_cast<size_t>(a)] < logits[static_cast<size_t>(b)];
    });
    const std::vector<double> p = softmax(logits);
    double cum = 0;
    for (int64_t r = 0; r + 1 < V; ++r) {
      const auto idx = static_cast<size_t>(order[static_cast<size_t>(r)]);
      cum += p[idx];
      if (cum <= 1.0 - top_p) logits[idx] = kNegInf;
    }
  }
}

GenerationResult generate(const GemmaTextModel& model, const std::vector<int64_t>& input_ids,
                          const std::vector<int64_t>& attention_mask, const GenerationConfig& cfg,
                          bool keep_logits, const GemmaPrefillImages* images) {
  const auto P = static_cast<int64_t>(input_ids.size());
  LTX_CHECK(P > 0, "generation: the prompt is empty");
  LTX_CHECK(attention_mask.size() == input_ids.size(), "generation: ", attention_mask.size(),
            " mask entries for ", P, " prompt tokens");
  LTX_CHECK(cfg.max_new_tokens > 0, "generation: max_new_tokens must be positive, got ",
            cfg.max_new_tokens);
  GenerationResult result;
  GemmaKvCache cache = model.make_cache(1, P + cfg.max_new_tokens);
  std::vector<int64_t> positions(static_cast<size_t>(P));
  int64_t valid = 0;
  for (int64_t i = 0; i < P; ++i) {
    valid += attention_mask[static_cast<size_t>(i)] != 0;
    positions[static_cast<size_t>(i)] = std::max<int64_t>(valid - 1, 0);
  }
  std::vector<int64_t> sequence = input_ids;
  sampling::TorchCpuGenerator rng(static_cast<int64_t>(cfg.seed));

  Tensor hidden =
      model.forward(Tensor::from_vector(input_ids, {1, P}), Tensor::from_vector(positions, {1, P}),
                    Tensor::from_vector(attention_mask, {1, P}), cache, nullptr, nullptr, images);
  Tensor last = hidden.select(1, P - 1);
  for (int64_t step = 0; step < cfg.max_new_tokens; ++step) {
    std::vector<float> logits = model.logits(last).to_float_vector();
    if (keep_logits) result.logits.push_back(logits);
    apply_no_repeat_ngram(logits, sequence, cfg.no_repeat_ngram_size);
    int64_t token = 0;
    if (cfg.do_sample) {
      apply_sampling_warpers(logits, cfg.temperature, cfg.top_k, cfg.top_p);
      const std::vector<double> p = softmax(logits);
      double best = -1;
      for (size_t i = 0; i < p.size(); ++i) {
        // q ~ Exp(1) from a 53-bit uniform in (0, 1).
        const double u = (static_cast<double>(rng.random64() >> 11) + 0.5) * 0x1.0p-53;
        const double score = p[i] / -std::log(u);
        if (score > best) {
          best = score;
          token = static_cast<int64_t>(i);
        }
      }
    } else {
      token = argmax(logits);
    }
    result.tokens.push_back(token);
    sequence.push_back(token);
    if (std::find(cfg.eos_token_ids.begin(), cfg.eos_token_ids.end(), token) !=
        cfg.eos_token_ids.end())
      break;
    if (step + 1 == cfg.max_new_tokens) break;
    ++valid;
    hidden = model.forward(Tensor::from_vector(std::vector<int64_t>{token}, {1, 1}),
                           Tensor::from_vector(std::vector<int64_t>{valid - 1}, {1, 1}),
                           Tensor::from_vector(std::vector<int64_t>{1}, {1, 1}), cache);
    last = hidden.select(1, 0);
  }
  return result;
}

}  // namespace ltx::text
