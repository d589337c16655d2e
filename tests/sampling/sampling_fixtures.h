#pragma once
// Access to the golden sampling fixtures (tests/fixtures/sampling_*.safetensors, latent_tools).
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "io/safetensors.h"
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

}  // namespace ltx::test
