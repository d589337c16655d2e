// A CPU generation gives the same bits every run, in memory and as an MP4 file: the engine's
// pool threads and the H.264 encoder must not make the output depend on timing or on what the
// process did before.
#include <gtest/gtest.h>

#include <string>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "core/parallel.h"
#include "generate/generate_test_util.h"
#include "media/video_writer.h"
#include "support/test_support.h"

namespace ltx {
namespace {

generate::GenerateOptions guided_demo() {
  generate::GenerateOptions o = test::small_demo_options("one-stage", 64, 64);
  o.prompt = "waves crashing on rocks at night";
  o.seed = 22;
  o.video_guidance.cfg = 4.5;
  return o;
}

// Many more pool threads than cores make the threads interleave differently from run to run, so
// an op whose result depends on which thread finishes first shows up as differing frames.
TEST(Determinism, RepeatedRunsGiveTheSameBitsOnManyThreads) {
  const int before = num_threads();
  set_num_threads(8);
  const generate::GenerateOptions o = guided_demo();
  const generate::DecodedMedia first = test::generate_in_memory(o).media;
  for (int run = 1; run < 4; ++run) {
    const generate::DecodedMedia again = test::generate_in_memory(o).media;
    EXPECT_TRUE(test::same_bits(again.frames, first.frames)) << "run " << run << ": frames differ";
    EXPECT_TRUE(test::same_bits(again.waveform, first.waveform))
        << "run " << run << ": waveforms differ";
  }
  set_num_threads(before);
}

// libx264's AVX-512 kernels made the MP4 of these frames depend on memory x264 reads without
// writing first: from process to process the same frames gave different bytes. glibc's perturb
// setting fills every new allocation with a chosen byte, so each encode here gets other contents
// in that memory; the bytes must not change.
TEST(Determinism, TheMp4DoesNotDependOnUnwrittenMemory) {
#if !defined(__GLIBC__)
  GTEST_SKIP() << "needs glibc's mallopt(M_PERTURB)";
#else
  if (const std::string why = test::mp4_check_unavailable(); !why.empty()) GTEST_SKIP() << why;
  const Tensor frames = test::generate_in_memory(guided_demo()).media.frames;
  test::TempDir dir;
  const std::string path = dir.file("demo.mp4");
  std::string first;
  for (const int fill : {0x00, 0x5a, 0xa5, 0xff}) {
    mallopt(M_PERTURB, fill);
    media::write_mp4(path, frames, 24.0);
    mallopt(M_PERTURB, 0);
    if (first.empty()) {
      first = test::read_bytes(path);
      ASSERT_FALSE(first.empty());
    } else {
      EXPECT_EQ(test::read_bytes(path), first) << "fill " << fill << ": the MP4 bytes differ";
    }
  }
#endif
}

}  // namespace
}  // namespace ltx
