// The GGUF writer (io/gguf_writer.h), checked by reading its files back with the strict reader.
#include "io/gguf_writer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <vector>

#include "io/gguf.h"
#include "io/io_test_util.h"
#include "quantization/ggml_dequant.h"

namespace ltx {
namespace {

using io::GgufMetadata;
using io::GgufTensorSpec;
using io::GgufValueType;
using test::expect_error_containing;
using test::TempDir;

GgufMetadata kv(std::string key, GgufValueType type, nlohmann::json value,
                GgufValueType element = GgufValueType::U8) {
  GgufMetadata m;
  m.key = std::move(key);
  m.type = type;
  m.element_type = element;
  m.value = std::move(value);
  return m;
}

// Fills tensor i with bytes (i * 31 + k) & 0xFF.
void pattern(size_t i, std::span<uint8_t> out) {
  for (size_t k = 0; k < out.size(); ++k) out[k] = static_cast<uint8_t>((i * 31 + k) & 0xFF);
}

TEST(GgufWriter, EveryMetadataTypeReadsBackAsWritten) {
  TempDir dir;
  const std::string path = dir.file("meta.gguf");
  const std::vector<GgufMetadata> md = {
      io::gguf_string("general.architecture", "ltxv"),
      kv("t.u8", GgufValueType::U8, 250),
      kv("t.i8", GgufValueType::I8, -120),
      kv("t.u16", GgufValueType::U16, 65000),
      kv("t.i16", GgufValueType::I16, -32000),
      io::gguf_u32("t.u32", 4000000000u),
      kv("t.i32", GgufValueType::I32, -2000000000),
      kv("t.f32", GgufValueType::F32, 0.5),
      kv("t.bool", GgufValueType::Bool, true),
      io::gguf_string("t.string", "h\xC3\xA9llo"),
      kv("t.u64", GgufValueType::U64, uint64_t{18446744073709551615u}),
      kv("t.i64", GgufValueType::I64, int64_t{-9223372036854775807LL - 1}),
      kv("t.f64", GgufValueType::F64, -1.0e300),
      io::gguf_i32_array("t.array.i32", {1, -2, 3}),
      kv("t.array.string", GgufValueType::Array, nlohmann::json::array({"a", "bc"}),
         GgufValueType::String),
      kv("t.array.empty", GgufValueType::Array, nlohmann::json::array(), GgufValueType::F32),
  };
  io::write_gguf(path, md, {}, pattern);
  const io::GgufFile f(path);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.find("general.alignment"), nullptr);  // the default is not written
  ASSERT_EQ(f.metadata().size(), md.size());
  for (size_t i = 0; i < md.size(); ++i) {
    const GgufMetadata& got = f.metadata()[i];
    EXPECT_EQ(got.key, md[i].key);
    EXPECT_EQ(got.type, md[i].type) << got.key;
    if (got.type == GgufValueType::Array) {
      EXPECT_EQ(got.element_type, md[i].element_type) << got.key;
    }
    EXPECT_EQ(got.value, md[i].value) << got.key;
  }
  EXPECT_EQ(std::filesystem::file_size(path), io::gguf_file_size(md, {}));
}

TEST(GgufWriter, TensorsLandAlignedWithTheirTypesAndShapes) {
  TempDir dir;
  const std::string path = dir.file("t.gguf");
  const std::vector<GgufTensorSpec> specs = {
      {"a.f32", GgmlType::F32, Shape{3}},
      {"b.q8_0", GgmlType::Q8_0, Shape{2, 64}},
      {"c.bf16", GgmlType::BF16, Shape{2, 3, 5}},
      {"d.q4_k", GgmlType::Q4_K, Shape{1, 256}},
      {"e.scalar", GgmlType::F32, Shape{}},
  };
  const std::vector<GgufMetadata> md = {io::gguf_string("general.architecture", "ltxv")};
  io::write_gguf(path, md, specs, pattern);
  const io::GgufFile f(path);
  ASSERT_EQ(f.size(), specs.size());
  EXPECT_EQ(f.file_size(), io::gguf_file_size(md, specs));
  EXPECT_EQ(f.data_offset() % 32, 0u);
  for (size_t i = 0; i < specs.size(); ++i) {
    const io::GgufTensorInfo& ti = f.infos()[i];
    EXPECT_EQ(ti.name, specs[i].name);
    EXPECT_EQ(ti.type, specs[i].type);
    EXPECT_EQ(ti.shape, specs[i].shape) << ti.name;
    EXPECT_EQ(ti.offset % 32, 0u) << ti.name;
    EXPECT_EQ(ti.nbytes, io::gguf_tensor_bytes(specs[i]));
    std::vector<uint8_t> want(ti.nbytes);
    pattern(i, want);
    EXPECT_EQ(std::memcmp(f.tensor_bytes(ti.name), want.data(), want.size()), 0) << ti.name;
  }
  EXPECT_EQ(f.infos()[1].ne, (std::vector<int64_t>{64, 2}));  // innermost first on disk
}

TEST(GgufWriter, OtherAlignmentsAreRecordedInGeneralAlignment) {
  TempDir dir;
  const std::string path = dir.file("a.gguf");
  io::write_gguf(path, {}, {{"x", GgmlType::F16, Shape{5}}, {"y", GgmlType::F32, Shape{2}}},
                 pattern, 64);
  const io::GgufFile f(path);
  EXPECT_EQ(f.alignment(), 64u);
  ASSERT_NE(f.find("general.alignment"), nullptr);
  EXPECT_EQ(f.find("general.alignment")->type, GgufValueType::U32);
  EXPECT_EQ(f.infos()[1].offset, 64u);
  EXPECT_EQ(f.data_offset() % 64, 0u);
}

TEST(GgufWriter, ComfyOrigShapeRecordGivesTheLogicalShape) {
  TempDir dir;
  const std::string path = dir.file("o.gguf");
  io::write_gguf(path, {io::gguf_i32_array("comfy.gguf.orig_shape.w", {4, 2, 32})},
                 {{"w", GgmlType::Q8_0, Shape{1, 256}}}, pattern);
  EXPECT_EQ(io::GgufFile(path).info("w").shape, (Shape{4, 2, 32}));
}

TEST(GgufWriter, RejectsWhatReadersWouldRejectAndLeavesNoFile) {
  TempDir dir;
  const std::string path = dir.file("bad.gguf");
  auto write = [&](std::vector<GgufMetadata> md, std::vector<GgufTensorSpec> t) {
    io::write_gguf(path, md, t, pattern);
  };
  expect_error_containing([&] { write({}, {{"w", GgmlType::Q4_K, Shape{2, 100}}}); },
                          {"'w'", "Q4_K", "not a multiple of its block of 256"});
  expect_error_containing(
      [&] { write({}, {{"w", GgmlType::F32, Shape{1}}, {"w", GgmlType::F32, Shape{1}}}); },
      {"tensor 'w'", "twice"});
  expect_error_containing([&] { write({}, {{"w", GgmlType::F32, Shape{1, 1, 1, 1, 2}}}); },
                          {"'w'", "at most 4"});
  expect_error_containing([&] { write({}, {{"", GgmlType::F32, Shape{1}}}); }, {"empty"});
  expect_error_containing([&] { write({}, {{"w", GgmlType::F32, Shape{0}}}); }, {"at least 1"});
  expect_error_containing([&] { write({io::gguf_u32("k", 1), io::gguf_u32("k", 2)}, {}); },
                          {"metadata 'k'", "twice"});
  expect_error_containing([&] { write({kv("k", GgufValueType::U8, 300)}, {}); },
                          {"metadata 'k'", "[0, 255]"});
  expect_error_containing([&] { write({kv("k", GgufValueType::String, 3)}, {}); },
                          {"metadata 'k'", "must be a string"});
  expect_error_containing(
      [&] { write({kv("k", GgufValueType::Array, nlohmann::json::array({nlohmann::json::array()}),
                      GgufValueType::Array)}, {}); },
      {"metadata 'k'", "array of arrays"});
  expect_error_containing([&] { write({io::gguf_u32("general.alignment", 64)}, {}); },
                          {"general.alignment", "32"});
  expect_error_containing([&] { write({io::gguf_string("bad\xFF", "v")}, {}); }, {"UTF-8"});
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST(GgufWriter, AFailingProducerLeavesNoFileAndKeepsAnOldOne) {
  TempDir dir;
  const std::string path = dir.file("f.gguf");
  test::write_bytes(path, "old");
  EXPECT_THROW(io::write_gguf(path, {}, {{"a", GgmlType::F32, Shape{4}}},
                              [](size_t, std::span<uint8_t>) { fail("producer failed"); }),
               Error);
  EXPECT_EQ(test::read_bytes(path), "old");
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

}  // namespace
}  // namespace ltx
