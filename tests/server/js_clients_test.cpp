// The JavaScript clients (tests/server/js: the OpenAI Node SDK, curl, the web page in headless
// Chromium) against the HTTP layer over an in-memory VideoService whose worker produces a real
// H.264 MP4. This pins the wire contract the SDK and the browser rely on without the engine; the
// same scripts run against the real `ltx serve` through run_js.sh --ltx. Skipped (as run_js.sh
// exits 77) without node, the node_modules or Chromium.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "core/tensor.h"
#include "io/io_test_util.h"
#include "media/image.h"
#include "media/support.h"
#include "media/video_writer.h"
#include "media/yuv.h"
#include "server/http_server.h"
#include "server/in_memory_video_service.h"
#include "server/routes.h"
#include "server/thumbnail_sink.h"

namespace ltx::server {
namespace {

using test::InMemoryVideoService;

// The clip's frames, [9, 64, 64, 3] in [0, 1].
Tensor small_clip() {
  const int64_t f = 9, h = 64, w = 64;
  std::vector<float> px(static_cast<size_t>(f * h * w * 3));
  for (int64_t t = 0; t < f; ++t)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x)
        for (int64_t c = 0; c < 3; ++c)
          px[static_cast<size_t>(((t * h + y) * w + x) * 3 + c)] =
              static_cast<float>((x + y + 8 * t + 40 * c) % 64) / 63.0f;
  return Tensor::from_vector(px, Shape({f, h, w, 3}));
}

std::string small_mp4(const std::string& path) {
  media::write_mp4(path, small_clip(), 24.0);
  return ltx::test::read_bytes(path);
}

// The clip's thumbnail as the server makes it (its middle frame as PNG); empty without image I/O.
std::string small_thumbnail() {
  if (!media::image_io_available()) return {};
  const Tensor frames = small_clip();
  const std::vector<uint8_t> png = media::encode_png(
      media::rgb_to_uint8(frames.select(0, server::thumbnail_frame_index(frames.size(0)))));
  return std::string(png.begin(), png.end());
}

struct RunResult {
  int status = -1;
  std::string output;
};

RunResult run(const std::string& command) {
  RunResult r;
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  const int rc = ::pclose(p);
  r.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  return r;
}

class JsClients : public ::testing::Test {
 protected:
  void SetUp() override {
    mp4_ = small_mp4(dir_.file("clip.mp4"));
    thumbnail_ = small_thumbnail();
    service_ = std::make_unique<InMemoryVideoService>(dir_.file(""));
    service_->makes_thumbnails = !thumbnail_.empty();
    HttpOptions o;
    o.host = "127.0.0.1";
    o.port = 0;
    o.api_key = "js-test-key";
    http_ = std::make_unique<HttpServer>(o);
    add_routes(*http_, *service_);
    http_->bind();
    serve_ = std::thread([this] { http_->serve(); });
    // A worker that takes each job through a few progress steps (about a second) to completion.
    worker_ = std::thread([this] {
      while (!done_) {
        for (const auto& id : service_->ids()) {
          const auto job = service_->get(id);
          if (!job || is_terminal(job->status)) continue;
          if (job->progress >= 80) {
            service_->complete(id, mp4_, thumbnail_);
          } else {
            service_->set_state(id, JobStatus::InProgress, job->progress + 20);
          }
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
    });
  }
  void TearDown() override {
    done_ = true;
    worker_.join();
    service_->stop();
    http_->stop();
    serve_.join();
  }
  RunResult run_js(const std::string& which) {
    const std::string script = std::string(LTX_FIXTURES_DIR) + "/../server/js/run_js.sh";
    // Beside the ltx binary: build/test-artifacts/.
    const auto shot =
        std::filesystem::path(LTX_BINARY).parent_path() / "test-artifacts" / "web_page_routes.png";
    return run("LTX_JS_TIMEOUT_S=60 LTX_WEB_SCREENSHOT='" + shot.string() + "' timeout 300 '" +
               script + "' " + which + " --url http://127.0.0.1:" + std::to_string(http_->port()) +
               " --api-key js-test-key");
  }

  ltx::test::TempDir dir_;
  std::string mp4_, thumbnail_;
  std::unique_ptr<InMemoryVideoService> service_;
  std::unique_ptr<HttpServer> http_;
  std::thread serve_, worker_;
  std::atomic<bool> done_{false};
};

TEST_F(JsClients, OpenAiNodeSdkAndCurl) {
  const RunResult r = run_js("sdk");
  if (r.status == 77) GTEST_SKIP() << r.output;
  EXPECT_EQ(r.status, 0) << r.output;
  std::printf("%s", r.output.c_str());  // the checks that ran, for the CTest log
}

TEST_F(JsClients, WebPageInHeadlessChromium) {
  const RunResult r = run_js("web");
  if (r.status == 77) GTEST_SKIP() << r.output;
  EXPECT_EQ(r.status, 0) << r.output;
  std::printf("%s", r.output.c_str());  // the checks that ran, for the CTest log
}

}  // namespace
}  // namespace ltx::server
