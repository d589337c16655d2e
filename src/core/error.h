#pragma once
// One error type for the whole library. Messages say what went wrong, where (file, tensor, flag)
// and, when known, what to do about it. The CLI prints them on one line and exits non-zero.
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace ltx {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

namespace detail {
template <typename... Args>
std::string concat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}
}  // namespace detail

// Builds a message from any streamable pieces: ltx::str("tensor ", name, " has ", n, " dims").
template <typename... Args>
std::string str(Args&&... args) {
  return detail::concat(std::forward<Args>(args)...);
}

template <typename... Args>
[[noreturn]] void fail(Args&&... args) {
  throw Error(detail::concat(std::forward<Args>(args)...));
}

}  // namespace ltx

// LTX_CHECK(cond, pieces...): throws ltx::Error with the concatenated pieces when cond is false.
#define LTX_CHECK(cond, ...)                 \
  do {                                       \
    if (!(cond)) ::ltx::fail(__VA_ARGS__);   \
  } while (0)
