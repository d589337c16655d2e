// The download library (hub/download.h, hub/pull.h) against the loopback mock hub: redirects to
// the CDN without the token, verification before the rename, resumes, parallel ranges, gated
// repositories, listings, and Hugging Face's own cache.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/cancel.h"
#include "hub/download.h"
#include "hub/pull.h"
#include "hub/mock_hub.h"

namespace ltx::test {
namespace {

namespace fs = std::filesystem;

hub::HubConfig config(const MockHub& mock, const std::string& token = "") {
  hub::HubConfig c;
  c.endpoint = mock.endpoint();
  c.token = token;
  return c;
}

hub::DownloadOptions quiet_options() {
  hub::DownloadOptions o;
  o.hf_cache = false;  // the machine's own Hugging Face cache is not the test's
  return o;
}

TEST(HubDownload, FetchesThroughTheCdnRedirectAndVerifies) {
  MockHub mock;
  const std::string bytes = pattern_bytes(300000, 1);
  mock.add("Org/Model", "weights/model.safetensors", {bytes});
  TempDir dir;
  const hub::ModelCache cache(dir.file("cache"));
  const hub::FetchedFile f = hub::fetch_file(config(mock, "secret"), cache,
                                             {"Org/Model", "main", "weights/model.safetensors"},
                                             quiet_options());
  EXPECT_EQ(f.source, hub::FileSource::Downloaded);
  EXPECT_EQ(f.path, dir.file("cache") + "/Org/Model/main/weights/model.safetensors");
  EXPECT_EQ(read_bytes(f.path), bytes);
  EXPECT_FALSE(fs::exists(cache.partial_path({"Org/Model", "main", "weights/model.safetensors"})));
  bool cdn = false;
  for (const MockHub::Seen& s : mock.seen()) {
    if (s.server == "hub") {
      EXPECT_TRUE(s.authorization) << s.path;
    }
    if (s.server != "cdn") continue;
    cdn = true;
    EXPECT_FALSE(s.authorization) << "the token went to the CDN: " << s.path;
  }
  EXPECT_TRUE(cdn);

  // A second fetch finds it in the cache without asking the hub.
  const size_t requests = mock.seen().size();
  const hub::FetchedFile again = hub::fetch_file(config(mock), cache,
                                                 {"Org/Model", "main", "weights/model.safetensors"},
                                                 quiet_options());
  EXPECT_EQ(again.source, hub::FileSource::Cache);
  EXPECT_EQ(mock.seen().size(), requests);
}

TEST(HubDownload, SmallGitFilesAreCheckedAgainstTheirBlobId) {
  MockHub mock;
  mock.add("Org/Model", "config.json", {R"({"model_type": "gemma3"})", false});
  TempDir dir;
  const hub::ModelCache cache(dir.file("cache"));
  const auto f = hub::fetch_file(config(mock), cache, {"Org/Model", "main", "config.json"}, quiet_options());
  EXPECT_EQ(read_bytes(f.path), R"({"model_type": "gemma3"})");

  MockHub::File wrong{"{}", false};
  wrong.etag_override = git_blob_sha1("{ }");
  mock.add("Org/Model", "other.json", wrong);
  EXPECT_ERROR_HAS(hub::fetch_file(config(mock), cache, {"Org/Model", "main", "other.json"}, quiet_options()),
                   "Git blob SHA-1");
  EXPECT_FALSE(fs::exists(cache.file_path({"Org/Model", "main", "other.json"})));
}

TEST(HubDownload, ChecksumMismatchLeavesNothingBehind) {
  MockHub mock;
  MockHub::File f{pattern_bytes(100000, 2)};
  f.etag_override = sha256_hex("something else");
  mock.add("Org/Model", "model.safetensors", f);
  TempDir dir;
  const hub::ModelCache cache(dir.file("cache"));
  const hub::FileRef ref{"Org/Model", "main", "model.safetensors"};
  const std::string err = error_of([&] { hub::fetch_file(config(mock), cache, ref, quiet_options()); });
  EXPECT_NE(err.find("corrupt"), std::string::npos) << err;
  EXPECT_NE(err.find("SHA-256"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(cache.file_path(ref)));
  EXPECT_FALSE(fs::exists(cache.partial_path(ref)));
  EXPECT_FALSE(fs::exists(cache.state_path(ref)));
}

TEST(HubDownload, ParallelRangesAssembleTheFile) {
  MockHub mock;
  const std::string bytes = pattern_bytes(1000003, 3);  // not a multiple of the chunk
  mock.add("Org/Model", "big.safetensors", {bytes});
  TempDir dir;
  const hub::ModelCache cache(dir.file("cache"));
  hub::DownloadOptions o = quiet_options();
  o.connections = 4;
  o.chunk_bytes = 65536;
  const auto f = hub::fetch_file(config(mock), cache, {"Org/Model", "main", "big.safetensors"}, o);
  EXPECT_EQ(read_bytes(f.path), bytes);
  int ranged = 0;
  for (const MockHub::Seen& s : mock.seen())
    if (s.server == "cdn") {
      ++ranged;
      EXPECT_FALSE(s.range.empty());
    }
  EXPECT_EQ(ranged, 16);  // ceil(1000003 / 65536) chunks, one request each
  EXPECT_EQ(mock.cdn_bytes("big.safetensors"), static_cast<int64_t>(bytes.size()));
}

TEST(HubDownload, ADroppedConnectionResumesWhereItStopped) {
  MockHub mock;
  const std::string bytes = pattern_bytes(200000, 4);
  MockHub::File f{bytes};
  f.drop_at = 70000;
  mock.add("Org/Model", "model.safetensors", f);
  TempDir dir;
  const hub::ModelCache cache(dir.file("cache"));
  const auto got = hub::fetch_file(config(mock), cache, {"Org/Model", "main", "model.safetensors"},
                                   quiet_options());
  EXPECT_EQ(read_bytes(got.path), bytes);
  std::vector<std::string> ranges;
  for (const MockHub::Seen& s : mock.seen())
    if (s.server == "cdn") ranges.push_back(s.range);
  ASSERT_EQ(ranges.size(), 2u);
  EXPECT_EQ(ranges[0], "bytes=0-199999");
  EXPECT_EQ(ranges[1], "bytes=70000-199999");
  EXPECT_EQ(mock.cdn_bytes("model.safetensors"), 200000);  // no byte fetched twice
}

TEST(HubDownload, AStoppedDownloadKeepsItsBytesForTheNextRun) {
  MockHub mock;
  const std::string bytes = pattern_bytes(300000, 5);
  MockHub::File f{bytes};
  f.stall_at = 120000;
  mock.add("Org/Model", "model.safetensors", f);
  TempDir dir;
  const hub::ModelCache cache(dir.file("cache"));
  const hub::FileRef ref{"Org/Model", "main", "model.safetensors"};
  CancelToken stop;
  hub::DownloadOptions o = quiet_options();
  o.cancel = &stop;
  // Stopped once every byte before the stall is on disk, so the resume point is known.
  std::thread stopper([&] {
    ASSERT_TRUE(mock.wait_stalled());
    std::error_code ec;
    EXPECT_TRUE(eventually([&] { return fs::file_size(cache.partial_path(ref), ec) == 120000; }));
    stop.request(2);
  });
  EXPECT_THROW(hub::fetch_file(config(mock), cache, ref, o), Cancelled);
  stopper.join();
  mock.release();
  EXPECT_FALSE(fs::exists(cache.file_path(ref)));
  ASSERT_TRUE(fs::exists(cache.partial_path(ref)));

  const auto got = hub::fetch_file(config(mock), cache, ref, quiet_options());
  EXPECT_EQ(read_bytes(got.path), bytes);
  const std::vector<MockHub::Seen> seen = mock.seen();
  EXPECT_EQ(seen.back().range, "bytes=120000-299999");
}

TEST(HubDownload, GatedRepositoryNeedsTheToken) {
  MockHub mock;
  mock.add("google/gemma", "model.safetensors", {pattern_bytes(1000, 6)});
  mock.gate("google/gemma", "hf_right");
  TempDir dir;
  const hub::ModelCache cache(dir.file("cache"));
  const hub::FileRef ref{"google/gemma", "main", "model.safetensors"};
  const std::string anonymous = error_of([&] { hub::fetch_file(config(mock), cache, ref, quiet_options()); });
  EXPECT_NE(anonymous.find("401"), std::string::npos) << anonymous;
  EXPECT_NE(anonymous.find("--token"), std::string::npos) << anonymous;
  EXPECT_NE(anonymous.find("HF_TOKEN"), std::string::npos) << anonymous;
  EXPECT_NE(anonymous.find(mock.endpoint() + "/google/gemma"), std::string::npos) << anonymous;
  const std::string refused =
      error_of([&] { hub::fetch_file(config(mock, "hf_wrong"), cache, ref, quiet_options()); });
  EXPECT_NE(refused.find("refused the token"), std::string::npos) << refused;
  EXPECT_FALSE(fs::exists(cache.file_path(ref)));
  EXPECT_NO_THROW(hub::fetch_file(config(mock, "hf_right"), cache, ref, quiet_options()));
}

TEST(HubDownload, MissingFileAndRepositoryAreNamed) {
  MockHub mock;
  mock.add("Org/Model", "a.safetensors", {"x"});
  TempDir dir;
  const hub::ModelCache cache(dir.file("cache"));
  EXPECT_ERROR_HAS(hub::fetch_file(config(mock), cache, {"Org/Model", "main", "b.safetensors"}, quiet_options()),
                   "Org/Model:b.safetensors: not found");
  EXPECT_ERROR_HAS(hub::fetch_file(config(mock), cache, {"Org/Nope", "main", "a.safetensors"}, quiet_options()),
                   "no repository Org/Nope");
}

TEST(HubDownload, OfflineUsesOnlyTheCache) {
  MockHub mock;
  mock.add("Org/Model", "a.safetensors", {"abc"});
  TempDir dir;
  const hub::ModelCache cache(dir.file("cache"));
  hub::HubConfig off = config(mock);
  off.offline = true;
  EXPECT_ERROR_HAS(hub::fetch_file(off, cache, {"Org/Model", "main", "a.safetensors"}, quiet_options()),
                   "ltx pull Org/Model:a.safetensors");
  EXPECT_TRUE(mock.seen().empty());
}

TEST(HubDownload, HuggingFaceCacheFilesAreUsedWhereTheyAre) {
  TempDir dir;
  const std::string hf = dir.file("hf-hub");
  fs::create_directories(hf + "/models--Org--Model/refs");
  fs::create_directories(hf + "/models--Org--Model/blobs");
  fs::create_directories(hf + "/models--Org--Model/snapshots/abc123/sub");
  write_bytes(hf + "/models--Org--Model/refs/main", "abc123");
  write_bytes(hf + "/models--Org--Model/blobs/deadbeef", "weights");
  fs::create_symlink("../../../blobs/deadbeef", hf + "/models--Org--Model/snapshots/abc123/sub/m.safetensors");
  setenv("HF_HUB_CACHE", hf.c_str(), 1);
  const hub::ModelCache cache(dir.file("cache"));
  hub::HubConfig off;
  off.offline = true;
  const auto f = hub::fetch_file(off, cache, {"Org/Model", "main", "sub/m.safetensors"}, hub::DownloadOptions{});
  unsetenv("HF_HUB_CACHE");
  EXPECT_EQ(f.source, hub::FileSource::HuggingFaceCache);
  EXPECT_EQ(read_bytes(f.path), "weights");
}

TEST(HubDownload, WholeRepositoryIsListedAndKeptForOfflineUse) {
  MockHub mock;
  mock.add("google/gemma", "config.json", {"{}", false});
  mock.add("google/gemma", "tokenizer.json", {R"({"t": 1})", false});
  mock.add("google/gemma", "model-00001-of-00002.safetensors", {pattern_bytes(5000, 7)});
  mock.add("google/gemma", "model-00002-of-00002.safetensors", {pattern_bytes(6000, 8)});
  TempDir dir;
  const hub::ModelCache cache(dir.file("cache"));
  const hub::PullTarget whole{"google/gemma", "main", ""};
  const hub::TargetState before = hub::inspect_target(config(mock), cache, whole);
  EXPECT_EQ(before.missing.size(), 4u);
  EXPECT_EQ(before.missing_sizes[0] + before.missing_sizes[1] + before.missing_sizes[2] +
                before.missing_sizes[3],
            2 + 8 + 5000 + 6000);
  const std::string folder = hub::fetch_target(config(mock), cache, before, quiet_options());
  EXPECT_EQ(folder, cache.repo_dir("google/gemma", "main"));
  EXPECT_EQ(read_bytes(folder + "/model-00002-of-00002.safetensors"), pattern_bytes(6000, 8));

  hub::HubConfig off = config(mock);
  off.offline = true;
  EXPECT_TRUE(hub::inspect_target(off, cache, whole).missing.empty());
  fs::remove(folder + "/tokenizer.json");
  const hub::TargetState after = hub::inspect_target(off, cache, whole);
  ASSERT_EQ(after.missing.size(), 1u);
  EXPECT_EQ(after.missing[0].path, "tokenizer.json");
}

TEST(HubDownload, HostileListingsCannotLeaveTheCache) {
  MockHub mock;
  mock.add("Org/Model", "../../escape.json", {"{}", false});
  TempDir dir;
  const hub::ModelCache cache(dir.file("cache"));
  EXPECT_ERROR_HAS(hub::inspect_target(config(mock), cache, {"Org/Model", "main", ""}),
                   "not a relative file path");
  EXPECT_ERROR_HAS(hub::parse_pull_argument("Org/Model:../x"), "not a relative file path");
  EXPECT_ERROR_HAS(hub::parse_pull_argument("not-a-repo"), "not a Hugging Face repository id");
}

TEST(HubPresets, EveryPresetNamesFilesOfThePublishedRepositories) {
  for (const hub::Preset& p : hub::presets()) {
    bool transformer = false, text = false;
    for (const hub::PresetFile& f : p.files) {
      hub::check_repo_id(std::string(f.repo), std::string(p.name));
      if (!f.path.empty()) hub::check_file_ref({std::string(f.repo), "main", std::string(f.path)}, std::string(p.name));
      transformer = transformer || f.role == hub::Role::Checkpoint || f.role == hub::Role::Transformer;
      text = text || f.role == hub::Role::GemmaRoot || f.role == hub::Role::TextEncoder;
      EXPECT_EQ(f.path.empty(), f.role == hub::Role::GemmaRoot) << p.name;
    }
    EXPECT_TRUE(transformer && text) << p.name;
    EXPECT_EQ(hub::find_preset(p.name), &p);
  }
  EXPECT_ERROR_HAS(hub::preset("ltx-9", "--model"), "ltx-2.3-distilled");
}

}  // namespace
}  // namespace ltx::test
