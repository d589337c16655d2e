#pragma once
// Shared helpers of the Gemma tests: the golden text cases (shared/golden/README-text.md) and
// rewriting fixture files.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "io/safetensors.h"
#include "models/text/gemma/model.h"
#include "models/text/gemma_assets.h"
#include "support/test_support.h"

namespace ltx::test {

// The io file of a golden text case ("ltx23": Gemma 3, "ltx25": Gemma 4 unified).
inline const io::SafetensorsFile& text_io(const std::string& name) {
  static const auto io23 = io::SafetensorsFile::open(fixture("text_ltx23.io.safetensors"));
  static const auto io25 = io::SafetensorsFile::open(fixture("text_ltx25.io.safetensors"));
  return name == "ltx23" ? *io23 : *io25;
}

// ||a - b|| / ||b|| in double, expecting as many elements in both (||a - b|| when b is zero).
// Not cuda_test_util.h's rel_l2, which differs for a zero b; both reach test_models.
inline double rel_l2_same_size(const Tensor& a, const Tensor& b) {
  const auto x = a.to_double_vector(), y = b.to_double_vector();
  EXPECT_EQ(x.size(), y.size());
  double d = 0, n = 0;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
    d += (x[i] - y[i]) * (x[i] - y[i]);
    n += y[i] * y[i];
  }
  return n > 0 ? std::sqrt(d / n) : std::sqrt(d);
}

// Every tensor of `src` (renamed by `rename`; an empty name drops it) written to `dst` with
// `src`'s metadata patched by `patch_meta`.
template <typename Rename, typename PatchMeta>
void rewrite_safetensors(const std::string& src, const std::string& dst, Rename rename,
                         PatchMeta patch_meta) {
  const io::SafetensorsFile f(src);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& n : f.names()) {
    const std::string m = rename(n);
    if (!m.empty()) tensors.emplace_back(m, f.tensor(n));
  }
  std::map<std::string, std::string> meta = f.metadata();
  patch_meta(meta);
  io::write_safetensors(dst, tensors, meta);
}

}  // namespace ltx::test
