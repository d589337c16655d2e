#include "generate/progress.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "core/tensor.h"
#include "io/io_test_util.h"

namespace ltx {
namespace {

using generate::Progress;

// Runs `fn` on a Progress writing to a temporary file and returns what it wrote.
template <typename Fn>
std::string output_of(Progress::Mode mode, Fn&& fn) {
  test::TempDir dir;
  const std::string path = dir.file("progress.txt");
  std::FILE* f = std::fopen(path.c_str(), "w");
  EXPECT_NE(f, nullptr);
  {
    Progress p(f, mode);
    fn(p);
  }
  std::fclose(f);
  return test::read_bytes(path);
}

TEST(Progress, PlainLinesWhenNotATerminal) {
  const std::string out = output_of(Progress::Mode::Auto, [](Progress& p) {
    p.stage("stage 1");
    p.step(0, 3);
    p.stage("stage 1");  // re-entering the running stage continues it
    p.step(1, 3);
    p.step(3, 3);
    p.stage("decode");
    p.end_stage();
  });
  EXPECT_EQ(out.find('\r'), std::string::npos) << out;
  EXPECT_NE(out.find("ltx: stage 1 ...\n"), std::string::npos) << out;
  EXPECT_NE(out.find("ltx: stage 1: step 1/3, 0:00 elapsed, eta 0:00\n"), std::string::npos) << out;
  EXPECT_NE(out.find("ltx: stage 1: step 3/3"), std::string::npos) << out;
  EXPECT_EQ(out.find("step 0/3"), std::string::npos) << out;  // the start line says it
  EXPECT_EQ(out.find("ltx: stage 1 ...", out.find("ltx: stage 1 ...") + 1), std::string::npos)
      << "the stage started twice:\n"
      << out;
  EXPECT_NE(out.find("ltx: decode ...\n"), std::string::npos) << out;
}

TEST(Progress, BarRedrawsInPlaceAndEndsTheLine) {
  const std::string out = output_of(Progress::Mode::Bar, [](Progress& p) {
    p.stage("stage 2");
    p.step(1, 4);
    p.step(2, 4);
  });
  EXPECT_NE(out.find("\r\033[Kstage 2 [#######.......................] 1/4  25% 0:00<0:00"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("2/4  50%"), std::string::npos) << out;
  EXPECT_EQ(out.back(), '\n');  // an unfinished bar gets its newline at the end
}

TEST(Progress, OffWritesNothingButStillTimes) {
  std::string summary;
  const std::string out = output_of(Progress::Mode::Off, [&](Progress& p) {
    p.stage("text encoding");
    p.step(1, 2);
    p.stage("decode");
    p.stage("text encoding");  // a stage entered again accumulates
    p.end_stage();
    summary = p.summary();
    ASSERT_EQ(p.timings().size(), 2u);
    EXPECT_EQ(p.timings()[0].stage, "text encoding");
    EXPECT_EQ(p.timings()[1].stage, "decode");
  });
  EXPECT_EQ(out, "");
  EXPECT_EQ(summary.rfind("timings: text encoding 0 s, decode 0 s, total ", 0), 0u) << summary;
}

TEST(Progress, StagesCountTheTensorsTheyAllocate) {
  Progress p(nullptr, Progress::Mode::Off);
  p.stage("encode");
  const Tensor a = Tensor::empty({4}, DType::F32, Device::cpu());
  const Tensor b = Tensor::zeros({2, 3}, DType::F32, Device::cpu());
  p.stage("view");
  const Tensor v = b.narrow(1, 0, 2);  // a view allocates nothing
  p.stage("encode");                   // re-entered: accumulates
  const Tensor c = Tensor::empty({1}, DType::F32, Device::cpu());
  p.end_stage();
  (void)a, (void)v, (void)c;
  ASSERT_EQ(p.timings().size(), 2u);
  EXPECT_EQ(p.timings()[0].allocations.host, 3);
  EXPECT_EQ(p.timings()[0].allocations.cuda, 0);
  EXPECT_EQ(p.timings()[1].allocations.host, 0);
}

TEST(Progress, DurationsReadLikeAClock) {
  EXPECT_EQ(Progress::format_duration(0), "0:00");
  EXPECT_EQ(Progress::format_duration(7.4), "0:07");
  EXPECT_EQ(Progress::format_duration(65), "1:05");
  EXPECT_EQ(Progress::format_duration(3723), "1:02:03");
  EXPECT_EQ(Progress::format_duration(-1), "?");
}

}  // namespace
}  // namespace ltx
