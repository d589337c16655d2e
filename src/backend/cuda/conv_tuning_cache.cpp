#include "backend/cuda/conv_tuning_cache.h"

#include <cudnn.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <system_error>

#include "backend/cuda/device.h"
#include "core/cache_dir.h"
#include "core/env_settings.h"
#include "core/log.h"

namespace ltx::cuda::conv_tuning {

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr int kFormat = 1;

std::string default_path() {
  // LTX_TUNING_CACHE: a file, or "" (0 / off) for memory only.
  if (const std::optional<std::string>& file = env::settings().tuning_cache) return *file;
  const std::optional<std::string> cache = user_cache_dir();
  return cache ? (fs::path(*cache) / "cudnn-conv-v1.json").string() : std::string();
}

// The device section's name: what makes a stored choice valid.
std::string device_key(int device) {
  const ComputeCapability cc = compute_capability(device);
  std::ostringstream s;
  s << device_name(device) << " | sm " << cc.major << cc.minor << " | " << multiprocessor_count(device)
    << " SMs | cuDNN " << cudnnGetVersion();
  return s.str();
}

// The file's entries ({} when missing, unreadable or not ours).
Json read_file(const std::string& file) {
  if (file.empty()) return Json::object();
  std::ifstream in(file);
  if (!in) return Json::object();
  Json j = Json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || j.value("format", 0) != kFormat || !j.contains("devices") ||
      !j["devices"].is_object())
    return Json::object();
  return j["devices"];
}

struct Store {
  std::mutex mu;
  std::string file = default_path();
  bool loaded = false;
  Json devices = Json::object();  // device key -> { entry key -> value }
  std::map<int, std::string> keys;
  bool warned = false;
  bool announced = false;  // the first new choice of the process was logged

  const std::string& key_of(int device) {
    auto it = keys.find(device);
    if (it == keys.end()) it = keys.emplace(device, device_key(device)).first;
    return it->second;
  }
  void load() {
    if (loaded) return;
    loaded = true;
    devices = read_file(file);
  }
  // Merges ours into what the file holds now, then replaces it through a temporary file.
  void write() {
    if (file.empty()) return;
    std::error_code ec;
    const fs::path target(file);
    if (target.has_parent_path()) fs::create_directories(target.parent_path(), ec);
    Json merged = read_file(file);
    for (auto& [dev, entries] : devices.items())
      for (auto& [k, v] : entries.items()) merged[dev][k] = v;
    devices = merged;
    const std::string tmp = file + ".tmp." + std::to_string(::getpid());
    bool ok = false;
    {
      std::ofstream out(tmp, std::ios::trunc);
      if (out) {
        out << Json{{"format", kFormat}, {"devices", merged}}.dump(1) << '\n';
        out.close();
        ok = static_cast<bool>(out);
      }
    }
    if (ok) {
      fs::rename(tmp, target, ec);
      ok = !ec;
    }
    if (!ok) {
      fs::remove(tmp, ec);
      if (!warned)
        log_info("cuDNN tuning cache: cannot write ", file,
                 "; the next run times its convolutions again (set LTX_TUNING_CACHE to a writable "
                 "file, or to 0 to keep the choices in memory only)");
      warned = true;
    }
  }
};

Store& store_instance() {
  static auto* s = new Store();  // leaked: used until the process ends
  return *s;
}

}  // namespace

std::optional<std::string> lookup(int device, const std::string& key) {
  Store& s = store_instance();
  std::lock_guard<std::mutex> lock(s.mu);
  s.load();
  const std::string& dev = s.key_of(device);
  const auto d = s.devices.find(dev);
  if (d == s.devices.end() || !d->is_object()) return std::nullopt;
  const auto e = d->find(key);
  if (e == d->end() || !e->is_string()) return std::nullopt;
  return e->get<std::string>();
}

void store(int device, const std::string& key, const std::string& value) {
  Store& s = store_instance();
  std::lock_guard<std::mutex> lock(s.mu);
  s.load();
  if (!s.announced) {
    // Why this run's first convolutions take longer (seconds for a VAE decode), once.
    log_info("cuDNN: timing the convolution algorithms of new shapes on this GPU (once; ",
             s.file.empty() ? std::string("kept in memory only") : "kept in " + s.file, ")");
    s.announced = true;
  }
  s.devices[s.key_of(device)][key] = value;
  s.write();
}

std::string path() {
  Store& s = store_instance();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.file;
}

void set_path_for_tests(const std::string& file) {
  Store& s = store_instance();
  std::lock_guard<std::mutex> lock(s.mu);
  s.file = file;
  s.loaded = false;
  s.devices = Json::object();
}

}  // namespace ltx::cuda::conv_tuning
