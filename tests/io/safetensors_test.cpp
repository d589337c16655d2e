#include "io/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include "io/io_test_util.h"
#include "support/test_support.h"

namespace ltx::safetensors_test {
namespace {

using io::SafetensorsFile;
using io::write_safetensors;
using test::expect_error_containing;
using test::raw_safetensors;
using test::TempDir;
using test::write_bytes;

// Random bytes reinterpreted as `dtype` (every bit pattern, NaNs included, must survive a round
// trip).
Tensor random_bits(const Shape& shape, DType dtype, uint64_t seed) {
  Tensor t = Tensor::empty(shape, dtype);
  std::mt19937_64 rng(seed);
  auto* p = static_cast<uint8_t*>(t.raw_data());
  for (size_t i = 0; i < t.nbytes(); ++i) {
    p[i] = static_cast<uint8_t>(rng());
    if (dtype == DType::Bool) p[i] &= 1;
  }
  return t;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return ca.nbytes() == 0 || std::memcmp(ca.raw_data(), cb.raw_data(), ca.nbytes()) == 0;
}

constexpr DType kAllDTypes[] = {DType::F32,    DType::F16, DType::BF16, DType::F8E4M3FN,
                                DType::F8E5M2, DType::F64, DType::I8,   DType::U8,
                                DType::I32,    DType::I64, DType::Bool};

TEST(Safetensors, RoundTripsEveryDtypeBitExactly) {
  TempDir dir;
  std::vector<std::pair<std::string, Tensor>> tensors;
  uint64_t seed = 1;
  for (DType dt : kAllDTypes) {
    tensors.emplace_back(std::string("t.") + dtype_name(dt), random_bits({3, 7}, dt, seed++));
    tensors.emplace_back(std::string("scalar.") + dtype_name(dt), random_bits({}, dt, seed++));
  }
  const std::string path = dir.file("all.safetensors");
  write_safetensors(path, tensors);
  SafetensorsFile f(path);
  ASSERT_EQ(f.size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    ASSERT_TRUE(f.contains(name)) << name;
    const Tensor r = f.tensor(name);
    EXPECT_EQ(r.dtype(), t.dtype()) << name;
    EXPECT_EQ(r.shape(), t.shape()) << name;
    EXPECT_TRUE(same_bytes(r, t)) << name;
    EXPECT_EQ(f.info(name).nbytes(), t.nbytes()) << name;
    // Every view is aligned to its element size: the writer orders tensors by element size.
    EXPECT_EQ(reinterpret_cast<uintptr_t>(r.raw_data()) % r.element_size(), 0u) << name;
  }
}

// from_bytes validates exactly as a mapped file does and names the bytes as given.
TEST(Safetensors, ReadsFilesHeldInMemory) {
  TempDir dir;
  const std::string path = dir.file("m.safetensors");
  write_safetensors(path, {{"a", random_bits({3, 5}, DType::BF16, 7)}, {"b", random_bits({2}, DType::F64, 8)}},
                    {{"config", "{\"k\": 1}"}});
  std::ifstream in(path, std::ios::binary);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const SafetensorsFile mapped(path);
  const auto mem = SafetensorsFile::from_bytes("in-memory", bytes);
  EXPECT_EQ(mem->path(), "in-memory");
  EXPECT_EQ(mem->names(), mapped.names());
  EXPECT_EQ(mem->file_size(), mapped.file_size());
  EXPECT_EQ(mem->metadata_json("config"), mapped.metadata_json("config"));
  for (const std::string& name : mapped.names())
    EXPECT_TRUE(same_bytes(mem->tensor(name), mapped.tensor(name))) << name;

  const std::vector<uint8_t> cut(bytes.begin(), bytes.end() - 1);
  expect_error_containing([&] { SafetensorsFile::from_bytes("cut-copy", cut); },
                          {"cut-copy", "data section"});
  expect_error_containing([&] { SafetensorsFile::from_bytes("tiny", {1, 2, 3}); },
                          {"tiny", "shorter than the 8-byte header length"});
}

TEST(Safetensors, WritesNonContiguousTensorsAsTheirLogicalContents) {
  TempDir dir;
  const Tensor base = test::random_tensor({5, 3, 4}, 7);
  const Tensor nc = test::non_contiguous_copy(base);
  ASSERT_FALSE(nc.is_contiguous());
  const Tensor permuted = base.permute({2, 0, 1});
  const std::string path = dir.file("nc.safetensors");
  write_safetensors(path, {{"nc", nc}, {"perm", permuted}, {"half", nc.to(DType::BF16)}});
  SafetensorsFile f(path);
  EXPECT_TRUE(same_bytes(f.tensor("nc"), base));
  EXPECT_TRUE(same_bytes(f.tensor("perm"), permuted.contiguous()));
  EXPECT_TRUE(same_bytes(f.tensor("half"), base.to(DType::BF16)));
  EXPECT_EQ(f.tensor("perm").shape(), Shape({4, 5, 3}));
}

TEST(Safetensors, KeepsWriteOrderWithinAnElementSizeAndPutsLargerElementsFirst) {
  TempDir dir;
  const std::string path = dir.file("order.safetensors");
  write_safetensors(path, {{"z.u8", Tensor::zeros({3}, DType::U8)},
                           {"b.f32", Tensor::zeros({2})},
                           {"a.f32", Tensor::zeros({1})},
                           {"c.f64", Tensor::zeros({1}, DType::F64)}});
  SafetensorsFile f(path);
  EXPECT_EQ(f.names(), (std::vector<std::string>{"c.f64", "b.f32", "a.f32", "z.u8"}));
  EXPECT_EQ(f.info("c.f64").begin, 0u);
  EXPECT_EQ(f.info("b.f32").begin, 8u);
  EXPECT_EQ(f.info("a.f32").begin, 16u);
  EXPECT_EQ(f.info("z.u8").end, 23u);
}

TEST(Safetensors, HeaderBytesMatchTheRustCrate) {
  // Byte layouts from the crate's own serialization tests.
  TempDir dir;
  const Tensor t = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5}, {1, 2, 3});
  const std::string p1 = dir.file("a.safetensors");
  write_safetensors(p1, {{"attn.0", t}});
  std::string expect1 =
      raw_safetensors(R"({"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}})", 0);
  expect1.append(static_cast<const char*>(t.raw_data()), 24);
  EXPECT_EQ(test::read_bytes(p1), expect1);

  const std::string p2 = dir.file("b.safetensors");
  write_safetensors(p2, {{"attn0", t.view({1, 1, 2, 3})}});
  std::string expect2 = raw_safetensors(
      R"({"attn0":{"dtype":"F32","shape":[1,1,2,3],"data_offsets":[0,24]}}       )", 0);
  expect2.append(static_cast<const char*>(t.raw_data()), 24);
  EXPECT_EQ(test::read_bytes(p2), expect2);

  const std::string p3 = dir.file("empty.safetensors");
  write_safetensors(p3, {});
  EXPECT_EQ(test::read_bytes(p3), raw_safetensors("{}      ", 0));

  const std::string p4 = dir.file("meta.safetensors");
  write_safetensors(p4, {}, {{"framework", "pt"}});
  EXPECT_EQ(test::read_bytes(p4),
            raw_safetensors(R"({"__metadata__":{"framework":"pt"}}     )", 0));
}

TEST(Safetensors, ReadsAnEmptyTensorFileAndZeroByteTensors) {
  TempDir dir;
  const std::string empty = dir.file("empty.safetensors");
  write_safetensors(empty, {});
  SafetensorsFile e(empty);
  EXPECT_EQ(e.size(), 0u);
  EXPECT_TRUE(e.names().empty());
  EXPECT_TRUE(e.metadata().empty());
  EXPECT_EQ(e.file_size(), 16u);

  const std::string path = dir.file("zero.safetensors");
  write_safetensors(path, {{"a", test::random_tensor({2}, 1)},
                           {"nothing", Tensor::zeros({0, 3})},
                           {"b", test::random_tensor({3}, 2)},
                           {"also_nothing", Tensor::zeros({4, 0}, DType::BF16)}});
  SafetensorsFile f(path);
  EXPECT_EQ(f.size(), 4u);
  const Tensor z = f.tensor("nothing");
  EXPECT_EQ(z.shape(), Shape({0, 3}));
  EXPECT_EQ(z.numel(), 0);
  EXPECT_EQ(f.info("nothing").nbytes(), 0u);
  EXPECT_EQ(f.tensor("also_nothing").dtype(), DType::BF16);
  EXPECT_TRUE(same_bytes(f.tensor("b"), test::random_tensor({3}, 2)));
  // Hand-written: empty tensors sharing an offset with others, and as the last entry.
  write_bytes(path, raw_safetensors(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                    R"("e":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},)"
                                    R"("f":{"dtype":"I64","shape":[0,5],"data_offsets":[0,0]}})",
                                    4));
  SafetensorsFile g(path);
  EXPECT_EQ(g.names(), (std::vector<std::string>{"f", "x", "e"}));
}

TEST(Safetensors, MetadataRoundTripsAndDecodesLikeTheReference) {
  TempDir dir;
  const std::string path = dir.file("meta.safetensors");
  const std::map<std::string, std::string> md = {
      {"config", R"({"transformer": {"num_layers": 48, "ff_bias": false}})"},
      {"model_version", "2.3.0"},
      {"float_like", "2.5"},
      {"text", "hello world"},
      {"empty", ""}};
  write_safetensors(path, {{"w", Tensor::zeros({2})}}, md);
  SafetensorsFile f(path);
  EXPECT_EQ(f.metadata(), md);
  EXPECT_TRUE(f.has_metadata("config"));
  EXPECT_EQ(f.metadata_json("config")["transformer"]["num_layers"], 48);
  EXPECT_EQ(f.metadata_json("config")["transformer"]["ff_bias"], false);
  EXPECT_EQ(f.metadata_json("model_version"), "2.3.0");  // not JSON: stays a string
  EXPECT_TRUE(f.metadata_json("float_like").is_number_float());
  EXPECT_DOUBLE_EQ(f.metadata_json("float_like").get<double>(), 2.5);
  EXPECT_EQ(f.metadata_json("text"), "hello world");
  EXPECT_EQ(f.metadata_json("empty"), "");
  EXPECT_TRUE(f.metadata_json("absent").is_null());
  const nlohmann::json all = f.metadata_json();
  EXPECT_EQ(all.size(), md.size());
  EXPECT_EQ(all["model_version"], "2.3.0");
}

TEST(Safetensors, TensorsAreZeroCopyViewsThatKeepTheMappingAlive) {
  TempDir dir;
  const std::string path = dir.file("zc.safetensors");
  const Tensor src = test::random_tensor({16, 8}, 3);
  write_safetensors(path, {{"w", src}, {"v", src.to(DType::BF16)}});
  Tensor w, v;
  {
    auto f = SafetensorsFile::open(path);
    w = f->tensor("w");
    v = f->tensor("v");
    EXPECT_EQ(w.raw_data(), static_cast<const void*>(f->tensor_bytes("w")));
    const auto* base =
        f->tensor_bytes(f->names().front()) - f->info(f->names().front()).begin - f->data_offset();
    const auto* p = static_cast<const uint8_t*>(v.raw_data());
    EXPECT_GE(p, base);
    EXPECT_LE(p + v.nbytes(), base + f->file_size());
    EXPECT_EQ(w.device(), Device::cpu());
    EXPECT_TRUE(w.is_contiguous());
  }
  // The file object is gone; the tensors still read the mapped bytes.
  EXPECT_TRUE(same_bytes(w, src));
  EXPECT_TRUE(same_bytes(v, src.to(DType::BF16)));
}

TEST(Safetensors, CopiesTensorsWhoseBytesAreMisalignedInTheFile) {
  // A header of 9 bytes puts the data at file offset 17: f32 data there cannot be viewed in place.
  TempDir dir;
  const std::string path = dir.file("misaligned.safetensors");
  std::string bytes =
      raw_safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 0);
  const float vals[2] = {1.5f, -2.f};
  bytes.append(reinterpret_cast<const char*>(vals), 8);
  write_bytes(path, bytes);
  SafetensorsFile f(path);
  ASSERT_NE(f.header_size() % 4, 0u);
  const Tensor t = f.tensor("a");
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % 4, 0u);
  EXPECT_EQ(t.to_float_vector(), (std::vector<float>{1.5f, -2.f}));
}

TEST(Safetensors, WriterRejectsBadInputAndLeavesNoFile) {
  TempDir dir;
  const std::string path = dir.file("out.safetensors");
  expect_error_containing(
      [&] {
        write_safetensors(path, {{"a", Tensor()}});
      },
      {"out.safetensors", "'a'", "undefined"});
  expect_error_containing(
      [&] {
        write_safetensors(path, {{"a", Tensor::zeros({1})}, {"a", Tensor::zeros({1})}});
      },
      {"'a'", "twice"});
  expect_error_containing(
      [&] {
        write_safetensors(path, {{"", Tensor::zeros({1})}});
      },
      {"empty tensor name"});
  expect_error_containing(
      [&] {
        write_safetensors(path, {{"__metadata__", Tensor::zeros({1})}});
      },
      {"reserved"});
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  const std::string nowhere = dir.file("no/such/dir/out.safetensors");
  expect_error_containing(
      [&] {
        write_safetensors(nowhere, {{"a", Tensor::zeros({1})}});
      },
      {"cannot create", "no/such/dir/out.safetensors.tmp"});
}

TEST(Safetensors, FailedRewriteKeepsThePreviousFile) {
  TempDir dir;
  const std::string path = dir.file("keep.safetensors");
  write_safetensors(path, {{"a", Tensor::full({2}, 3.0)}});
  const std::string before = test::read_bytes(path);
  // The temporary name is taken by a directory: creating it fails, the old file must survive.
  std::filesystem::create_directory(path + ".tmp");
  EXPECT_THROW(write_safetensors(path, {{"b", Tensor::zeros({4})}}), Error);
  EXPECT_EQ(test::read_bytes(path), before);
  std::filesystem::remove(path + ".tmp");
  write_safetensors(path, {{"b", Tensor::zeros({4})}});  // and a later write replaces it
  EXPECT_TRUE(SafetensorsFile(path).contains("b"));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST(Safetensors, StreamedWriterAsksForEachTensorOnceInFileOrder) {
  TempDir dir;
  const std::string path = dir.file("s.safetensors");
  const std::vector<io::SafetensorsEntry> entries = {
      {"small", DType::BF16, Shape{3}}, {"big", DType::F32, Shape{2, 2}}, {"byte", DType::U8, Shape{5}}};
  std::vector<size_t> asked;
  io::write_safetensors_streamed(
      path, entries,
      [&](size_t i) {
        asked.push_back(i);
        return Tensor::full(entries[i].shape, 1.0, entries[i].dtype);
      },
      {{"k", "v"}});
  EXPECT_EQ(asked, (std::vector<size_t>{1, 0, 2}));  // 4-byte, then 2-byte, then 1-byte elements
  const SafetensorsFile f(path);
  EXPECT_EQ(f.names(), (std::vector<std::string>{"big", "small", "byte"}));
  EXPECT_EQ(f.metadata().at("k"), "v");
  EXPECT_EQ(f.tensor("small").to(DType::F32).data<float>()[2], 1.0f);

  // A tensor that is not what its entry announced stops the write; no file is left.
  const std::string bad = dir.file("bad.safetensors");
  expect_error_containing(
      [&] {
        io::write_safetensors_streamed(bad, entries,
                                       [&](size_t) { return Tensor::zeros({2, 2}, DType::F32); });
      },
      {"tensor 'small'", "announced as bf16 [3]", "f32 [2, 2]"});
  EXPECT_FALSE(std::filesystem::exists(bad));
  EXPECT_FALSE(std::filesystem::exists(bad + ".tmp"));
}

TEST(Safetensors, InfoOfAnAbsentTensorNamesFileAndTensor) {
  TempDir dir;
  const std::string path = dir.file("x.safetensors");
  write_safetensors(path, {{"a", Tensor::zeros({1})}});
  SafetensorsFile f(path);
  EXPECT_FALSE(f.contains("b"));
  expect_error_containing([&] { f.info("b"); }, {"x.safetensors", "'b'"});
  expect_error_containing([&] { f.tensor("b"); }, {"x.safetensors", "'b'"});
}

// A run opens one checkpoint many times (each component's loader, inspection, memory planning):
// the header is parsed once and shared by content, never by name.
TEST(Safetensors, ReopeningAFileReusesItsHeaderParse) {
  TempDir dir;
  const std::string path = dir.file("re.safetensors");
  const Tensor src = test::random_tensor({4, 3}, 11);
  write_safetensors(path, {{"w", src}}, {{"config", R"({"k": 1})"}});
  const int64_t parses = io::safetensors_header_parse_count();
  SafetensorsFile a(path);
  EXPECT_EQ(io::safetensors_header_parse_count(), parses + 1);
  const auto b = SafetensorsFile::open(path);
  SafetensorsFile c(path);
  EXPECT_EQ(io::safetensors_header_parse_count(), parses + 1);
  EXPECT_TRUE(same_bytes(c.tensor("w"), src));
  EXPECT_EQ(b->metadata_json("config")["k"], 1);
  EXPECT_EQ(c.metadata_json("config")["k"], 1);
}

TEST(Safetensors, FilesWithTheSameHeaderReadTheirOwnData) {
  TempDir dir;
  const Tensor x = test::random_tensor({5, 2}, 1), y = test::random_tensor({5, 2}, 2);
  write_safetensors(dir.file("x.safetensors"), {{"w", x}});
  write_safetensors(dir.file("y.safetensors"), {{"w", y}});
  SafetensorsFile fx(dir.file("x.safetensors"));
  const int64_t parses = io::safetensors_header_parse_count();
  SafetensorsFile fy(dir.file("y.safetensors"));
  EXPECT_EQ(io::safetensors_header_parse_count(), parses);  // the same header bytes
  EXPECT_EQ(fy.path(), dir.file("y.safetensors"));
  EXPECT_TRUE(same_bytes(fx.tensor("w"), x));
  EXPECT_TRUE(same_bytes(fy.tensor("w"), y));
  expect_error_containing([&] { fy.info("v"); }, {"y.safetensors", "'v'"});
}

TEST(Safetensors, AFileRewrittenInPlaceIsReadAsItIsNow) {
  TempDir dir;
  const std::string path = dir.file("w.safetensors");
  write_safetensors(path, {{"a", Tensor::zeros({2})}});
  {
    SafetensorsFile f(path);
    EXPECT_TRUE(f.contains("a"));
  }
  // The same length, another header: a new parse.
  write_safetensors(path, {{"b", Tensor::full({2}, 1.0)}});
  SafetensorsFile f(path);
  EXPECT_FALSE(f.contains("a"));
  EXPECT_EQ(f.tensor("b").to_float_vector(), (std::vector<float>{1.f, 1.f}));
  // The same header, the data cut short: still refused, naming the file.
  std::string bytes = test::read_bytes(path);
  bytes.resize(bytes.size() - 4);
  write_bytes(path, bytes);
  expect_error_containing([&] { SafetensorsFile g(path); },
                          {"w.safetensors", "tensor 'b'", "outside the data section"});
}

// ------------------------------------------------------------------- corrupt files

class SafetensorsCorrupt : public ::testing::Test {
 protected:
  TempDir dir;
  std::string path = dir.file("bad.safetensors");

  // Writes `bytes` and expects opening to fail with a message naming the file and `needles`.
  void expect_rejected(const std::string& bytes, std::initializer_list<std::string> needles) {
    write_bytes(path, bytes);
    expect_error_containing([&] { SafetensorsFile f(path); }, {path});
    expect_error_containing([&] { SafetensorsFile f(path); }, needles);
  }
};

const char* kOne = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";

TEST_F(SafetensorsCorrupt, AcceptsTheBaselineFile) {
  write_bytes(path, raw_safetensors(kOne, 8));
  EXPECT_NO_THROW(SafetensorsFile f(path));
}

TEST_F(SafetensorsCorrupt, RejectsAMissingFile) {
  expect_error_containing([&] { SafetensorsFile f(dir.file("absent.safetensors")); },
                          {"absent.safetensors", "cannot open"});
}

TEST_F(SafetensorsCorrupt, RejectsADirectory) {
  expect_error_containing([&] { SafetensorsFile f(dir.file("")); }, {"not a regular file"});
}

TEST_F(SafetensorsCorrupt, RejectsAnEmptyFile) {
  expect_rejected("", {"0 bytes", "8-byte header"});
}

TEST_F(SafetensorsCorrupt, RejectsASevenByteFile) {
  expect_rejected(std::string(7, '\0'), {"7 bytes", "8-byte header"});
}

TEST_F(SafetensorsCorrupt, RejectsATruncatedDataSection) {
  std::string bytes = raw_safetensors(kOne, 8);
  bytes.resize(bytes.size() - 3);
  expect_rejected(bytes, {"tensor 'a'", "outside the data section", "truncated"});
}

TEST_F(SafetensorsCorrupt, RejectsAFileTruncatedInsideTheHeader) {
  std::string bytes = raw_safetensors(kOne, 8);
  bytes.resize(20);
  expect_rejected(bytes, {"header length", "past the end of the file"});
}

TEST_F(SafetensorsCorrupt, RejectsAHeaderLengthLargerThanTheFile) {
  expect_rejected(raw_safetensors(kOne, 8, 5000), {"header length 5000", "past the end"});
}

TEST_F(SafetensorsCorrupt, RejectsAHugeHeaderLength) {
  expect_rejected(raw_safetensors(kOne, 8, 200'000'000), {"200000000", "100000000-byte limit"});
  expect_rejected(raw_safetensors(kOne, 8, INT64_MAX), {"100000000-byte limit"});
}

TEST_F(SafetensorsCorrupt, RejectsAHeaderLengthBelowTwo) {
  expect_rejected(raw_safetensors("{", 0), {"header length 1", "too small"});
  expect_rejected(raw_safetensors("", 8, 0), {"header length 0", "too small"});
}

TEST_F(SafetensorsCorrupt, RejectsBadJson) {
  expect_rejected(raw_safetensors(R"({"a": {"dtype": "F32", )", 0), {"not valid JSON"});
  expect_rejected(raw_safetensors(R"({"a": 1}xyz)", 0), {"not valid JSON"});
}

TEST_F(SafetensorsCorrupt, RejectsJsonThatIsNotAnObject) {
  expect_rejected(raw_safetensors("[1, 2, 3]", 0), {"not a JSON object", "'['"});
  expect_rejected(raw_safetensors(R"("text")", 0), {"not a JSON object"});
}

TEST_F(SafetensorsCorrupt, RejectsMetadataThatIsNotAStringMap) {
  expect_rejected(raw_safetensors(R"({"__metadata__":{"k":"v","n":1}})", 0),
                  {"__metadata__", "map of strings to strings", "'n'", "number"});
  expect_rejected(raw_safetensors(R"({"__metadata__":{"k":{"x":"y"}}})", 0),
                  {"__metadata__", "'k'", "object"});
  expect_rejected(raw_safetensors(R"({"__metadata__":["a"]})", 0),
                  {"__metadata__", "map of strings to strings", "array"});
}

TEST_F(SafetensorsCorrupt, RejectsAnUnknownDtype) {
  expect_rejected(raw_safetensors(R"({"w.x":{"dtype":"F33","shape":[2],"data_offsets":[0,8]}})", 8),
                  {"tensor 'w.x'", "unknown dtype 'F33'"});
  expect_rejected(raw_safetensors(R"({"w.x":{"dtype":7,"shape":[2],"data_offsets":[0,8]}})", 8),
                  {"tensor 'w.x'", "dtype must be a string"});
}

TEST_F(SafetensorsCorrupt, RejectsDtypesLtxCannotRepresent) {
  for (const char* dt : {"U32", "I16", "U16", "U64", "F8_E8M0"}) {
    const std::string h =
        std::string(R"({"w.y":{"dtype":")") + dt + R"(","shape":[2],"data_offsets":[0,8]}})";
    expect_rejected(raw_safetensors(h, 8),
                    {"tensor 'w.y'", std::string("unsupported dtype ") + dt});
  }
}

TEST_F(SafetensorsCorrupt, RejectsAShapeThatDoesNotMatchTheByteRange) {
  expect_rejected(
      raw_safetensors(R"({"m":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})", 20),
      {"tensor 'm'", "20 bytes", "[2, 3]", "needs 24 bytes"});
}

TEST_F(SafetensorsCorrupt, RejectsOverlappingRanges) {
  expect_rejected(raw_safetensors(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                                  R"("b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})",
                                  24),
                  {"'a'", "'b'", "overlap"});
}

TEST_F(SafetensorsCorrupt, RejectsAnOutOfBoundsRange) {
  expect_rejected(
      raw_safetensors(R"({"big":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8),
      {"tensor 'big'", "outside the data section (8 bytes)"});
  expect_rejected(
      raw_safetensors(R"({"far":{"dtype":"F32","shape":[1],"data_offsets":[1000,1004]}})", 8),
      {"tensor 'far'", "outside the data section"});
}

TEST_F(SafetensorsCorrupt, RejectsAHoleBetweenTensors) {
  expect_rejected(raw_safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                  R"("b":{"dtype":"F32","shape":[2],"data_offsets":[16,24]}})",
                                  24),
                  {"bytes [8, 16)", "belong to no tensor", "'a'", "'b'"});
  expect_rejected(raw_safetensors(R"({"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", 16),
                  {"bytes [0, 8)", "at the start", "'b'"});
}

TEST_F(SafetensorsCorrupt, RejectsBytesAfterTheLastTensor) {
  expect_rejected(raw_safetensors(kOne, 12), {"12 bytes", "cover only 8", "after tensor 'a'"});
  expect_rejected(raw_safetensors("{}", 4), {"4 bytes", "cover only 0"});
}

TEST_F(SafetensorsCorrupt, RejectsADuplicateKey) {
  expect_rejected(raw_safetensors(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                  R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                                  8),
                  {"tensor 'a'", "appears twice"});
  expect_rejected(
      raw_safetensors(R"({"a":{"dtype":"F32","dtype":"F16","shape":[1],"data_offsets":[0,4]}})", 4),
      {"'dtype'", "twice", "'a'"});
  expect_rejected(raw_safetensors(R"({"__metadata__":{"k":"1","k":"2"}})", 0),
                  {"'k'", "twice", "__metadata__"});
}

TEST_F(SafetensorsCorrupt, RejectsNegativeOrGarbageShapes) {
  expect_rejected(
      raw_safetensors(R"({"s":{"dtype":"F32","shape":[-1,2],"data_offsets":[0,8]}})", 8),
      {"tensor 's'", "non-negative integers"});
  expect_rejected(raw_safetensors(R"({"s":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", 4),
                  {"tensor 's'", "non-negative integers"});
  expect_rejected(
      raw_safetensors(R"({"s":{"dtype":"F32","shape":"2x2","data_offsets":[0,16]}})", 16),
      {"tensor 's'", "shape must be an array"});
  expect_rejected(
      raw_safetensors(R"({"s":{"dtype":"F32","shape":[1,1,1,1,1,1,1,1,1],"data_offsets":[0,4]}})",
                      4),
      {"tensor 's'", "9 dimensions", "at most 8"});
  expect_rejected(raw_safetensors(R"({"s":{"dtype":"F64","shape":[4294967296,4294967296],)"
                                  R"("data_offsets":[0,8]}})",
                                  8),
                  {"tensor 's'", "overflows"});
}

TEST_F(SafetensorsCorrupt, RejectsBadDataOffsets) {
  expect_rejected(raw_safetensors(R"({"o":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", 8),
                  {"tensor 'o'", "end before they begin"});
  expect_rejected(raw_safetensors(R"({"o":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", 8),
                  {"tensor 'o'", "data_offsets must be two non-negative integers"});
  expect_rejected(raw_safetensors(R"({"o":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}})", 8),
                  {"tensor 'o'", "data_offsets must be two non-negative integers"});
}

TEST_F(SafetensorsCorrupt, RejectsMissingOrExtraFields) {
  expect_rejected(raw_safetensors(R"({"f":{"dtype":"F32","shape":[2]}})", 8),
                  {"tensor 'f'", "missing field 'data_offsets'"});
  expect_rejected(
      raw_safetensors(R"({"f":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"extra":1}})", 8),
      {"tensor 'f'", "unexpected field 'extra'"});
  expect_rejected(raw_safetensors(R"({"f":[1,2]})", 0), {"tensor 'f'", "must be an object"});
}

}  // namespace
}  // namespace ltx::safetensors_test
