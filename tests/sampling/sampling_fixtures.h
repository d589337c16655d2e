#pragma once
// Access to the golden sampling fixtures (tests/fixtures/sampling_*.safetensors, latent_tools).
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "io/safetensors.h"
#include "sampling/loops.h"
#include "support/test_support.h"

namespace ltx::test {

// The fixture file, opened once per process.
inline const io::SafetensorsFile& golden(const std::string& name) {
  static std::map<std::string, std::unique_ptr<io::SafetensorsFile>> files;
  auto& f = files[name];
  if (!f) f = std::make_unique<io::SafetensorsFile>(fixture(name + ".safetensors"));
  return *f;
}

// A tensor of a fixture file (a CPU copy, safe to modify).
inline Tensor golden_tensor(const std::string& file, const std::string& name) {
  return golden(file).tensor(name).clone();
}

// A JSON-valued metadata entry.
inline nlohmann::json golden_meta(const std::string& file, const std::string& key) {
  const auto& md = golden(file).metadata();
  auto it = md.find(key);
  if (it == md.end()) return nlohmann::json();
  return nlohmann::json::parse(it->second);
}

// The loop fixture's initial states (tests/fixtures/sampling_loops): video tokens 0..23 conditioned
// (mask 0, a random clean latent), audio fully generated from zeros; CPU tensors. A `video_mask`
// >= 0 replaces the video mask with that value for every token.
inline sampling::AVState loop_fixture_state(double video_mask = -1) {
  const auto in = [](const std::string& name) { return golden_tensor("sampling_loops", name); };
  sampling::LatentState v;
  v.latent = in("in.video.init");
  v.clean_latent = in("in.video.clean");
  v.denoise_mask = in("in.video.denoise_mask");
  if (video_mask >= 0) v.denoise_mask = Tensor::full(v.denoise_mask.shape(), video_mask);
  v.positions = Tensor::zeros({1, 3, 48, 2});
  sampling::LatentState a;
  a.latent = in("in.audio.init");
  a.clean_latent = in("in.audio.clean");
  a.denoise_mask = in("in.audio.denoise_mask");
  a.positions = Tensor::zeros({1, 1, 9, 2});
  sampling::AVState st;
  st.video = v;
  st.audio = a;
  return st;
}

}  // namespace ltx::test
