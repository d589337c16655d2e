// backend::StepGraph / cuda::CudaGraph: a call recorded once as a CUDA graph and replayed.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backend/cuda/allocator.h"
#include "backend/device_query.h"
#include "backend/step_graph.h"
#include "cuda/cuda_test_util.h"
#include "models/transformer/timestep_embedding.h"
#include "ops/elementwise.h"
#include "ops/linalg.h"
#include "ops/norm.h"
#include "ops/reduce.h"
#include "support/cli_runner.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using test::kGpu;
using test::same_bytes;

// The step: a linear, an RMSNorm, a timestep embedding (its frequency ladder is a cached device
// constant, no host copy) and temporaries made and dropped on the way; results go into `out`.
struct Step {
  Tensor x, w, t, out, emb;
  void operator()() const {
    const Tensor h = ops::add(ops::linear(x, w, Tensor()), 1.0);
    out.copy_from(ops::rms_norm(h, Tensor(), 1e-6));
    emb.copy_from(models::transformer::timestep_sinusoid(t, 64, true, 0.0, 1.0, 10000.0));
  }
};

Step make_step(DType dt) {
  Step s;
  s.x = test::random_tensor({48, 96}, 1).to(kGpu, dt);
  s.w = test::random_tensor({80, 96}, 2).to(kGpu, dt);
  s.t = test::random_tensor({5}, 3, 0.f, 1000.f).to(kGpu);
  s.out = Tensor::empty({48, 80}, dt, kGpu);
  s.emb = Tensor::empty({5, 64}, DType::F32, kGpu);
  return s;
}

TEST(CudaGraph, ReplaysAreBitIdenticalToEagerRunsAndSeeNewInputs) {
  LTX_REQUIRE_CUDA();
  for (DType dt : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(dtype_name(dt));
    const Step s = make_step(dt);
    backend::StepGraph graph(kGpu);
    for (int run = 0; run < 4; ++run) {
      // New inputs in place before each run (the graph reads the same addresses).
      s.x.copy_from(test::random_tensor({48, 96}, 10 + run).to(kGpu, dt));
      s.t.copy_from(test::random_tensor({5}, 20 + run, 0.f, 1000.f).to(kGpu));
      graph.run(s);
      EXPECT_EQ(graph.captured(), run >= 1);
      const Tensor got = s.out.clone(), got_emb = s.emb.clone();
      s();  // the same step, eager, on the caller's stream
      EXPECT_TRUE(same_bytes(got, s.out)) << "run " << run;
      EXPECT_TRUE(same_bytes(got_emb, s.emb)) << "run " << run;
    }
  }
}

TEST(CudaGraph, KeepsItsMemoryThroughEmptyCache) {
  LTX_REQUIRE_CUDA();
  const Step s = make_step(DType::BF16);
  backend::StepGraph graph(kGpu);
  graph.run(s);
  graph.run(s);
  ASSERT_TRUE(graph.captured());
  const Tensor want = s.out.clone();
  // Releasing the cache must not free the blocks the recorded temporaries live in.
  cuda::empty_cache(kGpu.index);
  const Tensor filler = Tensor::zeros({1 << 22}, DType::F32, kGpu);  // may land on freed memory
  graph.run(s);
  EXPECT_TRUE(same_bytes(s.out, want));
  EXPECT_EQ(ops::sum(filler).to(Device::cpu()).data<float>()[0], 0.f);
}

TEST(CudaGraph, AStepThatWaitsForTheHostFailsToRecordWithAClearError) {
  LTX_REQUIRE_CUDA();
  const Tensor x = test::random_tensor({16}, 4).to(kGpu);
  backend::StepGraph graph(kGpu);
  const auto step = [&] { (void)ops::mul(x, 2.0).to(Device::cpu()); };
  graph.run(step);  // eager: fine
  try {
    graph.run(step);
    FAIL() << "the recording of a host wait succeeded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA graph capture"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(graph.captured());
  // The device keeps working.
  EXPECT_FLOAT_EQ(ops::mul(x, 2.0).to(Device::cpu()).data<float>()[0],
                  2.f * x.to(Device::cpu()).data<float>()[0]);
}

TEST(CudaGraph, AStepThatCopiesFromTheHostFailsToRecordInsteadOfReplayingAStaleBuffer) {
  LTX_REQUIRE_CUDA();
  const Tensor x = test::random_tensor({16}, 5).to(kGpu);
  backend::StepGraph graph(kGpu);
  const auto step = [&] {
    (void)ops::add(x, Tensor::from_vector(std::vector<float>(16, 1.f), {16}).to(kGpu));
  };
  graph.run(step);
  try {
    graph.run(step);
    FAIL() << "a host-to-device copy was recorded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("copy from host memory"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(graph.captured());
}

TEST(CudaGraph, BenchRecordsTheTransformerStep) {
  LTX_REQUIRE_CUDA();
  test::TempDir dir;
  const test::CliResult r =
      test::run_ltx(dir, {"bench", "transformer", "--preset", "tiny", "--device", "cuda",
                          "--cuda-graph", "--warmup", "0", "--iters", "2"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("recorded as a CUDA graph"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find(" graph"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace ltx
