// `ltx pull`, `ltx models` and `ltx generate --model` as child processes against the loopback mock
// hub (HF_ENDPOINT): downloads into --cache-dir, offline mode, Ctrl-C and resume, two pulls of one
// file at once, a full disk, gated repositories, corrupt downloads, and a generation from a preset
// whose files the mock serves (the demo bundle's tiny models under the preset's names).
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <map>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "generate/demo_bundle.h"
#include "hub/mock_hub.h"

namespace ltx::test {
namespace {

namespace fs = std::filesystem;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(LtxPull, DownloadsFilesOfAnyRepositoryIntoTheCacheDir) {
  MockHub mock;
  const std::string weights = pattern_bytes(250000, 11);
  mock.add("Org/Model", "sub/w.safetensors", {weights});
  mock.add("Org/Model", "config.json", {"{}", false});
  TempDir dir;
  LtxProcess p(dir, "pull", mock.endpoint());
  ASSERT_EQ(p.run({"pull", "Org/Model:sub/w.safetensors:config.json", "--cache-dir", dir.file("c")}), 0)
      << p.err();
  const std::string path = dir.file("c") + "/Org/Model/main/sub/w.safetensors";
  EXPECT_TRUE(contains(p.out(), "Org/Model:sub/w.safetensors\t" + path)) << p.out();
  EXPECT_EQ(read_bytes(path), weights);
  EXPECT_EQ(read_bytes(dir.file("c") + "/Org/Model/main/config.json"), "{}");
  EXPECT_TRUE(contains(p.err(), "downloaded Org/Model:sub/w.safetensors")) << p.err();
}

TEST(LtxPull, OfflineSaysWhatIsMissing) {
  MockHub mock;
  mock.add("Org/Model", "a.safetensors", {pattern_bytes(1000, 12)});
  mock.add("Org/Model", "b.safetensors", {pattern_bytes(1000, 13)});
  TempDir dir;
  const std::vector<std::string> args = {"pull", "Org/Model:a.safetensors:b.safetensors", "--cache-dir",
                                         dir.file("c")};
  LtxProcess first(dir, "first", mock.endpoint());
  ASSERT_EQ(first.run({"pull", "Org/Model:a.safetensors", "--cache-dir", dir.file("c")}), 0) << first.err();

  LtxProcess off(dir, "off", mock.endpoint(), {{"HF_HUB_OFFLINE", "1"}});
  const size_t requests = mock.seen().size();
  EXPECT_EQ(off.run(args), 1);
  EXPECT_TRUE(contains(off.err(), "Org/Model:b.safetensors")) << off.err();
  EXPECT_FALSE(contains(off.err(), "Org/Model:a.safetensors\n")) << off.err();
  EXPECT_TRUE(contains(off.err(), "ltx pull")) << off.err();
  EXPECT_EQ(mock.seen().size(), requests);  // no request at all

  LtxProcess online(dir, "online", mock.endpoint());
  ASSERT_EQ(online.run(args), 0) << online.err();
  LtxProcess flag(dir, "flag", mock.endpoint());
  EXPECT_EQ(flag.run({"pull", "Org/Model:a.safetensors:b.safetensors", "--cache-dir", dir.file("c"),
                      "--offline"}),
            0)
      << flag.err();
}

TEST(LtxPull, CtrlCKeepsAResumablePartialFileAndNothingAtTheFinalPath) {
  MockHub mock;
  const std::string weights = pattern_bytes(400000, 14);
  MockHub::File f{weights};
  f.stall_at = 150000;
  mock.add("Org/Model", "w.safetensors", f);
  TempDir dir;
  const std::string final_path = dir.file("c") + "/Org/Model/main/w.safetensors";
  const std::string part = dir.file("c") + "/.downloads/Org/Model/main/w.safetensors.part";
  LtxProcess p(dir, "pull", mock.endpoint());
  p.start({"pull", "Org/Model:w.safetensors", "--cache-dir", dir.file("c")});
  ASSERT_TRUE(mock.wait_stalled());
  std::error_code ec;  // every byte before the stall on disk: the resume point is known
  ASSERT_TRUE(eventually([&] { return fs::file_size(part, ec) == 150000; })) << p.err();
  p.signal(SIGINT);
  EXPECT_EQ(p.wait(), 130);
  EXPECT_TRUE(contains(p.err(), "run the same command again to resume")) << p.err();
  EXPECT_FALSE(fs::exists(final_path));
  ASSERT_TRUE(fs::exists(part));
  EXPECT_EQ(read_bytes(part).substr(0, 150000), weights.substr(0, 150000));

  mock.release();
  LtxProcess again(dir, "again", mock.endpoint());
  ASSERT_EQ(again.run({"pull", "Org/Model:w.safetensors", "--cache-dir", dir.file("c")}), 0) << again.err();
  EXPECT_EQ(read_bytes(final_path), weights);
  EXPECT_FALSE(fs::exists(part));
  EXPECT_EQ(mock.seen().back().range, "bytes=150000-399999");
}

TEST(LtxPull, TwoPullsOfOneFileAtOnceBothSucceedAndOneDownloads) {
  MockHub mock;
  const std::string weights = pattern_bytes(300000, 15);
  MockHub::File f{weights};
  f.stall_at = 100000;
  mock.add("Org/Model", "w.safetensors", f);
  TempDir dir;
  const std::vector<std::string> args = {"pull", "Org/Model:w.safetensors", "--cache-dir", dir.file("c")};
  LtxProcess a(dir, "a", mock.endpoint()), b(dir, "b", mock.endpoint());
  a.start(args);
  ASSERT_TRUE(mock.wait_stalled());
  b.start(args);
  ASSERT_TRUE(eventually([&] { return contains(b.err(), "waiting for another ltx"); })) << b.err();
  mock.release();
  EXPECT_EQ(a.wait(), 0) << a.err();
  EXPECT_EQ(b.wait(), 0) << b.err();
  EXPECT_EQ(read_bytes(dir.file("c") + "/Org/Model/main/w.safetensors"), weights);
  EXPECT_EQ(mock.cdn_bytes("w.safetensors"), static_cast<int64_t>(weights.size()));
}

TEST(LtxPull, AFullDiskIsOneErrorAndNothingAtTheFinalPath) {
  MockHub mock;
  mock.add("Org/Model", "w.safetensors", {pattern_bytes(300000, 16)});
  TempDir dir;
  LtxProcess p(dir, "pull", mock.endpoint());
  EXPECT_EQ(p.run({"pull", "Org/Model:w.safetensors", "--cache-dir", dir.file("c")}, 100000), 1);
  EXPECT_TRUE(contains(p.err(), "File too large")) << p.err();
  EXPECT_TRUE(contains(p.err(), "--cache-dir")) << p.err();
  EXPECT_FALSE(fs::exists(dir.file("c") + "/Org/Model/main/w.safetensors"));
}

TEST(LtxPull, GatedRepositoryWithoutATokenNamesTheWayIn) {
  MockHub mock;
  mock.add("google/gemma", "m.safetensors", {pattern_bytes(5000, 17)});
  mock.gate("google/gemma", "hf_abc");
  TempDir dir;
  const std::vector<std::string> args = {"pull", "google/gemma:m.safetensors", "--cache-dir", dir.file("c")};
  LtxProcess anonymous(dir, "anon", mock.endpoint());
  EXPECT_EQ(anonymous.run(args), 1);
  EXPECT_TRUE(contains(anonymous.err(), "HF_TOKEN")) << anonymous.err();
  EXPECT_TRUE(contains(anonymous.err(), "--token")) << anonymous.err();
  EXPECT_FALSE(fs::exists(dir.file("c") + "/google/gemma/main/m.safetensors"));

  LtxProcess env(dir, "env", mock.endpoint(), {{"HF_TOKEN", "hf_abc"}});
  EXPECT_EQ(env.run(args), 0) << env.err();
  // The token file `hf auth login` writes, for another file of the repository.
  mock.add("google/gemma", "n.safetensors", {pattern_bytes(5000, 18)});
  fs::create_directories(dir.file("hf-home"));
  write_bytes(dir.file("hf-home") + "/token", "hf_abc\n");
  LtxProcess saved(dir, "saved", mock.endpoint());
  EXPECT_EQ(saved.run({"pull", "google/gemma:n.safetensors", "--cache-dir", dir.file("c")}), 0) << saved.err();
}

TEST(LtxPull, ACorruptDownloadIsRefused) {
  MockHub mock;
  MockHub::File f{pattern_bytes(50000, 19)};
  f.etag_override = sha256_hex("not these bytes");
  mock.add("Org/Model", "w.safetensors", f);
  TempDir dir;
  LtxProcess p(dir, "pull", mock.endpoint());
  EXPECT_EQ(p.run({"pull", "Org/Model:w.safetensors", "--cache-dir", dir.file("c")}), 1);
  EXPECT_TRUE(contains(p.err(), "corrupt")) << p.err();
  EXPECT_FALSE(fs::exists(dir.file("c") + "/Org/Model/main/w.safetensors"));
  EXPECT_FALSE(fs::exists(dir.file("c") + "/.downloads/Org/Model/main/w.safetensors.part"));
}

TEST(LtxModels, ListsThePresetsWithTheirFilesOffline) {
  TempDir dir;
  LtxProcess p(dir, "models", "http://127.0.0.1:9");
  ASSERT_EQ(p.run({"models", "--offline", "--json", "--cache-dir", dir.file("c")}), 0) << p.err();
  const nlohmann::json j = nlohmann::json::parse(p.out());
  bool found = false;
  for (const nlohmann::json& preset : j.at("presets")) {
    if (preset.at("name") != "ltx-2.3-distilled") continue;
    found = true;
    EXPECT_EQ(preset.at("default_pipeline"), "distilled");
    EXPECT_FALSE(preset.at("downloaded").get<bool>());
    std::set<std::string> paths;
    for (const nlohmann::json& f : preset.at("files")) paths.insert(f.at("repo").get<std::string>() + ":" + f.at("path").get<std::string>());
    EXPECT_TRUE(paths.count("Lightricks/LTX-2.3:ltx-2.3-22b-distilled-1.1.safetensors"));
    EXPECT_TRUE(paths.count("google/gemma-3-12b-it-qat-q4_0-unquantized:"));
  }
  EXPECT_TRUE(found) << p.out();
}

TEST(LtxModels, SizesComeFromTheHubAndTheCache) {
  MockHub mock;
  const std::string up = "ltx-2.3-spatial-upscaler-x2-1.1.safetensors";
  mock.add("Lightricks/LTX-2.3", up, {pattern_bytes(1234, 20)});
  mock.add("google/gemma-3-12b-it-qat-q4_0-unquantized", "config.json", {"{}", false});
  mock.gate("google/gemma-3-12b-it-qat-q4_0-unquantized", "hf_x");
  TempDir dir;
  auto files_of = [&](LtxProcess& p) {
    EXPECT_EQ(p.run({"models", "ltx-2.3-distilled", "--json", "--cache-dir", dir.file("c")}), 0) << p.err();
    std::map<std::string, nlohmann::json> files;
    const nlohmann::json listing = nlohmann::json::parse(p.out());
    for (const nlohmann::json& f : listing.at("presets").at(0).at("files"))
      files[f.at("flag").get<std::string>()] = f;
    return files;
  };
  LtxProcess before(dir, "before", mock.endpoint());
  auto files = files_of(before);
  EXPECT_EQ(files["--spatial-upsampler-path"].at("bytes"), 1234);
  EXPECT_EQ(files["--spatial-upsampler-path"].at("status"), "missing");
  EXPECT_TRUE(contains(files["--gemma-root"].at("note").get<std::string>(), "gated"));

  LtxProcess pull(dir, "pull", mock.endpoint());
  ASSERT_EQ(pull.run({"pull", "Lightricks/LTX-2.3:" + up, "--cache-dir", dir.file("c")}), 0) << pull.err();
  LtxProcess after(dir, "after", mock.endpoint());
  files = files_of(after);
  EXPECT_EQ(files["--spatial-upsampler-path"].at("status"), "downloaded");
  EXPECT_EQ(files["--spatial-upsampler-path"].at("local_path"),
            dir.file("c") + "/Lightricks/LTX-2.3/main/" + up);
}

// The LTX-2.5 distilled preset's five files, served from the demo bundle's tiny models.
void serve_demo_as_ltx25(MockHub& mock, const generate::DemoBundle& demo) {
  const std::string repo = "Lightricks/LTX-2.5";
  mock.add(repo, "diffusion_models/ltx-2.5-22b-distilled-transformer-bf16.safetensors", {read_bytes(demo.checkpoint)});
  mock.add(repo, "text_encoders/gemma4-12b-with-proj-ltx-2.5-bf16.safetensors", {read_bytes(demo.text_encoder)});
  mock.add(repo, "vae/ltx-2.5-video-vae-bf16.safetensors", {read_bytes(demo.checkpoint)});
  mock.add(repo, "vae/ltx-2.5-audio-vae-bf16.safetensors", {read_bytes(demo.checkpoint)});
  mock.add(repo, "latent_upscale_models/ltx-2.5-latent-spatial-upscaler-x2-bf16-1.0.safetensors",
           {read_bytes(demo.spatial_upsampler)});
}

TEST(LtxGenerateModel, PullsThePresetThenRunsFromTheCache) {
  TempDir dir;
  const generate::DemoBundle demo = generate::ensure_demo_bundle(dir.file("demo"));
  MockHub mock;
  serve_demo_as_ltx25(mock, demo);
  const std::vector<std::string> args = {"generate", "--model", "ltx-2.5-distilled", "--prompt", "a fox",
                                         "--height", "128", "--width", "128", "--num-frames", "9",
                                         "--output-path", dir.file("out.mp4")};

  // Without --yes and without a terminal to ask on, nothing is downloaded.
  LtxProcess ask(dir, "ask", mock.endpoint());
  EXPECT_EQ(ask.run(args), 1);
  EXPECT_TRUE(contains(ask.err(), "--yes")) << ask.err();
  EXPECT_FALSE(fs::exists(dir.file("out.mp4")));

  std::vector<std::string> yes = args;
  yes.push_back("--yes");
  LtxProcess run(dir, "run", mock.endpoint());
  ASSERT_EQ(run.run(yes), 0) << run.err();
  EXPECT_TRUE(fs::exists(dir.file("out.mp4")));
  const std::string cached = dir.file("xdg-cache") + "/ltx/models/Lightricks/LTX-2.5/main/";
  EXPECT_EQ(read_bytes(cached + "diffusion_models/ltx-2.5-22b-distilled-transformer-bf16.safetensors"),
            read_bytes(demo.checkpoint));
  EXPECT_TRUE(contains(run.err(), "--transformer-path " + cached)) << run.err();

  // Again, offline: the same files from the cache, not a request to the hub.
  const size_t requests = mock.seen().size();
  fs::remove(dir.file("out.mp4"));
  std::vector<std::string> offline = args;
  offline.push_back("--offline");
  LtxProcess again(dir, "again", mock.endpoint());
  ASSERT_EQ(again.run(offline), 0) << again.err();
  EXPECT_TRUE(fs::exists(dir.file("out.mp4")));
  EXPECT_EQ(mock.seen().size(), requests);
}

}  // namespace
}  // namespace ltx::test

namespace ltx::test {
namespace {

TEST(LtxServeModel, ServesThePresetItPulled) {
  TempDir dir;
  const generate::DemoBundle demo = generate::ensure_demo_bundle(dir.file("demo"));
  MockHub mock;
  serve_demo_as_ltx25(mock, demo);
  const std::string port_file = dir.file("port");
  LtxProcess serve(dir, "serve", mock.endpoint());
  serve.start({"serve", "--model", "ltx-2.5-distilled", "--yes", "--port", "0", "--port-file", port_file,
               "--data-dir", dir.file("data")});
  int port = 0;
  ASSERT_TRUE(eventually([&] {
    std::ifstream f(port_file);
    return static_cast<bool>(f >> port) && port > 0;
  }))
      << serve.err();
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(std::chrono::seconds(30));
  std::string model;
  ASSERT_TRUE(eventually([&] {
    const auto r = client.Get("/v1/models");
    if (!r || r->status != 200) return false;
    model = nlohmann::json::parse(r->body).at("data").at(0).at("id").get<std::string>();
    return true;
  }))
      << serve.err();
  EXPECT_NE(model, "ltx-demo");
  const std::string cached = dir.file("xdg-cache") + "/ltx/models/Lightricks/LTX-2.5/main/";
  EXPECT_TRUE(contains(serve.err(), "--text-encoder-path " + cached)) << serve.err();
  EXPECT_FALSE(contains(serve.err(), "DEMO")) << serve.err();
  serve.signal(SIGTERM);
  EXPECT_EQ(serve.wait(), 0) << serve.err();
}

}  // namespace
}  // namespace ltx::test
