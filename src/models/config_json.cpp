#include "models/config_json.h"

#include <cmath>

#include "core/error.h"

namespace ltx::models {

using json = nlohmann::json;

bool py_equal(const json& a, const json& b) {
  const auto numeric = [](const json& v) { return v.is_number() || v.is_boolean(); };
  const auto num = [](const json& v) {
    return v.is_boolean() ? (v.get<bool>() ? 1.0 : 0.0) : v.get<double>();
  };
  if (numeric(a) && numeric(b)) return num(a) == num(b);  // NaN never equals
  if (a.is_array() && b.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!py_equal(a[i], b[i])) return false;
    return true;
  }
  return a == b;
}

json transformer_config_section(const json& metadata, const std::string& source) {
  json config = metadata.is_object() && metadata.contains("config") ? metadata["config"] : json();
  if (config.is_string()) {
    // Undecoded metadata: decode it like the reference's loader does.
    try {
      config = json::parse(config.get<std::string>());
    } catch (const json::exception&) {
      fail(source, ": metadata 'config' is not valid JSON");
    }
  }
  LTX_CHECK(config.is_object() && config.contains("transformer") && config["transformer"].is_object(),
            source, ": the metadata has no config.transformer section, so this is not an LTX-2 ",
            "transformer checkpoint (for split files pass the transformer file first)");
  return config["transformer"];
}

ConfigReader::ConfigReader(const json& cfg, std::string source, std::string section)
    : cfg_(cfg), source_(std::move(source)), section_(std::move(section)) {}

void ConfigReader::error(const std::string& key, const std::string& what) const {
  fail(source_, ": ", section_, ".", key, " ", what);
}

const json* ConfigReader::find(const std::string& key) const {
  auto it = cfg_.find(key);
  return it == cfg_.end() ? nullptr : &*it;
}

void ConfigReader::check(const std::string& key, const json& expected) const {
  const json* v = find(key);
  const json actual = v ? *v : json(nullptr);
  if (!py_equal(actual, expected))
    error(key, str("is ", v ? actual.dump() : "absent", ", the reference requires ", expected.dump(),
                   " (a model this code does not know)"));
}

int64_t ConfigReader::integer(const std::string& key, int64_t def, int64_t min) const {
  const json* v = find(key);
  if (!v) return def;
  if (!v->is_number_integer()) error(key, str("must be an integer, got ", v->dump()));
  const int64_t x = v->get<int64_t>();
  if (x < min) error(key, str("must be >= ", min, ", got ", x));
  return x;
}

double ConfigReader::number(const std::string& key, double def, bool positive) const {
  const json* v = find(key);
  if (!v) return def;
  if (!v->is_number()) error(key, str("must be a number, got ", v->dump()));
  const double x = v->get<double>();
  if (!std::isfinite(x) || (positive && !(x > 0)))
    error(key, str("must be a positive finite number, got ", v->dump()));
  return x;
}

bool ConfigReader::boolean(const std::string& key, bool def) const {
  const json* v = find(key);
  if (!v) return def;
  if (!v->is_boolean()) error(key, str("must be true or false, got ", v->dump()));
  return v->get<bool>();
}

std::vector<double> ConfigReader::numbers(const std::string& key, std::vector<double> def) const {
  const json* v = find(key);
  if (!v) return def;
  if (!v->is_array() || v->empty())
    error(key, str("must be a non-empty list of numbers, got ", v->dump()));
  std::vector<double> out;
  for (const json& e : *v) {
    if (!e.is_number() || !(e.get<double>() > 0))
      error(key, str("must hold positive numbers, got ", v->dump()));
    out.push_back(e.get<double>());
  }
  return out;
}

std::string ConfigReader::string(const std::string& key, std::string def) const {
  const json* v = find(key);
  if (!v) return def;
  if (!v->is_string()) error(key, str("must be a string, got ", v->dump()));
  return v->get<std::string>();
}

}  // namespace ltx::models
