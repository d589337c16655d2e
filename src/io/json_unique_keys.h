// JSON text parsed with every object's keys checked for repeats: nlohmann keeps the last of two
// equal keys silently, and its parse callbacks (the usual way to see keys) rescan the enclosing
// object after each member, which is quadratic in its size (a checkpoint header holds thousands of
// tensors; a request body could hold millions of keys).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace ltx::io {

struct RepeatedJsonKey {
  bool found = false;
  std::string key;     // the first key seen twice in one object
  std::string parent;  // the key holding that object ("" at the top level or inside an array)
};

// Parses `text` (throws nlohmann::json::parse_error when it is not JSON). When some object repeats
// a key, returns null and fills `repeated`; the caller words the error.
nlohmann::json parse_json_unique_keys(std::string_view text, RepeatedJsonKey& repeated);

}  // namespace ltx::io
