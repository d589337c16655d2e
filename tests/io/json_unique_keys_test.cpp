// JSON parsed with repeated keys caught, linearly (io/json_unique_keys.h).
#include "io/json_unique_keys.h"

#include <gtest/gtest.h>

#include <string>

namespace ltx::io {
namespace {

TEST(JsonUniqueKeys, ValidTextParsesAsTheLibraryParsesIt) {
  const std::string text = R"({"a": {"dtype": "F32", "shape": [1, 2]}, "b": [1, {"x": null}],
                              "c": "s", "d": 1.5, "e": -3, "f": true})";
  RepeatedJsonKey r;
  EXPECT_EQ(parse_json_unique_keys(text, r), nlohmann::json::parse(text));
  EXPECT_FALSE(r.found);
  // The same key in two different objects is no repeat.
  EXPECT_EQ(parse_json_unique_keys(R"({"a": {"k": 1}, "b": {"k": 2}, "k": 3})", r)["k"], 3);
  EXPECT_FALSE(r.found);
}

TEST(JsonUniqueKeys, TheFirstRepeatIsNamedWithTheKeyHoldingItsObject) {
  RepeatedJsonKey r;
  EXPECT_TRUE(parse_json_unique_keys(R"({"a": 1, "b": 2, "a": 3, "b": 4})", r).is_null());
  EXPECT_TRUE(r.found);
  EXPECT_EQ(r.key, "a");
  EXPECT_EQ(r.parent, "");

  EXPECT_TRUE(parse_json_unique_keys(R"({"t": {"dtype": "F32", "shape": [], "dtype": "F16"}})", r)
                  .is_null());
  EXPECT_EQ(r.key, "dtype");
  EXPECT_EQ(r.parent, "t");

  // Inside an array the object has no key of its own.
  EXPECT_TRUE(parse_json_unique_keys(R"({"list": [{"x": 1, "x": 2}]})", r).is_null());
  EXPECT_EQ(r.key, "x");
  EXPECT_EQ(r.parent, "");

  // A later call starts clean.
  EXPECT_FALSE(parse_json_unique_keys("{}", r).is_null());
  EXPECT_FALSE(r.found);
}

TEST(JsonUniqueKeys, SyntaxErrorsAreTheLibrarysParseErrors) {
  RepeatedJsonKey r;
  for (const char* bad : {"", "{", R"({"a": })", R"({"a": 1} trailing)", "[1, 2", R"({"a" 1})"}) {
    EXPECT_THROW(parse_json_unique_keys(bad, r), nlohmann::json::parse_error) << bad;
    EXPECT_FALSE(r.found) << bad;
  }
}

TEST(JsonUniqueKeys, AnObjectOfManyKeysParsesWhole) {
  // A header of many tensors: every key is checked against its object's set once.
  std::string text = "{";
  const int n = 200000;
  for (int i = 0; i < n; ++i) text += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":" + std::to_string(i);
  text += "}";
  RepeatedJsonKey r;
  const nlohmann::json j = parse_json_unique_keys(text, r);
  EXPECT_FALSE(r.found);
  ASSERT_EQ(j.size(), static_cast<size_t>(n));
  EXPECT_EQ(j["k199999"], 199999);

  text.back() = ',';
  text += "\"k123\":0}";
  EXPECT_TRUE(parse_json_unique_keys(text, r).is_null());
  EXPECT_EQ(r.key, "k123");
}

}  // namespace
}  // namespace ltx::io
