#include "io/gguf.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>
#include <nlohmann/json.hpp>

#include "io/gguf_builder.h"
#include "io/io_test_util.h"
#include "io/safetensors.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using io::GgufFile;
using io::GgufValueType;
using test::expect_error_containing;
using test::GgufBuilder;
using test::TempDir;
using test::write_bytes;

constexpr int32_t kF32 = 0, kF16 = 1, kQ8_0 = 8, kQ4_K = 12;

std::string f32_bytes(std::initializer_list<float> v) {
  std::string s;
  for (float x : v) s += GgufBuilder::le<float>(x);
  return s;
}

// A small valid file: two metadata entries and two tensors (F32 [2, 3] and one Q8_0 block).
GgufBuilder small_file() {
  GgufBuilder b;
  b.kv_string("general.architecture", "ltxv").kv_u32("general.quantization_version", 2);
  b.tensor("a", {3, 2}, kF32, f32_bytes({1, 2, 3, 4, 5, 6}));
  b.tensor("b", {32}, kQ8_0, std::string(34, '\x01'));
  return b;
}

std::string write(const TempDir& dir, const std::string& bytes, const std::string& name = "f.gguf") {
  const std::string path = dir.file(name);
  write_bytes(path, bytes);
  return path;
}

void expect_invalid(const std::string& bytes, std::initializer_list<std::string> needles) {
  TempDir dir;
  const std::string path = write(dir, bytes);
  std::vector<std::string> all(needles);
  all.push_back("invalid GGUF file '" + path + "'");
  try {
    GgufFile f(path);
    ADD_FAILURE() << "expected an ltx::Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const auto& n : all)
      EXPECT_NE(msg.find(n), std::string::npos) << "message lacks '" << n << "': " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

// ------------------------------------------------------------------ files written by gguf-py

GgufValueType type_from_gguf_py(const std::string& name) {
  static const std::map<std::string, GgufValueType> kNames = {
      {"UINT8", GgufValueType::U8},   {"INT8", GgufValueType::I8},
      {"UINT16", GgufValueType::U16}, {"INT16", GgufValueType::I16},
      {"UINT32", GgufValueType::U32}, {"INT32", GgufValueType::I32},
      {"FLOAT32", GgufValueType::F32}, {"BOOL", GgufValueType::Bool},
      {"STRING", GgufValueType::String}, {"ARRAY", GgufValueType::Array},
      {"UINT64", GgufValueType::U64}, {"INT64", GgufValueType::I64},
      {"FLOAT64", GgufValueType::F64}};
  return kNames.at(name);
}

TEST(Gguf, ReadsEveryMetadataTypeAsGgufPyReadsIt) {
  const GgufFile f(test::fixture("gguf/metadata.gguf"));
  std::ifstream in(test::fixture("gguf/metadata.expected.json"));
  const nlohmann::json expected = nlohmann::json::parse(in);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), expected["alignment"].get<uint32_t>());
  EXPECT_EQ(f.data_offset(), expected["data_offset"].get<uint64_t>());

  const auto& fields = expected["fields"];
  ASSERT_EQ(f.metadata().size(), fields.size());
  std::set<GgufValueType> seen_scalars, seen_elements;
  for (size_t i = 0; i < fields.size(); ++i) {
    const auto& want = fields[i];
    const io::GgufMetadata& kv = f.metadata()[i];  // file order
    SCOPED_TRACE(kv.key);
    EXPECT_EQ(kv.key, want["key"].get<std::string>());
    EXPECT_EQ(kv.type, type_from_gguf_py(want["types"][0].get<std::string>()));
    if (kv.type == GgufValueType::Array) {
      if (want["types"].size() > 1) {  // gguf-py names no element type for an empty array
        EXPECT_EQ(kv.element_type, type_from_gguf_py(want["types"][1].get<std::string>()));
        seen_elements.insert(kv.element_type);
      }
    } else {
      seen_scalars.insert(kv.type);
    }
    // JSON equality is exact for integers and doubles (f32 values widen exactly).
    EXPECT_EQ(kv.value, want["value"]) << kv.value.dump() << " vs " << want["value"].dump();
    EXPECT_EQ(f.find(kv.key), &kv);
  }
  EXPECT_EQ(seen_scalars.size(), 12u) << "every scalar type";
  EXPECT_EQ(seen_elements.size(), 12u) << "every array element type";

  const auto& tensors = expected["tensors"];
  ASSERT_EQ(f.size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const io::GgufTensorInfo& ti = f.infos()[i];
    SCOPED_TRACE(ti.name);
    EXPECT_EQ(ti.name, tensors[i]["name"].get<std::string>());
    EXPECT_EQ(std::string(ggml_type_name(ti.type)), tensors[i]["type"].get<std::string>());
    EXPECT_EQ(ti.ne, tensors[i]["ne"].get<std::vector<int64_t>>());
    EXPECT_EQ(ti.offset, tensors[i]["offset"].get<uint64_t>());
    EXPECT_EQ(ti.nbytes, tensors[i]["nbytes"].get<uint64_t>());
  }
}

TEST(Gguf, ShapesArePyTorchOrderOrComfyOrigShape) {
  const GgufFile f(test::fixture("gguf/metadata.gguf"));
  EXPECT_EQ(f.info("dense.f32").shape, (Shape{2, 3}));
  EXPECT_EQ(f.info("dense.bf16").shape, (Shape{2, 2, 4}));
  EXPECT_EQ(f.info("quant.q8_0").shape, (Shape{4, 64}));
  EXPECT_EQ(f.info("quant.q8_0").row_elems(), 64);
  // Stored as one row of 256, logically [4, 2, 32] (comfy.gguf.orig_shape.reshaped).
  EXPECT_EQ(f.info("reshaped").shape, (Shape{4, 2, 32}));
  EXPECT_EQ(f.info("reshaped").row_elems(), 256);
}

TEST(Gguf, DenseTensorsAreZeroCopyViewsThatKeepTheMappingAlive) {
  Tensor t;
  const void* bytes = nullptr;
  {
    const GgufFile f(test::fixture("gguf/metadata.gguf"));
    t = f.tensor("dense.f32");
    bytes = f.tensor_bytes("dense.f32");
    EXPECT_EQ(f.tensor("dense.bf16").dtype(), DType::BF16);
    EXPECT_EQ(f.tensor("dense.f16").shape(), (Shape{5}));
  }
  EXPECT_EQ(t.raw_data(), bytes);
  EXPECT_EQ(t.dtype(), DType::F32);
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_TRUE(std::isfinite(t.data<float>()[5]));  // still mapped after the file object is gone
}

TEST(Gguf, BytesInMemoryReadAsTheFileAndKeepThemselvesAlive) {
  const std::string path = test::fixture("gguf/metadata.gguf");
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const GgufFile file(path);
  Tensor t;
  {
    const auto mem = GgufFile::from_bytes("in-memory.gguf", bytes);
    EXPECT_EQ(mem->metadata_json(), file.metadata_json());
    EXPECT_EQ(mem->names(), file.names());
    t = mem->tensor("dense.f32");
  }
  const Tensor expected = file.tensor("dense.f32");
  EXPECT_EQ(std::memcmp(t.raw_data(), expected.raw_data(), 6 * sizeof(float)), 0);
  bytes.resize(bytes.size() / 2);
  try {
    (void)GgufFile::from_bytes("in-memory.gguf", bytes);
    ADD_FAILURE() << "a truncated buffer was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("in-memory.gguf"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)GgufFile::from_bytes("empty.gguf", {}), Error);
}

TEST(Gguf, QuantizedTensorsComeAsBlocksNotAsDenseTensors) {
  const GgufFile f(test::fixture("gguf/metadata.gguf"));
  expect_error_containing([&] { f.tensor("quant.q8_0"); },
                          {"metadata.gguf", "'quant.q8_0'", "Q8_0", "quantized weight"});
  const io::GgmlTensor g = f.ggml_tensor("quant.q8_0");
  EXPECT_EQ(g.type, GgmlType::Q8_0);
  EXPECT_EQ(g.shape, (Shape{4, 64}));
  EXPECT_EQ(g.row_elems, 64);
  EXPECT_EQ(g.bytes.dtype(), DType::U8);
  EXPECT_EQ(g.bytes.numel(), 4 * 2 * 34);
  EXPECT_EQ(g.bytes.raw_data(), f.tensor_bytes("quant.q8_0"));
}

TEST(Gguf, StringMetadataPlaysThePartOfSafetensorsMetadata) {
  const GgufFile f(test::fixture("gguf/metadata.gguf"));
  const auto m = f.string_metadata();
  EXPECT_EQ(m.at("general.architecture"), "ltxv");
  EXPECT_EQ(m.at("config"), R"({"transformer": {"num_layers": 1}})");
  EXPECT_EQ(m.count("test.u8"), 0u);
  EXPECT_EQ(f.string_value("general.architecture"), "ltxv");
  EXPECT_FALSE(f.string_value("absent").has_value());
  expect_error_containing([&] { f.string_value("test.u8"); }, {"'test.u8'", "u8", "not a string"});
  EXPECT_EQ(f.metadata_json()["test.array.string"], (nlohmann::json{"a", "", "ζ"}));
}

// ------------------------------------------------------------------ valid hand-made files

TEST(Gguf, ReadsVersion2LikeVersion3AndAFileWithoutTensors) {
  TempDir dir;
  GgufBuilder b = small_file();
  b.version = 2;
  const GgufFile v2(write(dir, b.bytes(), "v2.gguf"));
  EXPECT_EQ(v2.version(), 2u);
  EXPECT_EQ(v2.tensor("a").data<float>()[4], 5.0f);

  GgufBuilder empty;
  empty.kv_string("general.name", "x");
  const GgufFile e(write(dir, empty.bytes(), "empty.gguf"));
  EXPECT_EQ(e.size(), 0u);
  EXPECT_EQ(e.metadata().size(), 1u);
}

TEST(Gguf, HonoursGeneralAlignmentAndZeroDimensionScalars) {
  TempDir dir;
  GgufBuilder b;
  b.alignment = 64;
  b.kv_u32("general.alignment", 64);
  b.tensor("s", {}, kF32, f32_bytes({2.5f}));
  b.tensor("v", {2}, kF32, f32_bytes({7, 8}));
  const GgufFile f(write(dir, b.bytes()));
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(f.data_offset() % 64, 0u);
  EXPECT_EQ(f.info("v").offset, 64u);
  EXPECT_EQ(f.info("s").shape, Shape{});
  EXPECT_EQ(f.tensor("s").data<float>()[0], 2.5f);
  EXPECT_EQ(f.tensor("v").data<float>()[1], 8.0f);
}

TEST(Gguf, DetectsTheMagicAndCountsItsOpens) {
  TempDir dir;
  const std::string path = write(dir, small_file().bytes());
  EXPECT_TRUE(io::is_gguf_file(path));
  EXPECT_FALSE(io::is_gguf_file(test::fixture("ltx23.weights.bf16.safetensors")));
  EXPECT_FALSE(io::is_gguf_file(dir.file("absent.gguf")));
  const int64_t before = io::gguf_open_count();
  GgufFile f(path);
  EXPECT_EQ(io::gguf_open_count(), before + 1);
}

TEST(Gguf, SafetensorsReaderNamesAGgufFileForWhatItIs) {
  TempDir dir;
  const std::string path = write(dir, small_file().bytes());
  expect_error_containing([&] { io::SafetensorsFile f(path); },
                          {path, "this is a GGUF file, not safetensors", "--transformer-path",
                           "needs a safetensors file"});
}

// ------------------------------------------------------------------ the corrupt-file corpus

TEST(GgufCorrupt, EveryTruncationIsAnErrorNamingWhereTheFileEnds) {
  const std::string full = small_file().bytes();
  TempDir dir;
  for (size_t n = 0; n < full.size(); ++n) {
    const std::string path = write(dir, full.substr(0, n), "cut.gguf");
    try {
      GgufFile f(path);
      ADD_FAILURE() << "a file cut to " << n << " of " << full.size() << " bytes was accepted";
    } catch (const Error& e) {
      const std::string msg = e.what();
      const bool names_it = msg.find("truncated") != std::string::npos ||
                            msg.find("is empty") != std::string::npos;
      EXPECT_TRUE(names_it) << n << ": " << msg;
      EXPECT_NE(msg.find(path), std::string::npos) << msg;
    }
  }
  // Where it ends, for one cut in each section.
  const GgufBuilder b = small_file();
  expect_invalid(full.substr(0, 2), {"ends inside the magic"});
  expect_invalid(full.substr(0, 6), {"ends inside the version"});
  expect_invalid(full.substr(0, 12), {"ends inside the tensor count"});
  expect_invalid(full.substr(0, 30), {"truncated"});  // inside the first key
  expect_invalid(full.substr(0, b.tensor_infos_offset() + 3), {"the name of tensor 0"});
  expect_invalid(full.substr(0, full.size() - 1),
                 {"tensor 'b' occupies bytes", "truncated or the tensor info is wrong"});
}

TEST(GgufCorrupt, BadMagicAndVersions) {
  std::string s = small_file().bytes();
  s[0] = 'X';
  expect_invalid(s, {"bad magic 'XGUF'", "not a GGUF file"});
  GgufBuilder b = small_file();
  b.version = 1;
  expect_invalid(b.bytes(), {"version 1 is obsolete"});
  b.version = 4;
  expect_invalid(b.bytes(), {"unsupported GGUF version 4", "2 and 3"});
  b.version = 0x03000000u;
  expect_invalid(b.bytes(), {"big-endian"});
  expect_invalid("", {"the file is empty"});
}

TEST(GgufCorrupt, AbsurdCountsAreRejectedBeforeAllocating) {
  GgufBuilder b = small_file();
  b.tensor_count = uint64_t{1} << 60;
  expect_invalid(b.bytes(), {"tensor count 1152921504606846976 exceeds the limit"});
  b = small_file();
  b.metadata_count = io::kMaxGgufMetadata + 1;
  expect_invalid(b.bytes(), {"metadata count", "exceeds the limit"});
  b = small_file();
  b.tensor_count = 100000;  // under the limit, but the file cannot hold that many infos
  expect_invalid(b.bytes(), {"100000 tensors, more than the remaining"});
  GgufBuilder a;
  a.kv_raw("arr", GgufBuilder::le<uint32_t>(9) + GgufBuilder::le<uint32_t>(6) +
                      GgufBuilder::le<uint64_t>(uint64_t{1} << 40));
  expect_invalid(a.bytes(), {"metadata 'arr' announces 1099511627776 elements, over the limit"});
  GgufBuilder r;
  r.kv_raw("arr", GgufBuilder::le<uint32_t>(9) + GgufBuilder::le<uint32_t>(6) +
                      GgufBuilder::le<uint64_t>(1000) + std::string(16, '\0'));
  expect_invalid(r.bytes(), {"metadata 'arr' announces 1000 f32 elements, more than the remaining"});
  GgufBuilder big;
  big.kv_raw("s", GgufBuilder::le<uint32_t>(8) + GgufBuilder::le<uint64_t>(uint64_t{1} << 40));
  expect_invalid(big.bytes(), {"metadata 's' is 1099511627776 bytes long, over the"});
}

TEST(GgufCorrupt, StringLengthsPastTheEndOrOverTheLimit) {
  GgufBuilder b;
  b.kv_raw("s", GgufBuilder::le<uint32_t>(8) + GgufBuilder::le<uint64_t>(1000) + "abc");
  expect_invalid(b.bytes(), {"metadata 's' is 1000 bytes long but only", "truncated"});
  GgufBuilder k;
  k.kv_u32(std::string(70000, 'k'), 1);
  expect_invalid(k.bytes(), {"metadata key 0 is 70000 bytes long, over the 65535-byte limit"});
  GgufBuilder t;
  t.tensor_raw(std::string(70000, 't'), {1}, kF32, 0, f32_bytes({1}));
  expect_invalid(t.bytes(), {"the name of tensor 0 is 70000 bytes long"});
}

TEST(GgufCorrupt, MetadataViolations) {
  using B = GgufBuilder;
  expect_invalid(B().kv_u32("", 1).bytes(), {"metadata key 0 is empty"});
  expect_invalid(B().kv_u32("k", 1).kv_u32("k", 2).bytes(), {"metadata 'k' appears twice"});
  expect_invalid(B().kv_raw("k", B::le<uint32_t>(13) + B::le<uint32_t>(0)).bytes(),
                 {"metadata 'k' has unknown value type 13"});
  expect_invalid(B().kv_raw("k", B::le<uint32_t>(9) + B::le<uint32_t>(9) + B::le<uint64_t>(1) +
                                     B::le<uint32_t>(0) + B::le<uint64_t>(0))
                     .bytes(),
                 {"metadata 'k' is an array of arrays"});
  expect_invalid(B().kv_raw("k", B::le<uint32_t>(9) + B::le<uint32_t>(77) + B::le<uint64_t>(0))
                     .bytes(),
                 {"metadata 'k' is an array of unknown value type 77"});
  expect_invalid(B().kv_raw("flag", B::le<uint32_t>(7) + std::string(1, '\x02')).bytes(),
                 {"metadata 'flag' is a bool stored as 2"});
  expect_invalid(B().kv_raw("flags", B::le<uint32_t>(9) + B::le<uint32_t>(7) +
                                         B::le<uint64_t>(2) + std::string("\x01\x05", 2))
                     .bytes(),
                 {"metadata 'flags' element 1 is a bool stored as 5"});
  expect_invalid(B().kv_u32(std::string("bad\xff", 4), 1).bytes(), {"the key is not valid UTF-8"});
  expect_invalid(B().kv_string("general.name", std::string("ltx\xe7", 4)).bytes(),
                 {"metadata 'general.name' is a string that is not valid UTF-8"});
  expect_invalid(B().kv_raw("general.alignment", B::le<uint32_t>(10) + B::le<uint64_t>(32))
                     .bytes(),
                 {"'general.alignment' must be a u32, found a u64"});
  expect_invalid(B().kv_u32("general.alignment", 48).bytes(),
                 {"'general.alignment' is 48, not a power of two"});
  expect_invalid(B().kv_u32("general.alignment", 0).bytes(),
                 {"'general.alignment' is 0, not a power of two"});
}

TEST(GgufCorrupt, TensorInfoViolations) {
  const std::string q8 = std::string(34, '\x01');
  expect_invalid(GgufBuilder().tensor("", {1}, kF32, f32_bytes({1})).bytes(),
                 {"tensor 0 has an empty name"});
  expect_invalid(
      GgufBuilder().tensor("t", {1}, kF32, f32_bytes({1})).tensor("t", {1}, kF32, f32_bytes({2}))
          .bytes(),
      {"tensor 't' appears twice"});
  expect_invalid(GgufBuilder().tensor("t", {1, 1, 1, 1, 1}, kF32, f32_bytes({1})).bytes(),
                 {"tensor 't' has 5 dimensions; GGUF allows at most 4"});
  expect_invalid(GgufBuilder().tensor("t", {2, 0}, kF32, f32_bytes({1})).bytes(),
                 {"tensor 't': dimension 1 has size 0"});
  expect_invalid(GgufBuilder().tensor("t", {uint64_t{1} << 62, 8}, kF32, f32_bytes({1})).bytes(),
                 {"tensor 't': its element count overflows 64 bits"});
  expect_invalid(GgufBuilder().tensor("t", {uint64_t{1} << 62}, kF32, f32_bytes({1})).bytes(),
                 {"tensor 't': its byte size overflows 64 bits"});
  expect_invalid(GgufBuilder().tensor("t", {32}, 4, q8).bytes(),
                 {"tensor 't' has unknown GGML type id 4"});
  expect_invalid(GgufBuilder().tensor("t", {32}, 99, q8).bytes(),
                 {"tensor 't' has unknown GGML type id 99"});
  expect_invalid(GgufBuilder().tensor("t", {48}, kQ8_0, q8 + q8).bytes(),
                 {"tensor 't' of type Q8_0 has rows of 48 values, not a multiple of its block of 32"});
  expect_invalid(GgufBuilder().tensor("t", {512, 2}, kQ4_K, std::string(144, 'x')).bytes(),
                 {"tensor 't' occupies bytes [0, 576)", "holds 144 bytes"});
  expect_invalid(GgufBuilder().tensor_raw("t", {1}, kF32, 4, f32_bytes({1})).bytes(),
                 {"tensor 't' has data offset 4, not a multiple of the alignment 32"});
  expect_invalid(GgufBuilder().tensor_raw(std::string("t\xc3", 2), {1}, kF32, 0, f32_bytes({1}))
                     .bytes(),
                 {"the name is not valid UTF-8"});
  expect_invalid(GgufBuilder().tensor_raw("t", {1}, kF32, 1u << 20, "").bytes(),
                 {"tensor 't' occupies bytes [1048576, 1048580)", "which holds 0 bytes"});
}

TEST(GgufCorrupt, OverlappingTensors) {
  GgufBuilder b;
  b.tensor_raw("first", {16}, kF32, 0, std::string(64, '\0'));
  b.tensor_raw("second", {4}, kF32, 32, std::string(16, '\0'));
  expect_invalid(b.bytes(), {"tensors 'first' [0, 64) and 'second' [32, 48) overlap"});
  GgufBuilder same;
  same.tensor_raw("x", {4}, kF32, 0, f32_bytes({1, 2, 3, 4}));
  same.tensor_raw("y", {1}, kF32, 0, "");
  expect_invalid(same.bytes(), {"tensors 'x' [0, 16) and 'y' [0, 4) overlap"});
}

TEST(GgufCorrupt, ComfyOrigShapeRecordsMustFitTheirTensor) {
  GgufBuilder b = small_file();
  b.kv_i32_array("comfy.gguf.orig_shape.a", {4, 2});
  expect_invalid(b.bytes(), {"'comfy.gguf.orig_shape.a' gives shape [4, 2] (8 values) for tensor "
                             "'a' of 6 values"});
  GgufBuilder t = small_file();
  t.kv_string("comfy.gguf.orig_shape.a", "[3, 2]");
  expect_invalid(t.bytes(), {"'comfy.gguf.orig_shape.a' must be an array of i32, found a string"});
  // Four i32 dimensions multiply past int64 (found by fuzz_gguf): an error, not an overflow.
  GgufBuilder big = small_file();
  big.kv_i32_array("comfy.gguf.orig_shape.a", {2147483647, 2147483647, 2147483647, 6});
  expect_invalid(big.bytes(), {"gives shape [2147483647, 2147483647, 2147483647, 6] (more than 2^63 "
                               "values) for tensor 'a' of 6 values"});
  GgufBuilder z = small_file();
  z.kv_i32_array("comfy.gguf.orig_shape.a", {6, 0});
  expect_invalid(z.bytes(), {"has a dimension of size 0"});
  GgufBuilder ok = small_file();
  ok.kv_i32_array("comfy.gguf.orig_shape.a", {3, 1, 2});
  ok.kv_i32_array("comfy.gguf.orig_shape.absent", {1});  // records for other tensors are ignored
  TempDir dir;
  EXPECT_EQ(GgufFile(write(dir, ok.bytes())).info("a").shape, (Shape{3, 1, 2}));
}

TEST(GgufCorrupt, NotAFileOrUnreadable) {
  TempDir dir;
  expect_error_containing([&] { GgufFile f(dir.file("absent.gguf")); },
                          {"cannot open GGUF file", "absent.gguf"});
  expect_error_containing([&] { GgufFile f(dir.file("")); }, {"not a regular file"});
}

}  // namespace
}  // namespace ltx
