#pragma once
// The tiny LTX-2.3 transformer's parity run (tests/fixtures/ltx23.io.safetensors) under one
// quantization mode on the GPU, in f32 and in bf16 compute, against the CPU's f32 run of the same
// mode on the same weights: every output's rel L2 within the mode's bounds. The tests of each
// mode (fp8_cast_test, fp8_scaled_test, nvfp4_test) state why their bounds are what they are.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "cuda/cuda_test_util.h"
#include "io/io_test_util.h"
#include "io/safetensors.h"
#include "parity/parity.h"
#include "quantization/mode.h"
#include "support/test_support.h"

namespace ltx::test {

struct TinyModeBounds {
  double f32 = 0;   // rel L2 of the GPU's f32 run
  double bf16 = 0;  // rel L2 of the GPU's bf16 run
};

// `ltx parity transformer` on `weights` under `mode`; the output file's path.
inline std::string run_tiny_transformer(const std::string& weights, quantization::Mode mode,
                                        Device device, DType dtype, const TempDir& dir,
                                        const std::string& name) {
  parity::Args args;
  args.weights = {weights};
  args.inputs = fixture("ltx23.io.safetensors");
  args.out = dir.file(name);
  args.device = device;
  args.dtype = dtype;
  args.quantization = mode;
  for (const auto& ci : parity::components()) {
    if (std::string(ci.name) != "transformer") continue;
    parity::Run run(args);
    ci.fn(run);
    run.finish();
  }
  return args.out;
}

// `dir`: the calling test's folder (one per test: a second TempDir would take the same folder).
inline void expect_tiny_transformer_matches_cpu(const TempDir& dir, const std::string& weights,
                                                quantization::Mode mode, TinyModeBounds bounds) {
  const io::SafetensorsFile cpu(
      run_tiny_transformer(weights, mode, Device::cpu(), DType::F32, dir, "cpu.safetensors"));
  const io::SafetensorsFile f32(
      run_tiny_transformer(weights, mode, kGpu, DType::F32, dir, "f32.safetensors"));
  const io::SafetensorsFile bf16(
      run_tiny_transformer(weights, mode, kGpu, DType::BF16, dir, "bf16.safetensors"));
  int outputs = 0;
  for (const std::string& name : cpu.names()) {
    if (!name.starts_with("out.main.")) continue;
    ASSERT_TRUE(f32.contains(name) && bf16.contains(name)) << name;
    const parity::ErrorStats a = parity::compare(f32.tensor(name), cpu.tensor(name));
    const parity::ErrorStats b = parity::compare(bf16.tensor(name), cpu.tensor(name));
    std::printf("[%s cuda] %-36s f32 rel_l2 %.3e  bf16 rel_l2 %.3e\n",
                quantization::mode_name(mode), name.c_str(), a.rel_l2, b.rel_l2);
    EXPECT_LE(a.rel_l2, bounds.f32) << name;
    EXPECT_LE(b.rel_l2, bounds.bf16) << name;
    ++outputs;
  }
  EXPECT_GE(outputs, 4);
}

}  // namespace ltx::test
