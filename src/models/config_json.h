#pragma once
// Reading a checkpoint's `config` metadata section the way the reference's configurators do
// (`config.get(key, default)`, `check_config_value`), strictly: a present value of the wrong type
// or out of range is an error that names the file and the key. Shared by every model whose
// configuration lives in `config.transformer` (the transformer, the text connectors, ...).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ltx::models {

// Python's == on JSON-decoded values (bool is an int, ints equal floats of the same value).
bool py_equal(const nlohmann::json& a, const nlohmann::json& b);

// metadata["config"]["transformer"] of a decoded __metadata__ object (the "config" entry may also
// be an undecoded JSON string). Throws naming `source` when the section is absent.
nlohmann::json transformer_config_section(const nlohmann::json& metadata, const std::string& source);

class ConfigReader {
 public:
  // `section` names the object in messages ("config.transformer").
  ConfigReader(const nlohmann::json& cfg, std::string source,
               std::string section = "config.transformer");

  // "<source>: <section>.<key> <what>".
  [[noreturn]] void error(const std::string& key, const std::string& what) const;
  const nlohmann::json* find(const std::string& key) const;
  bool has(const std::string& key) const { return find(key) != nullptr; }
  // check_config_value: config.get(key) == expected (an absent key reads as null).
  void check(const std::string& key, const nlohmann::json& expected) const;
  // The value, or `def` when absent; a present value must have the type and range.
  int64_t integer(const std::string& key, int64_t def, int64_t min = 1) const;
  double number(const std::string& key, double def, bool positive = true) const;
  bool boolean(const std::string& key, bool def) const;
  std::vector<double> numbers(const std::string& key, std::vector<double> def) const;
  std::string string(const std::string& key, std::string def) const;

  const nlohmann::json& object() const { return cfg_; }
  const std::string& source() const { return source_; }

 private:
  const nlohmann::json& cfg_;
  std::string source_, section_;
};

}  // namespace ltx::models
