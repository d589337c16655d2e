#pragma once
// Python's str.replace: every non-overlapping occurrence of `from` in `s`, left to right, replaced by
// `to` (the reference's key renames and SentencePiece's space marker are written this way).
#include <string>

namespace ltx {

inline std::string replace_all(const std::string& s, const std::string& from,
                               const std::string& to) {
  std::string out;
  size_t pos = 0;
  for (size_t hit; (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size())
    out.append(s, pos, hit - pos).append(to);
  out.append(s, pos, std::string::npos);
  return out;
}

}  // namespace ltx
