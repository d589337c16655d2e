// Hugging Face tokenizer.json tokenizer. The behaviour (match order of added tokens, alignment of
// normalised text to the input, the BPE merge order, byte fallback, decoder chain) follows the
// `tokenizers` library 0.23 as observed through its outputs; see tokenizer.h for what is covered.
#include "models/text/tokenizer.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <initializer_list>
#include <map>
#include <queue>
#include <sstream>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "core/error.h"
#include "core/input_limits.h"
#include "core/log.h"

namespace ltx::text {

namespace {

using json = nlohmann::json;

// ------------------------------------------------------------------------------------ UTF-8

// Length of the UTF-8 sequence starting at s[i] (input already validated).
inline size_t utf8_len(unsigned char c) {
  if (c < 0x80) return 1;
  if ((c >> 5) == 0x6) return 2;
  if ((c >> 4) == 0xE) return 3;
  return 4;
}

inline uint32_t decode_at(std::string_view s, size_t i, size_t* len) {
  const auto c0 = static_cast<unsigned char>(s[i]);
  const size_t n = utf8_len(c0);
  *len = n;
  if (n == 1) return c0;
  uint32_t cp = c0 & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  return cp;
}

// Code point of the last character of s (non-empty, valid UTF-8).
inline uint32_t last_code_point(std::string_view s) {
  size_t i = s.size() - 1;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
  size_t len = 0;
  return decode_at(s, i, &len);
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

bool valid_utf8(std::string_view s, size_t* bad_offset) {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t len = 0;
    uint32_t min_cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if (c >= 0xC2 && c <= 0xDF) {
      len = 2, min_cp = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3, min_cp = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4, min_cp = 0x10000;
    } else {
      *bad_offset = i;
      return false;
    }
    if (i + len > n) {
      *bad_offset = i;
      return false;
    }
    uint32_t cp = c & (0x7F >> len);
    for (size_t k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) {
        *bad_offset = i;
        return false;
      }
      cp = (cp << 6) | (cc & 0x3F);
    }
    if (cp < min_cp || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      *bad_offset = i;
      return false;
    }
    i += len;
  }
  return true;
}

// Rust's char::is_whitespace (the Unicode White_Space property); also regex `\s`.
bool is_rust_whitespace(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

// Python's str.isspace (bidirectional class WS/B/S or category Zs).
bool is_python_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

// regex `\w` for the single_word check. Exact for ASCII; other characters would need the Unicode
// Alphabetic/Mark/Number tables, so they are refused rather than guessed.
bool is_word_char(uint32_t c, const std::string& token) {
  if (c < 0x80) return std::isalnum(static_cast<int>(c)) != 0 || c == '_';
  // Latin-1: the letters (and ª µ º) are Alphabetic; the rest are controls, symbols, punctuation
  // or No-class numbers, none of which `\w` takes.
  if (c < 0x100)
    return c >= 0xC0 ? (c != 0xD7 && c != 0xF7) : (c == 0xAA || c == 0xB5 || c == 0xBA);
  if (is_rust_whitespace(c)) return false;
  if (c == 0x200C || c == 0x200D) return true;  // Join_Control
  fail(
      "tokenizer: the added token '", token,
      "' has single_word=true and sits next to the non-ASCII character U+",
      [&] {
        char buf[16];
        std::snprintf(buf, sizeof buf, "%04X", c);
        return std::string(buf);
      }(),
      "; deciding whether that is a word character needs Unicode tables this tokenizer does not "
      "carry (unsupported tokenizer.json feature: single_word with non-ASCII neighbours)");
}

// ------------------------------------------------------------------------------------ JSON access

struct Src {
  const std::string& name;
};

[[noreturn]] void bad(const Src& src, const std::string& where, const std::string& what) {
  fail("tokenizer ", src.name, ": ", where, ": ", what);
}

const json& need(const Src& src, const json& obj, const char* key, const std::string& where) {
  if (!obj.is_object()) bad(src, where, "expected a JSON object");
  auto it = obj.find(key);
  if (it == obj.end()) bad(src, where, str("missing field \"", key, "\""));
  return *it;
}

std::string need_string(const Src& src, const json& obj, const char* key,
                        const std::string& where) {
  const json& v = need(src, obj, key, where);
  if (!v.is_string()) bad(src, where, str("field \"", key, "\" must be a string"));
  return v.get<std::string>();
}

bool opt_bool(const Src& src, const json& obj, const char* key, bool def,
              const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return def;
  if (!it->is_boolean()) bad(src, where, str("field \"", key, "\" must be true or false"));
  return it->get<bool>();
}

std::optional<std::string> opt_string(const Src& src, const json& obj, const char* key,
                                      const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) bad(src, where, str("field \"", key, "\" must be a string or null"));
  return it->get<std::string>();
}

// A single code point given as a JSON string (Rust `char` fields).
uint32_t need_char(const Src& src, const json& obj, const char* key, const std::string& where) {
  const std::string s = need_string(src, obj, key, where);
  size_t bad_at = 0;
  if (s.empty() || !valid_utf8(s, &bad_at))
    bad(src, where, str("field \"", key, "\" must be one character"));
  size_t len = 0;
  const uint32_t cp = decode_at(s, 0, &len);
  if (len != s.size()) bad(src, where, str("field \"", key, "\" must be one character"));
  return cp;
}

// A "Sequence" node: calls parse(element, where) on each element of its list `key`.
template <class Parse>
void for_each_in_sequence(const Src& src, const json& obj, const char* key, const std::string& where,
                          Parse&& parse) {
  const json& list = need(src, obj, key, where);
  if (!list.is_array()) bad(src, where, str("\"", key, "\" must be an array"));
  for (size_t i = 0; i < list.size(); ++i) parse(list[i], str(where, ".", key, "[", i, "]"));
}

// Maps a string field's value onto an enum; unknown values are refused naming the field.
template <class E>
E pick(const Src& src, const std::string& where, const char* field, const std::string& value,
       std::initializer_list<std::pair<const char*, E>> choices) {
  for (const auto& [name, e] : choices)
    if (value == name) return e;
  bad(src, where, str("unknown ", field, " \"", value, "\""));
}

// {"String": "..."} patterns; {"Regex": "..."} is refused (no regex engine here).
std::string string_pattern(const Src& src, const json& obj, const std::string& where) {
  const json& p = need(src, obj, "pattern", where);
  if (p.is_object() && p.contains("Regex"))
    bad(src, where,
        "Regex patterns are not supported (unsupported tokenizer.json feature: regex pattern " +
            p["Regex"].dump() + "); only {\"String\": ...} patterns are");
  if (!p.is_object() || !p.contains("String") || !p["String"].is_string())
    bad(src, where, "pattern must be {\"String\": \"...\"}");
  std::string s = p["String"].get<std::string>();
  if (s.empty()) bad(src, where, "empty string patterns are not supported");
  return s;
}

// ------------------------------------------------------------------------------------ pieces

struct Span {
  uint32_t begin = 0;
  uint32_t end = 0;
};

// A piece of normalised text with, for each of its bytes, the byte range of the input it came
// from (the library's NormalizedString alignments, kept absolute).
struct Piece {
  std::string text;
  std::vector<Span> align;
  uint32_t orig_begin = 0;  // where the piece starts in the input
  int32_t token = -1;       // >= 0: this piece is that added token
};

Piece slice(const Piece& p, size_t a, size_t b) {
  Piece out;
  out.text = p.text.substr(a, b - a);
  out.align.assign(p.align.begin() + static_cast<std::ptrdiff_t>(a),
                   p.align.begin() + static_cast<std::ptrdiff_t>(b));
  out.orig_begin = a < b ? p.align[a].begin : p.orig_begin;
  return out;
}

// Non-overlapping occurrences of `pat` in `s`, left to right, as the library's literal pattern
// matching reports them: a list of (begin, end, is_match) covering all of `s`.
struct Segment {
  size_t begin, end;
  bool match;
};

std::vector<Segment> literal_matches(std::string_view s, std::string_view pat) {
  std::vector<Segment> out;
  if (s.empty()) {
    out.push_back({0, 0, false});
    return out;
  }
  size_t prev = 0;
  size_t pos = s.find(pat);
  while (pos != std::string_view::npos) {
    if (pos != prev) out.push_back({prev, pos, false});
    out.push_back({pos, pos + pat.size(), true});
    prev = pos + pat.size();
    pos = s.find(pat, prev);
  }
  if (prev != s.size()) out.push_back({prev, s.size(), false});
  return out;
}

// Replaces every occurrence of `pat`; inserted bytes take the alignment of the last byte of the
// text they replace (as the library's NormalizedString::replace does).
void replace_in(Piece& p, std::string_view pat, std::string_view content) {
  if (p.text.find(pat) == std::string::npos) return;
  Piece out;
  out.orig_begin = p.orig_begin;
  for (const Segment& seg : literal_matches(p.text, pat)) {
    if (!seg.match) {
      out.text.append(p.text, seg.begin, seg.end - seg.begin);
      out.align.insert(out.align.end(), p.align.begin() + static_cast<std::ptrdiff_t>(seg.begin),
                       p.align.begin() + static_cast<std::ptrdiff_t>(seg.end));
    } else {
      const Span a = p.align[seg.end - 1];
      out.text.append(content);
      out.align.insert(out.align.end(), content.size(), a);
    }
  }
  p.text = std::move(out.text);
  p.align = std::move(out.align);
}

void prepend_to(Piece& p, std::string_view s) {
  if (p.text.empty()) return;
  const Span a = p.align[0];
  p.text.insert(0, s);
  p.align.insert(p.align.begin(), s.size(), a);
}

void strip_piece(Piece& p, bool left, bool right) {
  size_t b = 0, e = p.text.size();
  if (left) {
    while (b < e) {
      size_t len = 0;
      if (!is_rust_whitespace(decode_at(p.text, b, &len))) break;
      b += len;
    }
  }
  if (right) {
    while (e > b) {
      size_t i = e - 1;
      while (i > b && (static_cast<unsigned char>(p.text[i]) & 0xC0) == 0x80) --i;
      size_t len = 0;
      if (!is_rust_whitespace(decode_at(p.text, i, &len))) break;
      e = i;
    }
  }
  if (b == 0 && e == p.text.size()) return;
  const uint32_t orig = p.orig_begin;
  p = slice(p, b, e);
  p.orig_begin = orig;
}

enum class Behavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

// Splits `p` at the given segments with the library's delimiter behaviours.
std::vector<Piece> split_piece(const Piece& p, std::vector<Segment> segs, Behavior behavior) {
  std::vector<std::pair<size_t, size_t>> ranges;
  switch (behavior) {
    case Behavior::Removed:
      for (const auto& s : segs)
        if (!s.match) ranges.emplace_back(s.begin, s.end);
      break;
    case Behavior::Isolated:
      for (const auto& s : segs) ranges.emplace_back(s.begin, s.end);
      break;
    case Behavior::Contiguous: {
      bool prev = false;
      for (const auto& s : segs) {
        if (s.match == prev && !ranges.empty())
          ranges.back().second = s.end;
        else
          ranges.emplace_back(s.begin, s.end);
        prev = s.match;
      }
      break;
    }
    case Behavior::MergedWithPrevious: {
      bool prev = false;
      for (const auto& s : segs) {
        if (s.match && !prev && !ranges.empty())
          ranges.back().second = s.end;
        else
          ranges.emplace_back(s.begin, s.end);
        prev = s.match;
      }
      break;
    }
    case Behavior::MergedWithNext: {
      bool prev = false;
      for (auto it = segs.rbegin(); it != segs.rend(); ++it) {
        if (it->match && !prev && !ranges.empty())
          ranges.back().first = it->begin;
        else
          ranges.emplace_back(it->begin, it->end);
        prev = it->match;
      }
      std::reverse(ranges.begin(), ranges.end());
      break;
    }
  }
  std::vector<Piece> out;
  for (const auto& [a, b] : ranges)
    if (b > a) out.push_back(slice(p, a, b));
  return out;
}

// ------------------------------------------------------------------------------------ components

struct NormStep {
  enum class Kind { Replace, Prepend, Strip } kind;
  std::string pattern, content;
  bool left = false, right = false;
};

enum class PrependScheme { First, Never, Always };

struct PreTokStep {
  enum class Kind { Split, Metaspace } kind;
  std::string pattern;
  Behavior behavior = Behavior::Removed;
  bool invert = false;
  std::string replacement;  // Metaspace
  PrependScheme scheme = PrependScheme::Always;
  bool split = true;
};

struct DecStep {
  enum class Kind { Replace, ByteFallback, Fuse, Strip, Metaspace } kind;
  std::string pattern, content;  // Replace
  uint32_t ch = 0;               // Strip content / Metaspace replacement
  size_t start = 0, stop = 0;    // Strip
  PrependScheme scheme = PrependScheme::Always;
};

struct TemplatePiece {
  bool special = false;
  std::string name;  // special token key, or "A" / "B"
};

struct SpecialTokenDef {
  std::vector<int32_t> ids;
  std::vector<std::string> tokens;
};

struct MergeInfo {
  uint32_t rank;
  int32_t new_id;
};

inline uint64_t pair_key(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

// Open-addressing map from token text to id; the texts live in one arena. Faster to build and
// probe than a node-based map for the 262k-entry vocabularies of real files.
class TokenIndex {
 public:
  size_t size() const { return count_; }
  void reserve(size_t n) {
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    if (cap > slots_.size()) rehash(cap);
  }
  const int32_t* find(std::string_view key) const {
    if (slots_.empty()) return nullptr;
    const uint64_t h = std::hash<std::string_view>{}(key);
    for (size_t i = h & (slots_.size() - 1);; i = (i + 1) & (slots_.size() - 1)) {
      const Slot& s = slots_[i];
      if (s.id < 0) return nullptr;
      if (s.hash == h && s.len == key.size() && arena_.compare(s.off, s.len, key) == 0)
        return &s.id;
    }
  }
  bool contains(std::string_view key) const { return find(key) != nullptr; }
  void insert_or_assign(std::string_view key, int32_t id) {
    if (2 * (count_ + 1) > slots_.size()) rehash(slots_.empty() ? 16 : 2 * slots_.size());
    const uint64_t h = std::hash<std::string_view>{}(key);
    for (size_t i = h & (slots_.size() - 1);; i = (i + 1) & (slots_.size() - 1)) {
      Slot& s = slots_[i];
      if (s.id < 0) {
        s = Slot{h, arena_.size(), static_cast<uint32_t>(key.size()), id};
        arena_.append(key);
        ++count_;
        return;
      }
      if (s.hash == h && s.len == key.size() && arena_.compare(s.off, s.len, key) == 0) {
        s.id = id;
        return;
      }
    }
  }

 private:
  struct Slot {
    uint64_t hash = 0;
    size_t off = 0;
    uint32_t len = 0;
    int32_t id = -1;
  };
  std::vector<Slot> slots_;
  std::string arena_;
  size_t count_ = 0;

  void rehash(size_t cap) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(cap, Slot{});
    for (const Slot& s : old) {
      if (s.id < 0) continue;
      for (size_t i = s.hash & (cap - 1);; i = (i + 1) & (cap - 1))
        if (slots_[i].id < 0) {
          slots_[i] = s;
          break;
        }
    }
  }
};

// Open-addressing map from a token-id pair to its merge.
class MergeTable {
 public:
  void reserve(size_t n) {
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    if (cap > slots_.size()) rehash(cap);
  }
  const MergeInfo* find(uint64_t key) const {
    if (slots_.empty()) return nullptr;
    for (size_t i = mix(key) & (slots_.size() - 1);; i = (i + 1) & (slots_.size() - 1)) {
      const Slot& s = slots_[i];
      if (s.key == kEmpty) return nullptr;
      if (s.key == key) return &s.merge;
    }
  }
  void insert_or_assign(uint64_t key, MergeInfo m) {
    if (2 * (count_ + 1) > slots_.size()) rehash(slots_.empty() ? 16 : 2 * slots_.size());
    for (size_t i = mix(key) & (slots_.size() - 1);; i = (i + 1) & (slots_.size() - 1)) {
      Slot& s = slots_[i];
      if (s.key == kEmpty) {
        s = Slot{key, m};
        ++count_;
        return;
      }
      if (s.key == key) {
        s.merge = m;
        return;
      }
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};  // ids are < 2^31, so no real key
  struct Slot {
    uint64_t key = kEmpty;
    MergeInfo merge{};
  };
  std::vector<Slot> slots_;
  size_t count_ = 0;

  static uint64_t mix(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return k;
  }
  void rehash(size_t cap) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(cap, Slot{});
    for (const Slot& s : old) {
      if (s.key == kEmpty) continue;
      for (size_t i = mix(s.key) & (cap - 1);; i = (i + 1) & (cap - 1))
        if (slots_[i].key == kEmpty) {
          slots_[i] = s;
          break;
        }
    }
  }
};

// Byte trie over added-token contents: longest match at a position.
struct Trie {
  std::vector<int32_t> value{-1};
  std::unordered_map<uint64_t, int32_t> child;
  std::array<bool, 256> first{};

  bool empty() const { return value.size() == 1; }
  void insert(std::string_view s, int32_t v) {
    int32_t node = 0;
    for (unsigned char c : s) {
      const uint64_t k = (static_cast<uint64_t>(node) << 8) | c;
      auto it = child.find(k);
      if (it == child.end()) {
        const auto next = static_cast<int32_t>(value.size());
        value.push_back(-1);
        child.emplace(k, next);
        node = next;
      } else {
        node = it->second;
      }
    }
    value[node] = v;
    first[static_cast<unsigned char>(s[0])] = true;
  }
  // Length and value of the longest content starting at text[pos]; length 0 when none.
  std::pair<size_t, int32_t> longest(std::string_view text, size_t pos) const {
    size_t best_len = 0;
    int32_t best = -1;
    int32_t node = 0;
    for (size_t i = pos; i < text.size(); ++i) {
      const uint64_t k = (static_cast<uint64_t>(node) << 8) | static_cast<unsigned char>(text[i]);
      auto it = child.find(k);
      if (it == child.end()) break;
      node = it->second;
      if (value[node] >= 0) {
        best_len = i + 1 - pos;
        best = value[node];
      }
    }
    return {best_len, best};
  }
};

struct Tok {
  int32_t id;
  uint32_t begin, end;  // bytes, relative to the piece
};

bool same_props(const AddedToken& a, const AddedToken& b) {
  return a.content == b.content && a.single_word == b.single_word && a.lstrip == b.lstrip &&
         a.rstrip == b.rstrip && a.normalized == b.normalized && a.special == b.special;
}

// ------------------------------------------------------------------------------------ reader

// model.vocab and model.merges, read while streaming the file (they are most of a real
// tokenizer.json: building them as JSON values first would take seconds).
struct ModelTables {
  bool vocab_seen = false;   // model.vocab was an object (its entries are below)
  bool merges_seen = false;  // model.merges was an array
  std::vector<std::pair<std::string, int32_t>> vocab;
  std::vector<std::pair<std::string, std::string>> merges;
};

// SAX handler: builds the DOM for everything except model.vocab / model.merges, which go into
// ModelTables. Structural errors inside those two stop the parse with a message.
class TokenizerReader : public nlohmann::json_sax<json> {
 public:
  json root;
  ModelTables tables;
  std::string error;  // set when the parse was stopped (syntax or table error)

  bool null() override { return value(json(nullptr)); }
  bool boolean(bool v) override { return value(json(v)); }
  bool number_integer(number_integer_t v) override {
    if (mode_ == Mode::Vocab) return vocab_id(v);
    return value(json(v));
  }
  bool number_unsigned(number_unsigned_t v) override {
    if (mode_ == Mode::Vocab)
      return vocab_id(v > static_cast<number_unsigned_t>(INT64_MAX) ? -1 : static_cast<int64_t>(v));
    return value(json(v));
  }
  bool number_float(number_float_t v, const string_t&) override { return value(json(v)); }
  bool string(string_t& v) override {
    if (mode_ == Mode::Merges) {
      // Legacy "a b": exactly one space.
      const size_t sp = v.find(' ');
      if (sp == std::string::npos || v.find(' ', sp + 1) != std::string::npos)
        return stop(str("model.merges: merge ", tables.merges.size(), " (", json(v).dump(),
                        ") is not two tokens separated by one space"));
      tables.merges.emplace_back(v.substr(0, sp), v.substr(sp + 1));
      return true;
    }
    if (mode_ == Mode::MergePair) {
      if (pair_.size() >= 2) return bad_merge();
      pair_.push_back(std::move(v));
      return true;
    }
    return value(json(std::move(v)));
  }
  bool binary(binary_t&) override { return stop("binary values are not JSON"); }

  bool start_object(std::size_t) override {
    if (mode_ == Mode::Vocab)
      return stop(str("model.vocab: the id of token ", json(vocab_key_).dump(),
                      " must be a non-negative 32-bit integer"));
    if (mode_ != Mode::Dom) return bad_merge();
    if (in_model() && key_ == "vocab") {
      mode_ = Mode::Vocab;
      tables.vocab_seen = true;
      return true;
    }
    return open(json::object());
  }
  bool key(string_t& k) override {
    if (mode_ == Mode::Vocab) {
      vocab_key_ = std::move(k);
      return true;
    }
    key_ = std::move(k);
    return true;
  }
  bool end_object() override {
    if (mode_ == Mode::Vocab) {
      mode_ = Mode::Dom;
      return value(json::object());  // placeholder; the entries are in tables.vocab
    }
    return close();
  }
  bool start_array(std::size_t) override {
    if (mode_ == Mode::Vocab)
      return stop(str("model.vocab: the id of token ", json(vocab_key_).dump(),
                      " must be a non-negative 32-bit integer"));
    if (mode_ == Mode::Merges) {
      mode_ = Mode::MergePair;
      pair_.clear();
      return true;
    }
    if (mode_ == Mode::MergePair) return bad_merge();
    if (in_model() && key_ == "merges") {
      mode_ = Mode::Merges;
      tables.merges_seen = true;
      return true;
    }
    return open(json::array());
  }
  bool end_array() override {
    if (mode_ == Mode::MergePair) {
      if (pair_.size() != 2) return bad_merge();
      tables.merges.emplace_back(std::move(pair_[0]), std::move(pair_[1]));
      mode_ = Mode::Merges;
      return true;
    }
    if (mode_ == Mode::Merges) {
      mode_ = Mode::Dom;
      return value(json::array());  // placeholder; the entries are in tables.merges
    }
    return close();
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    return stop(str("not valid JSON (", e.what(), ")"));
  }

 private:
  enum class Mode { Dom, Vocab, Merges, MergePair };
  Mode mode_ = Mode::Dom;
  std::vector<json*> stack_;
  std::vector<std::string> stack_keys_;  // key of each open container in its parent ("" if none)
  std::string key_;                      // pending object key
  std::string vocab_key_;
  std::vector<std::string> pair_;

  // Directly inside the top-level "model" object.
  bool in_model() const {
    return stack_.size() == 2 && stack_keys_[1] == "model" && stack_.back()->is_object();
  }
  bool stop(std::string message) {
    if (error.empty()) error = std::move(message);
    return false;
  }
  bool bad_merge() {
    return stop(
        str("model.merges: merge ", tables.merges.size(), " must be [\"a\", \"b\"] or \"a b\""));
  }
  bool vocab_id(int64_t v) {
    if (v < 0 || v > INT32_MAX)
      return stop(str("model.vocab: the id of token ", json(vocab_key_).dump(),
                      " must be a non-negative 32-bit integer"));
    tables.vocab.emplace_back(std::move(vocab_key_), static_cast<int32_t>(v));
    return true;
  }
  json* place(json&& v) {
    if (stack_.empty()) {
      root = std::move(v);
      return &root;
    }
    json& top = *stack_.back();
    if (top.is_array()) {
      top.push_back(std::move(v));
      return &top.back();
    }
    json& slot = top[key_];
    slot = std::move(v);
    return &slot;
  }
  bool value(json&& v) {
    if (mode_ == Mode::Vocab)
      return stop(str("model.vocab: the id of token ", json(vocab_key_).dump(),
                      " must be a non-negative 32-bit integer"));
    if (mode_ != Mode::Dom) return bad_merge();
    place(std::move(v));
    return true;
  }
  bool open(json&& container) {
    const std::string k = !stack_.empty() && stack_.back()->is_object() ? key_ : std::string();
    stack_.push_back(place(std::move(container)));
    stack_keys_.push_back(k);
    return true;
  }
  bool close() {
    stack_.pop_back();
    stack_keys_.pop_back();
    return true;
  }
};

}  // namespace

// ============================================================================================ Impl

struct Tokenizer::Impl {
  std::string source;

  // model (BPE)
  TokenIndex vocab;
  std::vector<std::string> vocab_r;  // id -> token (dense; vocab_has marks the ids in use)
  std::vector<uint8_t> vocab_has;
  const std::string* model_token(int32_t id) const {
    if (id < 0 || static_cast<size_t>(id) >= vocab_r.size() || !vocab_has[static_cast<size_t>(id)])
      return nullptr;
    return &vocab_r[static_cast<size_t>(id)];
  }
  MergeTable merges;
  std::optional<std::string> unk_token;
  std::optional<std::string> prefix, suffix;
  bool fuse_unk = false;
  bool byte_fallback = false;
  bool ignore_merges = false;
  std::array<int32_t, 256> byte_ids{};

  std::vector<NormStep> normalizer;
  bool has_normalizer = false;
  std::vector<PreTokStep> pre_tokenizer;
  bool has_post_processor = false;
  std::vector<TemplatePiece> template_single;
  std::map<std::string, SpecialTokenDef> template_specials;
  bool has_decoder = false;
  std::vector<DecStep> decoder;

  // added vocabulary
  std::map<int32_t, AddedToken> added_by_id;
  std::unordered_map<std::string, int32_t> added_by_content;
  std::unordered_set<std::string> special_set;
  std::unordered_map<int32_t, std::string> normalized_form;
  Trie raw_trie, norm_trie;
  bool encode_special_tokens = false;

  // special ids
  std::optional<int32_t> bos, eos, pad, unk;
  bool truncate_left = false;

  // ------------------------------------------------------------------ loading
  void parse(const json& root, ModelTables& tables);
  void parse_model(const json& m, ModelTables& tables);
  void parse_normalizer(const json& n, const std::string& where);
  void parse_pre_tokenizer(const json& p, const std::string& where);
  void parse_post_processor(const json& p);
  void parse_decoder(const json& d, const std::string& where);
  void add_tokens(const std::vector<AddedToken>& tokens);
  void refresh_tries();

  std::optional<int32_t> lookup(std::string_view token) const {
    auto it = added_by_content.find(std::string(token));
    if (it != added_by_content.end()) return it->second;
    if (const int32_t* id = vocab.find(token)) return *id;
    return std::nullopt;
  }

  // ------------------------------------------------------------------ encoding
  void normalize(Piece& p) const;
  std::vector<Piece> split_added(const Piece& p, const Trie& trie) const;
  void pre_tokenize(std::vector<Piece>& pieces) const;
  std::vector<Tok> bpe(std::string_view word) const;
  Encoding encode(std::string_view text) const;  // no post-processing
};

void Tokenizer::Impl::parse(const json& root, ModelTables& tables) {
  const Src src{source};
  if (!root.is_object()) bad(src, "top level", "expected a JSON object");
  if (auto it = root.find("version"); it != root.end() && !it->is_null()) {
    if (!it->is_string() || it->get<std::string>() != "1.0")
      bad(src, "version",
          str("unknown tokenizer.json version ", it->dump(), " (expected \"1.0\")"));
  }
  for (const char* key : {"truncation", "padding"}) {
    auto it = root.find(key);
    if (it != root.end() && !it->is_null())
      bad(src, key,
          str("a non-null \"", key,
              "\" section is not supported (unsupported tokenizer.json feature); the prompt "
              "wrapper does its own truncation and padding"));
  }
  parse_model(need(src, root, "model", "top level"), tables);
  if (auto it = root.find("normalizer"); it != root.end() && !it->is_null()) {
    has_normalizer = true;
    parse_normalizer(*it, "normalizer");
  }
  if (auto it = root.find("pre_tokenizer"); it != root.end() && !it->is_null())
    parse_pre_tokenizer(*it, "pre_tokenizer");
  if (auto it = root.find("post_processor"); it != root.end() && !it->is_null())
    parse_post_processor(*it);
  if (auto it = root.find("decoder"); it != root.end() && !it->is_null()) {
    has_decoder = true;
    parse_decoder(*it, "decoder");
  }

  // Added tokens: the library ignores the stored ids and re-derives them (model vocab id, or the
  // next free id); a mismatch only warns there, and here too.
  std::vector<AddedToken> tokens;
  if (auto it = root.find("added_tokens"); it != root.end() && !it->is_null()) {
    if (!it->is_array()) bad(src, "added_tokens", "expected an array");
    for (size_t i = 0; i < it->size(); ++i) {
      const json& t = (*it)[i];
      const std::string where = str("added_tokens[", i, "]");
      AddedToken a;
      const json& idv = need(src, t, "id", where);
      if (!idv.is_number_integer() || idv.get<int64_t>() < 0 || idv.get<int64_t>() > INT32_MAX)
        bad(src, where, "\"id\" must be a non-negative 32-bit integer");
      a.id = static_cast<int32_t>(idv.get<int64_t>());
      a.content = need_string(src, t, "content", where);
      a.single_word = opt_bool(src, t, "single_word", false, where);
      a.lstrip = opt_bool(src, t, "lstrip", false, where);
      a.rstrip = opt_bool(src, t, "rstrip", false, where);
      a.normalized = opt_bool(src, t, "normalized", true, where);
      a.special = opt_bool(src, t, "special", false, where);
      tokens.push_back(std::move(a));
    }
  }
  for (const AddedToken& t : tokens) {
    auto id = lookup(t.content);
    if (id && *id != t.id)
      log_warn("tokenizer ", source, ": added token '", t.content, "' is stored with id ", t.id,
               " but gets id ", *id, " (as in the tokenizers library)");
  }
  add_tokens(tokens);

  // Gemma names until a tokenizer_config.json says otherwise.
  bos = lookup("<bos>");
  eos = lookup("<eos>");
  pad = lookup("<pad>");
  unk = unk_token ? lookup(*unk_token) : lookup("<unk>");
}

void Tokenizer::Impl::parse_model(const json& m, ModelTables& tables) {
  const Src src{source};
  const std::string where = "model";
  if (!m.is_object()) bad(src, where, "expected a JSON object");
  std::string type = "BPE";
  if (auto it = m.find("type"); it != m.end()) {
    if (!it->is_string()) bad(src, where, "\"type\" must be a string");
    type = it->get<std::string>();
  }
  if (type != "BPE")
    bad(src, where,
        str("model type \"", type,
            "\" is not supported (unsupported tokenizer.json feature); only BPE models are"));
  if (auto it = m.find("dropout"); it != m.end() && !it->is_null()) {
    if (!it->is_number()) bad(src, where, "\"dropout\" must be a number or null");
    if (it->get<double>() != 0.0)
      bad(src, where,
          "BPE dropout is not supported (unsupported tokenizer.json feature: it makes encoding "
          "random)");
  }
  unk_token = opt_string(src, m, "unk_token", where);
  prefix = opt_string(src, m, "continuing_subword_prefix", where);
  suffix = opt_string(src, m, "end_of_word_suffix", where);
  fuse_unk = opt_bool(src, m, "fuse_unk", false, where);
  byte_fallback = opt_bool(src, m, "byte_fallback", false, where);
  ignore_merges = opt_bool(src, m, "ignore_merges", false, where);

  // Vocabulary and merges come from the streaming reader (ModelTables), which skips the DOM for
  // them: a 262k-token vocabulary with half a million merges loads in a fraction of a second.
  if (!tables.vocab_seen) {
    const json& v = need(src, m, "vocab", where);
    if (!v.is_object()) bad(src, "model.vocab", "expected an object of token -> id");
  }
  if (!tables.merges_seen) {
    const json& ms = need(src, m, "merges", where);
    if (!ms.is_array()) bad(src, "model.merges", "expected an array");
  }
  vocab.reserve(tables.vocab.size() + tables.vocab.size() / 2);
  int64_t max_id = -1;
  for (const auto& e : tables.vocab) max_id = std::max<int64_t>(max_id, e.second);
  const auto n_tokens = static_cast<int64_t>(tables.vocab.size());
  if (max_id >= 4 * n_tokens + 1024)
    bad(src, "model.vocab",
        str("the ids are sparse (largest id ", max_id, " for ", n_tokens,
            " tokens); such vocabularies are not supported"));
  vocab_r.assign(static_cast<size_t>(max_id + 1), std::string());
  vocab_has.assign(static_cast<size_t>(max_id + 1), 0);
  for (auto& [token, id] : tables.vocab) {
    vocab_r[static_cast<size_t>(id)] = token;
    vocab_has[static_cast<size_t>(id)] = 1;
    vocab.insert_or_assign(token, id);
  }
  tables.vocab.clear();
  tables.vocab.shrink_to_fit();

  merges.reserve(tables.merges.size() + tables.merges.size() / 2);
  const size_t prefix_len = prefix ? prefix->size() : 0;
  std::string merged;
  for (size_t i = 0; i < tables.merges.size(); ++i) {
    const auto& [a, b] = tables.merges[i];
    const int32_t* ia = vocab.find(a);
    if (!ia)
      bad(src, "model.merges",
          str("merge ", i, ": token ", json(a).dump(), " is not in the vocabulary"));
    const int32_t* ib = vocab.find(b);
    if (!ib)
      bad(src, "model.merges",
          str("merge ", i, ": token ", json(b).dump(), " is not in the vocabulary"));
    if (b.size() < prefix_len)
      bad(src, "model.merges",
          str("merge ", i, ": token ", json(b).dump(), " is shorter than the subword prefix"));
    merged.assign(a);
    merged.append(b, prefix_len, std::string::npos);
    const int32_t* im = vocab.find(merged);
    if (!im)
      bad(src, "model.merges",
          str("merge ", i, ": the merged token ", json(merged).dump(),
              " is not in the vocabulary"));
    merges.insert_or_assign(pair_key(*ia, *ib), MergeInfo{static_cast<uint32_t>(i), *im});
  }
  tables.merges.clear();
  tables.merges.shrink_to_fit();

  for (int c = 0; c < 256; ++c) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", c);
    const int32_t* id = vocab.find(name);
    byte_ids[static_cast<size_t>(c)] = id ? *id : -1;
  }
}

void Tokenizer::Impl::parse_normalizer(const json& n, const std::string& where) {
  const Src src{source};
  const std::string type = need_string(src, n, "type", where);
  if (type == "Sequence") {
    for_each_in_sequence(src, n, "normalizers", where,
                         [&](const json& e, const std::string& w) { parse_normalizer(e, w); });
  } else if (type == "Replace") {
    NormStep s{NormStep::Kind::Replace, string_pattern(src, n, where),
               need_string(src, n, "content", where)};
    normalizer.push_back(std::move(s));
  } else if (type == "Prepend") {
    NormStep s{NormStep::Kind::Prepend, "", need_string(src, n, "prepend", where)};
    normalizer.push_back(std::move(s));
  } else if (type == "Strip") {
    NormStep s{NormStep::Kind::Strip, "", ""};
    s.left = opt_bool(src, n, "strip_left", false, where);
    s.right = opt_bool(src, n, "strip_right", false, where);
    normalizer.push_back(std::move(s));
  } else {
    bad(src, where,
        str("normalizer \"", type,
            "\" is not supported (unsupported tokenizer.json feature); supported: Sequence, "
            "Replace, Prepend, Strip"));
  }
}

void Tokenizer::Impl::parse_pre_tokenizer(const json& p, const std::string& where) {
  const Src src{source};
  const std::string type = need_string(src, p, "type", where);
  if (type == "Sequence") {
    for_each_in_sequence(src, p, "pretokenizers", where,
                         [&](const json& e, const std::string& w) { parse_pre_tokenizer(e, w); });
  } else if (type == "Split") {
    PreTokStep s{PreTokStep::Kind::Split};
    s.pattern = string_pattern(src, p, where);
    const std::string b = need_string(src, p, "behavior", where);
    s.behavior = pick<Behavior>(src, where, "split behavior", b,
                                {{"Removed", Behavior::Removed},
                                 {"Isolated", Behavior::Isolated},
                                 {"MergedWithPrevious", Behavior::MergedWithPrevious},
                                 {"MergedWithNext", Behavior::MergedWithNext},
                                 {"Contiguous", Behavior::Contiguous}});
    s.invert = opt_bool(src, p, "invert", false, where);
    pre_tokenizer.push_back(std::move(s));
  } else if (type == "Metaspace") {
    PreTokStep s{PreTokStep::Kind::Metaspace};
    const uint32_t r = need_char(src, p, "replacement", where);
    append_utf8(s.replacement, r);
    const std::string scheme = p.contains("prepend_scheme") && p["prepend_scheme"].is_string()
                                   ? p["prepend_scheme"].get<std::string>()
                                   : "always";
    s.scheme = pick<PrependScheme>(src, where, "prepend_scheme", scheme,
                                   {{"first", PrependScheme::First},
                                    {"never", PrependScheme::Never},
                                    {"always", PrependScheme::Always}});
    if (p.contains("add_prefix_space") && p["add_prefix_space"].is_boolean()) {
      // Legacy field: false means never (and must agree with an explicit scheme).
      if (!p["add_prefix_space"].get<bool>()) {
        if (p.contains("prepend_scheme") && s.scheme != PrependScheme::Never)
          bad(src, where, "add_prefix_space does not match declared prepend_scheme");
        s.scheme = PrependScheme::Never;
      }
    }
    s.split = opt_bool(src, p, "split", true, where);
    pre_tokenizer.push_back(std::move(s));
  } else {
    bad(src, where,
        str("pre-tokenizer \"", type,
            "\" is not supported (unsupported tokenizer.json feature); supported: Sequence, "
            "Split with a string pattern, Metaspace"));
  }
}

void Tokenizer::Impl::parse_post_processor(const json& p) {
  const Src src{source};
  const std::string where = "post_processor";
  const std::string type = need_string(src, p, "type", where);
  if (type != "TemplateProcessing")
    bad(src, where,
        str("post-processor \"", type,
            "\" is not supported (unsupported tokenizer.json feature); only TemplateProcessing "
            "is"));
  has_post_processor = true;
  const json& specials = need(src, p, "special_tokens", where);
  if (!specials.is_object()) bad(src, where, "\"special_tokens\" must be an object");
  for (auto it = specials.begin(); it != specials.end(); ++it) {
    const std::string w = str(where, ".special_tokens.", it.key());
    SpecialTokenDef def;
    const json& ids = need(src, it.value(), "ids", w);
    const json& toks = need(src, it.value(), "tokens", w);
    if (!ids.is_array() || !toks.is_array() || ids.size() != toks.size())
      bad(src, w, "\"ids\" and \"tokens\" must be arrays of the same length");
    for (size_t i = 0; i < ids.size(); ++i) {
      if (!ids[i].is_number_integer() || ids[i].get<int64_t>() < 0 ||
          ids[i].get<int64_t>() > INT32_MAX)
        bad(src, w, "ids must be non-negative 32-bit integers");
      if (!toks[i].is_string()) bad(src, w, "tokens must be strings");
      def.ids.push_back(static_cast<int32_t>(ids[i].get<int64_t>()));
      def.tokens.push_back(toks[i].get<std::string>());
    }
    template_specials[it.key()] = std::move(def);
  }
  const json& single = need(src, p, "single", where);
  if (!single.is_array()) bad(src, where, "\"single\" must be an array of pieces");
  for (size_t i = 0; i < single.size(); ++i) {
    const json& piece = single[i];
    const std::string w = str(where, ".single[", i, "]");
    TemplatePiece tp;
    if (piece.is_object() && piece.contains("SpecialToken")) {
      tp.special = true;
      tp.name = need_string(src, piece["SpecialToken"], "id", w);
      if (!template_specials.count(tp.name))
        bad(src, w, str("special token \"", tp.name, "\" is missing from special_tokens"));
    } else if (piece.is_object() && piece.contains("Sequence")) {
      tp.name = need_string(src, piece["Sequence"], "id", w);
      if (tp.name != "A")
        bad(src, w, str("the single-sequence template refers to sequence \"", tp.name, "\""));
    } else {
      bad(src, w, "expected {\"SpecialToken\": ...} or {\"Sequence\": ...}");
    }
    template_single.push_back(std::move(tp));
  }
}

void Tokenizer::Impl::parse_decoder(const json& d, const std::string& where) {
  const Src src{source};
  const std::string type = need_string(src, d, "type", where);
  if (type == "Sequence") {
    for_each_in_sequence(src, d, "decoders", where,
                         [&](const json& e, const std::string& w) { parse_decoder(e, w); });
  } else if (type == "Replace") {
    DecStep s{DecStep::Kind::Replace, string_pattern(src, d, where),
              need_string(src, d, "content", where)};
    decoder.push_back(std::move(s));
  } else if (type == "ByteFallback") {
    decoder.push_back(DecStep{DecStep::Kind::ByteFallback});
  } else if (type == "Fuse") {
    decoder.push_back(DecStep{DecStep::Kind::Fuse});
  } else if (type == "Strip") {
    DecStep s{DecStep::Kind::Strip};
    s.ch = need_char(src, d, "content", where);
    const json& st = need(src, d, "start", where);
    const json& sp = need(src, d, "stop", where);
    if (!st.is_number_unsigned() || !sp.is_number_unsigned())
      bad(src, where, "\"start\" and \"stop\" must be non-negative integers");
    s.start = st.get<size_t>();
    s.stop = sp.get<size_t>();
    decoder.push_back(std::move(s));
  } else if (type == "Metaspace") {
    DecStep s{DecStep::Kind::Metaspace};
    s.ch = need_char(src, d, "replacement", where);
    const std::string scheme = d.contains("prepend_scheme") && d["prepend_scheme"].is_string()
                                   ? d["prepend_scheme"].get<std::string>()
                                   : "always";
    s.scheme = pick<PrependScheme>(src, where, "prepend_scheme", scheme,
                                   {{"first", PrependScheme::First},
                                    {"never", PrependScheme::Never},
                                    {"always", PrependScheme::Always}});
    if (d.contains("add_prefix_space") && d["add_prefix_space"].is_boolean() &&
        !d["add_prefix_space"].get<bool>())
      s.scheme = PrependScheme::Never;
    decoder.push_back(std::move(s));
  } else {
    bad(src, where,
        str("decoder \"", type,
            "\" is not supported (unsupported tokenizer.json feature); supported: Sequence, "
            "Replace with a string pattern, ByteFallback, Fuse, Strip, Metaspace"));
  }
}

// The library's AddedVocabulary::add_tokens: id = existing id of the content (added tokens, then
// the model vocabulary) or the next free id.
void Tokenizer::Impl::add_tokens(const std::vector<AddedToken>& tokens) {
  const auto model_size = static_cast<int64_t>(vocab.size());
  int64_t next_id = model_size;
  if (!added_by_id.empty()) {
    const int64_t max_id = added_by_id.rbegin()->first;
    next_id = (max_id >= model_size || model_size == 0) ? max_id + 1 : model_size;
  }
  for (AddedToken t : tokens) {
    if (t.content.empty()) continue;
    if (auto it = added_by_content.find(t.content); it != added_by_content.end()) {
      auto jt = added_by_id.find(it->second);
      if (jt != added_by_id.end() && same_props(jt->second, t)) continue;
    }
    int32_t id = 0;
    if (auto existing = lookup(t.content)) {
      id = *existing;
    } else {
      LTX_CHECK(next_id <= INT32_MAX, "tokenizer ", source, ": too many added tokens");
      id = static_cast<int32_t>(next_id++);
    }
    t.id = id;
    if (t.normalized && has_normalizer) {
      Piece p;
      p.text = t.content;
      p.align.assign(p.text.size(), Span{});
      normalize(p);
      if (p.text != t.content)
        normalized_form[id] = p.text;
      else
        normalized_form.erase(id);
    }
    added_by_content[t.content] = id;
    if (t.special) special_set.insert(t.content);
    added_by_id[id] = std::move(t);
  }
  refresh_tries();
}

void Tokenizer::Impl::refresh_tries() {
  raw_trie = Trie{};
  norm_trie = Trie{};
  for (const auto& [id, t] : added_by_id) {
    if (t.normalized) {
      auto it = normalized_form.find(id);
      const std::string& pat = it != normalized_form.end() ? it->second : t.content;
      if (!pat.empty()) norm_trie.insert(pat, id);
    } else {
      raw_trie.insert(t.content, id);
    }
  }
}

// ------------------------------------------------------------------------------------ encoding

void Tokenizer::Impl::normalize(Piece& p) const {
  for (const NormStep& s : normalizer) {
    switch (s.kind) {
      case NormStep::Kind::Replace:
        replace_in(p, s.pattern, s.content);
        break;
      case NormStep::Kind::Prepend:
        prepend_to(p, s.content);
        break;
      case NormStep::Kind::Strip:
        strip_piece(p, s.left, s.right);
        break;
    }
  }
}

// The library's AddedVocabulary::find_matches + split_with_indices on one piece.
std::vector<Piece> Tokenizer::Impl::split_added(const Piece& p, const Trie& trie) const {
  std::vector<Piece> out;
  if (trie.empty() || p.text.empty()) {
    if (!p.text.empty()) out.push_back(p);
    return out;
  }
  const std::string_view s = p.text;
  size_t start_offset = 0;
  size_t pos = 0;
  auto push = [&](size_t a, size_t b, int32_t id) {
    if (b <= a) return;
    Piece q = slice(p, a, b);
    q.token = id;
    out.push_back(std::move(q));
  };
  while (pos < s.size()) {
    if (!trie.first[static_cast<unsigned char>(s[pos])]) {
      ++pos;
      continue;
    }
    auto [len, id] = trie.longest(s, pos);
    if (len == 0) {
      ++pos;
      continue;
    }
    size_t start = pos, stop = pos + len;
    pos = stop;
    const AddedToken& t = added_by_id.at(id);
    if (encode_special_tokens && special_set.count(t.content)) continue;
    if (t.single_word) {
      const bool start_space =
          start == 0 || !is_word_char(last_code_point(s.substr(0, start)), t.content);
      size_t l = 0;
      const bool stop_space = stop == s.size() || !is_word_char(decode_at(s, stop, &l), t.content);
      if (!start_space || !stop_space) continue;
    }
    if (t.lstrip) {
      size_t b = start;
      while (b > 0) {
        size_t i = b - 1;
        while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
        size_t l = 0;
        if (!is_rust_whitespace(decode_at(s, i, &l))) break;
        b = i;
      }
      start = std::max(b, start_offset);
    }
    if (t.rstrip) {
      while (stop < s.size()) {
        size_t l = 0;
        if (!is_rust_whitespace(decode_at(s, stop, &l))) break;
        stop += l;
      }
    }
    if (start_offset < start) push(start_offset, start, -1);
    push(start, stop, id);
    start_offset = stop;
  }
  if (start_offset < s.size()) push(start_offset, s.size(), -1);
  return out;
}

void Tokenizer::Impl::pre_tokenize(std::vector<Piece>& pieces) const {
  for (const PreTokStep& step : pre_tokenizer) {
    std::vector<Piece> next;
    next.reserve(pieces.size());
    for (Piece& p : pieces) {
      if (p.token >= 0) {
        next.push_back(std::move(p));
        continue;
      }
      std::vector<Piece> parts;
      if (step.kind == PreTokStep::Kind::Split) {
        std::vector<Segment> segs = literal_matches(p.text, step.pattern);
        if (step.invert)
          for (auto& sg : segs) sg.match = !sg.match;
        parts = split_piece(p, std::move(segs), step.behavior);
      } else {
        replace_in(p, " ", step.replacement);
        const bool starts = p.text.compare(0, step.replacement.size(), step.replacement) == 0;
        if ((step.scheme == PrependScheme::Always && !starts) ||
            (step.scheme == PrependScheme::First && !starts && p.orig_begin == 0))
          prepend_to(p, step.replacement);
        if (step.split)
          parts =
              split_piece(p, literal_matches(p.text, step.replacement), Behavior::MergedWithNext);
        else if (!p.text.empty())
          parts.push_back(std::move(p));
      }
      for (Piece& q : parts) next.push_back(std::move(q));
    }
    pieces = std::move(next);
  }
}

// BPE on one word: characters (or their byte-fallback / unk symbols), then merges applied lowest
// rank first, leftmost first among equal ranks (the library's heap order).
std::vector<Tok> Tokenizer::Impl::bpe(std::string_view word) const {
  std::vector<Tok> out;
  if (word.empty()) return out;
  if (ignore_merges) {
    if (const int32_t* id = vocab.find(word)) {
      out.push_back({*id, 0, static_cast<uint32_t>(word.size())});
      return out;
    }
  }

  struct Sym {
    int32_t id;
    int32_t prev, next;
    uint32_t len;
  };
  std::vector<Sym> syms;
  syms.reserve(word.size());
  auto add = [&](int32_t id, uint32_t len) {
    const auto n = static_cast<int32_t>(syms.size());
    if (n > 0) syms.back().next = n;
    syms.push_back({id, n - 1, -1, len});
  };
  // A pending (possibly fused) unk token: id and byte length. Plain fields rather than an
  // optional pair: g++ 12 -O3 reports a false maybe-uninitialized on the optional.
  bool has_unk = false;
  int32_t unk_id = 0;
  uint32_t unk_len = 0;
  auto flush_unk = [&] {
    if (has_unk) add(unk_id, unk_len);
    has_unk = false;
  };
  std::string s;
  for (size_t i = 0; i < word.size();) {
    const size_t len = utf8_len(static_cast<unsigned char>(word[i]));
    const bool is_first = i == 0, is_last = i + len >= word.size();
    s.assign(word.substr(i, len));
    if (!is_first && prefix) s.insert(0, *prefix);
    if (is_last && suffix) s += *suffix;
    i += len;
    if (const int32_t* id = vocab.find(s)) {
      flush_unk();
      add(*id, static_cast<uint32_t>(len));
      continue;
    }
    if (byte_fallback) {
      bool all = true;
      for (unsigned char c : s) all = all && byte_ids[c] >= 0;
      if (all) {
        // (The library does not flush a pending unk here either.)
        for (unsigned char c : s) add(byte_ids[c], 1);
        continue;
      }
    }
    if (unk_token) {
      const int32_t* uid = vocab.find(*unk_token);
      if (!uid)
        fail("tokenizer ", source, ": the unk token '", *unk_token,
             "' is not in the vocabulary, so the character ", json(s).dump(), " cannot be encoded");
      if (has_unk && fuse_unk) {
        unk_len += static_cast<uint32_t>(len);
      } else {
        flush_unk();
        has_unk = true;
        unk_id = *uid;
        unk_len = static_cast<uint32_t>(len);
      }
    }
    // Without an unk token the library drops the character.
  }
  flush_unk();

  struct Cand {
    uint32_t rank;
    int32_t pos;
    int32_t new_id;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  for (size_t k = 0; k + 1 < syms.size(); ++k) {
    if (const MergeInfo* mi = merges.find(pair_key(syms[k].id, syms[k + 1].id)))
      heap.push({mi->rank, static_cast<int32_t>(k), mi->new_id});
  }
  while (!heap.empty()) {
    const Cand top = heap.top();
    heap.pop();
    Sym& cur = syms[static_cast<size_t>(top.pos)];
    if (cur.len == 0 || cur.next < 0) continue;
    const Sym right = syms[static_cast<size_t>(cur.next)];
    const MergeInfo* mi = merges.find(pair_key(cur.id, right.id));
    if (!mi || mi->new_id != top.new_id) continue;  // stale entry
    syms[static_cast<size_t>(cur.next)].len = 0;
    cur.id = top.new_id;
    cur.len += right.len;
    cur.next = right.next;
    if (right.next >= 0) syms[static_cast<size_t>(right.next)].prev = top.pos;
    if (cur.prev >= 0) {
      if (const MergeInfo* m =
              merges.find(pair_key(syms[static_cast<size_t>(cur.prev)].id, cur.id)))
        heap.push({m->rank, cur.prev, m->new_id});
    }
    if (cur.next >= 0) {
      if (const MergeInfo* m =
              merges.find(pair_key(cur.id, syms[static_cast<size_t>(cur.next)].id)))
        heap.push({m->rank, top.pos, m->new_id});
    }
  }
  uint32_t offset = 0;
  for (const Sym& sym : syms) {
    if (sym.len == 0) continue;
    out.push_back({sym.id, offset, offset + sym.len});
    offset += sym.len;
  }
  return out;
}

Encoding Tokenizer::Impl::encode(std::string_view text) const {
  check_utf8(text, "tokenizer input");
  LTX_CHECK(text.size() < UINT32_MAX, "tokenizer: input of ", text.size(), " bytes is too long");

  Piece whole;
  whole.text.assign(text);
  whole.align.resize(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t len = utf8_len(static_cast<unsigned char>(text[i]));
    for (size_t k = 0; k < len; ++k)
      whole.align[i + k] = Span{static_cast<uint32_t>(i), static_cast<uint32_t>(i + len)};
    i += len;
  }

  // 1. added tokens on the raw text; 2. normalise the rest, then normalized added tokens.
  std::vector<Piece> pieces;
  for (Piece& p : split_added(whole, raw_trie)) {
    if (p.token >= 0) {
      pieces.push_back(std::move(p));
      continue;
    }
    normalize(p);
    for (Piece& q : split_added(p, norm_trie)) pieces.push_back(std::move(q));
  }
  // 3. pre-tokenize; 4. the model.
  pre_tokenize(pieces);

  // Byte -> code point index of the input (the library's char offsets).
  std::vector<uint32_t> char_at(text.size());
  {
    uint32_t ci = 0;
    for (size_t i = 0; i < text.size();) {
      const size_t len = utf8_len(static_cast<unsigned char>(text[i]));
      for (size_t k = 0; k < len; ++k) char_at[i + k] = ci;
      i += len;
      ++ci;
    }
  }
  auto to_chars = [&](uint32_t b, uint32_t e) -> std::pair<int64_t, int64_t> {
    if (b >= text.size()) return {b, e};  // the library leaves such offsets in bytes
    const int64_t cb = char_at[b];
    const int64_t ce = e < text.size() ? char_at[e] : (e > 0 ? char_at[e - 1] + 1 : cb + 1);
    return {cb, ce};
  };

  Encoding enc;
  for (const Piece& p : pieces) {
    if (p.text.empty()) continue;
    if (p.token >= 0) {
      enc.ids.push_back(p.token);
      enc.tokens.push_back(p.text);
      enc.offsets.push_back(to_chars(p.align.front().begin, p.align.back().end));
      enc.special_tokens_mask.push_back(0);
      continue;
    }
    for (const Tok& t : bpe(p.text)) {
      enc.ids.push_back(t.id);
      const std::string* name = model_token(t.id);
      enc.tokens.push_back(name ? *name : std::string());
      enc.offsets.push_back(to_chars(p.align[t.begin].begin, p.align[t.end - 1].end));
      enc.special_tokens_mask.push_back(0);
    }
  }
  return enc;
}

// ============================================================================================ API

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(const Tokenizer& other) : impl_(std::make_unique<Impl>(*other.impl_)) {}
Tokenizer& Tokenizer::operator=(const Tokenizer& other) {
  if (this != &other) impl_ = std::make_unique<Impl>(*other.impl_);
  return *this;
}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::from_json(std::string_view json_text, const std::string& source) {
  auto impl = std::make_unique<Impl>();
  impl->source = source;
  TokenizerReader reader;
  const bool ok = json::sax_parse(json_text.begin(), json_text.end(), &reader);
  if (!ok || !reader.error.empty())
    fail("tokenizer ", source, ": ", reader.error.empty() ? "not valid JSON" : reader.error);
  try {
    impl->parse(reader.root, reader.tables);
  } catch (const json::exception& e) {
    fail("tokenizer ", source, ": malformed tokenizer.json (", e.what(), ")");
  }
  return Tokenizer(std::move(impl));
}

Tokenizer Tokenizer::from_parts(const nlohmann::json& config,
                                std::vector<std::pair<std::string, int32_t>> vocab,
                                std::vector<std::pair<std::string, std::string>> merges,
                                const std::string& source) {
  auto impl = std::make_unique<Impl>();
  impl->source = source;
  ModelTables tables;
  tables.vocab_seen = true;
  tables.merges_seen = true;
  tables.vocab = std::move(vocab);
  tables.merges = std::move(merges);
  try {
    impl->parse(config, tables);
  } catch (const json::exception& e) {
    fail("tokenizer ", source, ": malformed tokenizer description (", e.what(), ")");
  }
  return Tokenizer(std::move(impl));
}

Tokenizer Tokenizer::from_file(const std::string& path) {
  return from_json(limits::read_file_within(path, limits::kMaxTokenizerJsonBytes, "tokenizer.json"), path);
}

Encoding Tokenizer::encode(std::string_view text, bool add_special_tokens,
                           const std::optional<Truncation>& truncation) const {
  Encoding enc = impl_->encode(text);
  if (truncation) {
    const int64_t added = add_special_tokens ? num_special_tokens_to_add() : 0;
    LTX_CHECK(truncation->max_length >= added, "tokenizer ", impl_->source, ": max_length ",
              truncation->max_length, " is smaller than the ", added,
              " special tokens the post-processor adds");
    const auto keep = static_cast<size_t>(truncation->max_length - added);
    if (enc.size() > keep) {
      const size_t drop = enc.size() - keep;
      auto cut = [&](auto& v) {
        if (truncation->from_left)
          v.erase(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(drop));
        else
          v.resize(keep);
      };
      cut(enc.ids);
      cut(enc.tokens);
      cut(enc.offsets);
      cut(enc.special_tokens_mask);
    }
  }
  if (!impl_->has_post_processor) return enc;
  Encoding out;
  for (const TemplatePiece& tp : impl_->template_single) {
    if (!tp.special) {
      out.ids.insert(out.ids.end(), enc.ids.begin(), enc.ids.end());
      out.tokens.insert(out.tokens.end(), enc.tokens.begin(), enc.tokens.end());
      out.offsets.insert(out.offsets.end(), enc.offsets.begin(), enc.offsets.end());
      out.special_tokens_mask.insert(out.special_tokens_mask.end(), enc.special_tokens_mask.begin(),
                                     enc.special_tokens_mask.end());
    } else if (add_special_tokens) {
      const SpecialTokenDef& def = impl_->template_specials.at(tp.name);
      for (size_t i = 0; i < def.ids.size(); ++i) {
        out.ids.push_back(def.ids[i]);
        out.tokens.push_back(def.tokens[i]);
        out.offsets.emplace_back(0, 0);
        out.special_tokens_mask.push_back(1);
      }
    }
  }
  return out;
}

std::vector<int32_t> Tokenizer::encode_ids(std::string_view text, bool add_special_tokens) const {
  return encode(text, add_special_tokens).ids;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  const Impl& m = *impl_;
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    std::string tok;
    if (auto it = m.added_by_id.find(id); it != m.added_by_id.end()) {
      auto nt = m.normalized_form.find(id);
      tok = nt != m.normalized_form.end() ? nt->second : it->second.content;
    } else if (const std::string* name = m.model_token(id)) {
      tok = *name;
    } else {
      continue;  // unknown id: skipped, as the library does
    }
    if (skip_special_tokens && m.special_set.count(tok)) continue;
    tokens.push_back(std::move(tok));
  }
  if (!m.has_decoder) {
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i) out += ' ';
      out += tokens[i];
    }
    return out;
  }
  for (const DecStep& d : m.decoder) {
    switch (d.kind) {
      case DecStep::Kind::Replace:
        for (std::string& t : tokens) {
          if (t.find(d.pattern) == std::string::npos) continue;
          std::string r;
          for (const Segment& sg : literal_matches(t, d.pattern))
            r += sg.match ? d.content : t.substr(sg.begin, sg.end - sg.begin);
          t = std::move(r);
        }
        break;
      case DecStep::Kind::ByteFallback: {
        std::vector<std::string> out;
        std::string bytes;
        size_t nbytes = 0;
        auto flush = [&] {
          if (nbytes == 0) return;
          size_t bad_at = 0;
          if (valid_utf8(bytes, &bad_at)) {
            out.push_back(bytes);
          } else {
            for (size_t k = 0; k < nbytes; ++k) out.emplace_back("\xEF\xBF\xBD");  // U+FFFD each
          }
          bytes.clear();
          nbytes = 0;
        };
        auto hex = [](char c) -> int {
          if (c >= '0' && c <= '9') return c - '0';
          if (c >= 'a' && c <= 'f') return c - 'a' + 10;
          if (c >= 'A' && c <= 'F') return c - 'A' + 10;
          return -1;
        };
        for (std::string& t : tokens) {
          // "<0xHH>": six bytes; the two after "0x" parse as u8 in base 16 (Rust's parser also
          // takes a leading '+').
          int value = -1;
          if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>') {
            const int h1 = hex(t[3]), h2 = hex(t[4]);
            if (h1 >= 0 && h2 >= 0)
              value = h1 * 16 + h2;
            else if (t[3] == '+' && h2 >= 0)
              value = h2;
          }
          if (value >= 0) {
            bytes += static_cast<char>(value);
            ++nbytes;
          } else {
            flush();
            out.push_back(std::move(t));
          }
        }
        flush();
        tokens = std::move(out);
        break;
      }
      case DecStep::Kind::Fuse: {
        std::string all;
        for (const std::string& t : tokens) all += t;
        tokens.assign(1, std::move(all));
        break;
      }
      case DecStep::Kind::Strip:
        for (std::string& t : tokens) {
          std::vector<std::pair<size_t, uint32_t>> chars;  // (byte pos, code point)
          for (size_t i = 0; i < t.size();) {
            size_t l = 0;
            chars.emplace_back(i, decode_at(t, i, &l));
            i += l;
          }
          size_t start_cut = 0;
          for (size_t i = 0; i < std::min(d.start, chars.size()); ++i) {
            if (chars[i].second != d.ch) break;
            start_cut = i + 1;
          }
          size_t stop_cut = chars.size();
          for (size_t i = 0; i < std::min(d.stop, chars.size()); ++i) {
            const size_t idx = chars.size() - i - 1;
            if (chars[idx].second != d.ch) break;
            stop_cut = idx;
          }
          if (stop_cut <= start_cut) {
            t.clear();
          } else {
            const size_t b = start_cut < chars.size() ? chars[start_cut].first : t.size();
            const size_t e = stop_cut < chars.size() ? chars[stop_cut].first : t.size();
            t = t.substr(b, e - b);
          }
        }
        break;
      case DecStep::Kind::Metaspace:
        for (size_t i = 0; i < tokens.size(); ++i) {
          std::string r;
          const std::string& t = tokens[i];
          for (size_t k = 0; k < t.size();) {
            size_t l = 0;
            const uint32_t c = decode_at(t, k, &l);
            if (c == d.ch) {
              if (!(i == 0 && d.scheme != PrependScheme::Never)) r += ' ';
            } else {
              r.append(t, k, l);
            }
            k += l;
          }
          tokens[i] = std::move(r);
        }
        break;
    }
  }
  std::string out;
  for (const std::string& t : tokens) out += t;
  return out;
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  return impl_->lookup(token);
}

std::optional<std::string> Tokenizer::id_to_token(int32_t id) const {
  if (auto it = impl_->added_by_id.find(id); it != impl_->added_by_id.end()) {
    auto nt = impl_->normalized_form.find(id);
    return nt != impl_->normalized_form.end() ? nt->second : it->second.content;
  }
  if (const std::string* name = impl_->model_token(id)) return *name;
  return std::nullopt;
}

int64_t Tokenizer::vocab_size(bool with_added_tokens) const {
  int64_t n = static_cast<int64_t>(impl_->vocab.size());
  if (with_added_tokens)
    for (const auto& [content, id] : impl_->added_by_content)
      if (!impl_->vocab.contains(content)) ++n;
  return n;
}

bool Tokenizer::is_special_token(std::string_view content) const {
  return impl_->special_set.count(std::string(content)) != 0;
}

std::vector<AddedToken> Tokenizer::added_tokens() const {
  std::vector<AddedToken> out;
  for (const auto& [id, t] : impl_->added_by_id) out.push_back(t);
  return out;
}

int64_t Tokenizer::num_special_tokens_to_add() const {
  int64_t n = 0;
  if (!impl_->has_post_processor) return 0;
  for (const TemplatePiece& tp : impl_->template_single)
    if (tp.special) n += static_cast<int64_t>(impl_->template_specials.at(tp.name).ids.size());
  return n;
}

bool Tokenizer::has_post_processor() const { return impl_->has_post_processor; }
std::optional<int32_t> Tokenizer::bos_id() const { return impl_->bos; }
std::optional<int32_t> Tokenizer::eos_id() const { return impl_->eos; }
std::optional<int32_t> Tokenizer::pad_id() const { return impl_->pad; }
std::optional<int32_t> Tokenizer::unk_id() const { return impl_->unk; }
bool Tokenizer::truncate_from_left() const { return impl_->truncate_left; }
const std::string& Tokenizer::source() const { return impl_->source; }

void Tokenizer::apply_hf_config(const nlohmann::json& cfg) {
  Impl& m = *impl_;
  const std::string where = "tokenizer_config.json";
  const Src src{m.source};
  if (!cfg.is_object()) bad(src, where, "expected a JSON object");

  // A token value: a string or an AddedToken-like object {"content": ..., flags}.
  auto token_of = [&](const json& v, const std::string& key) -> std::optional<AddedToken> {
    if (v.is_null()) return std::nullopt;
    AddedToken t;
    t.special = true;
    t.normalized = false;
    if (v.is_string()) {
      t.content = v.get<std::string>();
    } else if (v.is_object() && v.contains("content") && v["content"].is_string()) {
      t.content = v["content"].get<std::string>();
      t.single_word = opt_bool(src, v, "single_word", false, where + " " + key);
      t.lstrip = opt_bool(src, v, "lstrip", false, where + " " + key);
      t.rstrip = opt_bool(src, v, "rstrip", false, where + " " + key);
      t.normalized = opt_bool(src, v, "normalized", false, where + " " + key);
    } else {
      bad(src, where, str("\"", key, "\" must be a token string or {\"content\": ...}"));
    }
    return t;
  };

  static const char* kNamed[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                 "pad_token", "cls_token", "mask_token"};
  std::map<std::string, std::optional<std::string>> named;
  std::vector<AddedToken> to_add;
  auto want = [&](const AddedToken& t) {
    if (m.added_by_content.count(t.content)) return;
    for (const AddedToken& o : to_add)
      if (o.content == t.content) return;
    to_add.push_back(t);
  };
  for (const char* key : kNamed) {
    auto it = cfg.find(key);
    if (it == cfg.end()) continue;
    auto t = token_of(*it, key);
    named[key] = t ? std::optional<std::string>(t->content) : std::nullopt;
    if (t) want(*t);
  }
  for (const char* key : {"extra_special_tokens", "additional_special_tokens"}) {
    auto it = cfg.find(key);
    if (it == cfg.end() || it->is_null()) continue;
    if (it->is_object()) {
      for (auto jt = it->begin(); jt != it->end(); ++jt)
        if (auto t = token_of(jt.value(), str(key, ".", jt.key()))) want(*t);
    } else if (it->is_array()) {
      for (size_t i = 0; i < it->size(); ++i)
        if (auto t = token_of((*it)[i], str(key, "[", i, "]"))) want(*t);
    } else {
      bad(src, where, str("\"", key, "\" must be an object or an array"));
    }
  }
  m.add_tokens(to_add);

  auto id_of = [&](const char* key) -> std::optional<int32_t> {
    auto it = named.find(key);
    if (it == named.end() || !it->second) return std::nullopt;
    return m.lookup(*it->second);
  };
  m.bos = id_of("bos_token");
  m.eos = id_of("eos_token");
  m.pad = id_of("pad_token");
  m.unk = id_of("unk_token");

  const bool explicit_flags = cfg.contains("add_bos_token") || cfg.contains("add_eos_token");
  if (explicit_flags || !m.has_post_processor) {
    bool add_bos = opt_bool(src, cfg, "add_bos_token", false, where);
    bool add_eos = opt_bool(src, cfg, "add_eos_token", false, where);
    if (!m.bos) add_bos = false;
    if (!m.eos) add_eos = false;
    m.template_single.clear();
    m.template_specials.clear();
    if (add_bos) {
      const std::string& name = *named["bos_token"];
      m.template_single.push_back({true, name});
      m.template_specials[name] = SpecialTokenDef{{*m.bos}, {name}};
    }
    m.template_single.push_back({false, "A"});
    if (add_eos) {
      const std::string& name = *named["eos_token"];
      m.template_single.push_back({true, name});
      m.template_specials[name] = SpecialTokenDef{{*m.eos}, {name}};
    }
    m.has_post_processor = true;
  }
  m.encode_special_tokens = opt_bool(src, cfg, "split_special_tokens", false, where);
  if (auto side = opt_string(src, cfg, "truncation_side", where)) {
    if (*side != "left" && *side != "right")
      bad(src, where, str("truncation_side must be \"left\" or \"right\", got \"", *side, "\""));
    m.truncate_left = *side == "left";
  }
}

std::string python_strip(std::string_view text) {
  check_utf8(text, "text");
  size_t b = 0, e = text.size();
  while (b < e) {
    size_t len = 0;
    if (!is_python_space(decode_at(text, b, &len))) break;
    b += len;
  }
  while (e > b) {
    size_t i = e - 1;
    while (i > b && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) --i;
    size_t len = 0;
    if (!is_python_space(decode_at(text, i, &len))) break;
    e = i;
  }
  return std::string(text.substr(b, e - b));
}

void check_utf8(std::string_view text, const std::string& what) {
  size_t bad_at = 0;
  if (!valid_utf8(text, &bad_at))
    fail(what, " is not valid UTF-8 (invalid byte sequence at byte offset ", bad_at, ")");
}

}  // namespace ltx::text
