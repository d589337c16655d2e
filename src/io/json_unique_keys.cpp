#include "io/json_unique_keys.h"

#include <unordered_set>
#include <vector>

namespace ltx::io {
namespace {

// A first pass that only watches keys: a set per open object, so each key costs one lookup.
class KeyWatcher : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit KeyWatcher(RepeatedJsonKey& out) : out_(out) {}

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    frames_.push_back({{}, {}, false});
    return true;
  }
  bool key(string_t& k) override {
    Frame& top = frames_.back();
    if (!top.keys.insert(k).second) {
      out_.found = true;
      out_.key = k;
      const size_t n = frames_.size();
      out_.parent = n >= 2 && !frames_[n - 2].is_array ? frames_[n - 2].last_key : "";
      return false;  // stop: the first repeat is the one reported
    }
    top.last_key = k;
    return true;
  }
  bool end_object() override {
    frames_.pop_back();
    return true;
  }
  bool start_array(std::size_t) override {
    frames_.push_back({{}, {}, true});
    return true;
  }
  bool end_array() override {
    frames_.pop_back();
    return true;
  }
  // A syntax error ends this pass; the full parse that follows reports it in the parser's words.
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

 private:
  struct Frame {
    std::unordered_set<std::string> keys;
    std::string last_key;
    bool is_array = false;
  };
  RepeatedJsonKey& out_;
  std::vector<Frame> frames_;
};

}  // namespace

nlohmann::json parse_json_unique_keys(std::string_view text, RepeatedJsonKey& repeated) {
  repeated = {};
  KeyWatcher watcher(repeated);
  nlohmann::json::sax_parse(text, &watcher);
  if (repeated.found) return nullptr;
  return nlohmann::json::parse(text);
}

}  // namespace ltx::io
