// Copies between host and device with layout and dtype changes, compared byte for byte with the
// CPU's Tensor::copy_from (the reference semantics for every conversion).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/copy.h"
#include "backend/cuda/device.h"
#include "backend/cuda/stream.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "cuda/cuda_test_util.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using test::kGpu;
constexpr DType kAll[] = {DType::F32, DType::F16,  DType::BF16, DType::F8E4M3FN,
                          DType::F8E5M2, DType::F64, DType::I8,  DType::U8,
                          DType::I32,    DType::I64, DType::Bool};

using test::same_bytes;

// Random host values of dtype `dt` covering its range (ints: full byte patterns, floats: wide
// magnitudes and signs).
Tensor random_of(DType dt, const Shape& shape, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int64_t n = shape.numel();
  if (dt == DType::Bool) {
    std::vector<uint8_t> v(static_cast<size_t>(n));
    for (auto& x : v) x = static_cast<uint8_t>(rng() & 1);
    return Tensor::from_vector(v, shape).view_as_dtype(DType::Bool);
  }
  if (!dtype_is_floating(dt)) {
    std::vector<int64_t> v(static_cast<size_t>(n));
    for (auto& x : v) x = static_cast<int64_t>(rng());
    return Tensor::from_vector(v, shape).to(dt);  // wraps modulo 2^bits
  }
  std::vector<double> v(static_cast<size_t>(n));
  std::uniform_real_distribution<double> mant(-1.0, 1.0);
  for (auto& x : v) x = std::ldexp(mant(rng), static_cast<int>(rng() % 40) - 20);
  return Tensor::from_vector(v, shape).to(dt);
}

TEST(CudaCopy, HostDeviceHostRoundTripIsExactForEveryDtype) {
  LTX_REQUIRE_CUDA();
  for (DType dt : kAll) {
    SCOPED_TRACE(dtype_name(dt));
    for (int64_t n : {1, 7, 1000, 65537}) {
      const Tensor h = random_of(dt, {n}, static_cast<uint64_t>(n) * 31 + static_cast<int>(dt));
      const Tensor d = h.to(kGpu);
      EXPECT_EQ(d.device(), kGpu);
      EXPECT_TRUE(same_bytes(d.to(Device::cpu()), h));
      EXPECT_TRUE(same_bytes(d.clone(), h));  // device -> device
    }
  }
  // Scalars and empty tensors.
  const Tensor s = Tensor::full({}, 2.5, DType::BF16);
  EXPECT_EQ(s.to(kGpu).item(), 2.5);
  const Tensor e = Tensor::empty({0, 3}, DType::F32, kGpu);
  EXPECT_EQ(e.to(Device::cpu()).numel(), 0);
}

TEST(CudaCopy, StridedViewsOnTheDeviceMatchTheCpu) {
  LTX_REQUIRE_CUDA();
  const Tensor h = test::random_tensor({3, 5, 7, 4}, 11);
  const Tensor d = h.to(kGpu);
  auto check = [](const Tensor& dv, const Tensor& hv) {
    EXPECT_TRUE(same_bytes(dv.contiguous(), hv.contiguous()));  // device gather
    EXPECT_TRUE(same_bytes(dv.to(Device::cpu()), hv));          // D2H of a view
    for (DType dt : {DType::BF16, DType::F16, DType::F8E4M3FN, DType::I32, DType::F64}) {
      EXPECT_TRUE(same_bytes(dv.to(dt), hv.to(dt))) << dtype_name(dt);  // convert + gather
      EXPECT_TRUE(same_bytes(dv.to(Device::cpu(), dt), hv.to(dt))) << dtype_name(dt);
    }
  };
  check(d.permute({2, 0, 3, 1}), h.permute({2, 0, 3, 1}));
  check(d.slice(1, 1, 5, 2).slice(3, 1, 4), h.slice(1, 1, 5, 2).slice(3, 1, 4));
  check(d.select(2, 3), h.select(2, 3));
  check(d.transpose(0, 3).narrow(2, 2, 3), h.transpose(0, 3).narrow(2, 2, 3));
  check(d.select(0, 1).select(0, 2).unsqueeze(0).expand({6, 7, 4}),
        h.select(0, 1).select(0, 2).unsqueeze(0).expand({6, 7, 4}));  // stride 0
  // 8 dims, odd sizes, a permutation that defeats dim collapsing.
  const Tensor h8 = test::random_tensor({2, 3, 1, 2, 3, 2, 1, 3}, 12);
  const std::vector<int64_t> perm = {7, 1, 4, 0, 6, 3, 2, 5};
  check(h8.to(kGpu).permute(perm), h8.permute(perm));
}

// Same-dtype copies of views whose innermost run is dense move 16-, 8- or 4-byte words when the
// run, the strides and both pointers allow it, element by element otherwise: every case must give
// the CPU's bytes (channels-last slabs, the W-chunk halos of the diffusion decoder).
TEST(CudaCopy, WideWordCopiesOfDenseRunsMatchTheCpu) {
  LTX_REQUIRE_CUDA();
  for (DType dt : {DType::BF16, DType::F32, DType::U8}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor h = random_of(dt, {2, 3, 11, 48}, 21);
    const Tensor d = h.to(kGpu);
    const auto check = [](const Tensor& dv, const Tensor& hv) {
      EXPECT_TRUE(same_bytes(dv.contiguous(), hv.contiguous()));
      Tensor into = Tensor::zeros({dv.size(0), dv.size(1), dv.size(2) + 3, dv.size(3)}, dv.dtype(), kGpu);
      Tensor into_h = Tensor::zeros(into.shape(), hv.dtype());
      into.narrow(2, 1, dv.size(2)).copy_from(dv);  // a strided destination too
      into_h.narrow(2, 1, hv.size(2)).copy_from(hv);
      EXPECT_TRUE(same_bytes(into, into_h));
    };
    check(d.narrow(2, 2, 7), h.narrow(2, 2, 7));         // 16-byte words
    check(d.narrow(3, 8, 24), h.narrow(3, 8, 24));       // runs of 24 elements
    check(d.narrow(3, 2, 44), h.narrow(3, 2, 44));       // an offset start: narrower words
    check(d.narrow(3, 1, 45), h.narrow(3, 1, 45));       // odd: element by element
    check(d.narrow(1, 1, 2).narrow(2, 3, 5), h.narrow(1, 1, 2).narrow(2, 3, 5));
  }
}

TEST(CudaCopy, CopyIntoNonContiguousDestinations) {
  LTX_REQUIRE_CUDA();
  const Tensor src = test::random_tensor({4, 6, 5}, 21);
  for (DType dt : {DType::F32, DType::BF16, DType::I64}) {
    SCOPED_TRACE(dtype_name(dt));
    // Reference: CPU copy into a transposed view of a zero buffer.
    const Tensor want_buf = Tensor::zeros({5, 6, 4}, dt);
    want_buf.permute({2, 1, 0}).copy_from(src);
    // host -> device scatter.
    const Tensor dbuf = Tensor::zeros({5, 6, 4}, dt, kGpu);
    dbuf.permute({2, 1, 0}).copy_from(src);
    EXPECT_TRUE(same_bytes(dbuf, want_buf));
    // device -> device scatter (with conversion from f32).
    const Tensor dbuf2 = Tensor::zeros({5, 6, 4}, dt, kGpu);
    dbuf2.permute({2, 1, 0}).copy_from(src.to(kGpu));
    EXPECT_TRUE(same_bytes(dbuf2, want_buf));
    // device -> host scatter.
    const Tensor hbuf = Tensor::zeros({5, 6, 4}, dt);
    hbuf.permute({2, 1, 0}).copy_from(src.to(kGpu));
    EXPECT_TRUE(same_bytes(hbuf, want_buf));
    // Slices of a bigger device buffer leave the rest untouched.
    const Tensor big = Tensor::full({4, 6, 9}, -1.0, dt, kGpu);
    big.narrow(2, 2, 5).copy_from(src);
    const Tensor want_big = Tensor::full({4, 6, 9}, -1.0, dt);
    want_big.narrow(2, 2, 5).copy_from(src);
    EXPECT_TRUE(same_bytes(big, want_big));
  }
}

// Bit patterns that exercise every rounding rule: NaNs (quiet, signalling, with payloads, both
// signs), infinities, signed zeros, subnormals, ties at each narrow format's precision, the fp8
// and f16 overflow thresholds, integer limits.
std::vector<float> special_floats() {
  const float inf = std::numeric_limits<float>::infinity();
  auto bits = [](uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  };
  std::vector<float> v = {
      0.0f, -0.0f, 1.0f, -1.0f, inf, -inf, bits(0x7FC00000u), bits(0xFFC00000u),
      bits(0x7F800001u), bits(0xFF812345u), bits(0x7FA00000u), bits(0x7FC01234u),
      bits(0x00000001u), bits(0x80000001u), bits(0x007FFFFFu), bits(0x00800000u),
      448.0f, 464.0f, 470.0f, 479.99f, 480.0f, -470.0f, -480.0f, 1e30f, -1e30f,
      57344.0f, 61440.0f, 65504.0f, 65519.0f, 65520.0f, 65536.0f, -65520.0f,
      bits(0x3F808000u), bits(0x3F818000u), bits(0x3F808001u),  // bf16 ties
      1.00048828125f, 1.00146484375f, 2.9802322387695312e-08f, 8.940696716308594e-08f,  // f16
      1.0625f, 1.1875f, 0.0009765625f, 0.001953125f, 0.0029296875f,  // e4m3 ties / subnormals
      1.125f, 1.375f, 1.52587890625e-05f, 2.288818359375e-05f,         // e5m2 ties / subnormals
      0.5f, 1.5f, 2.5f, -2.5f, 127.5f, 128.0f, 255.9f, 256.0f, -128.7f, 3e9f, -3e9f,
      2147483520.0f, -2147483648.0f, 9.3e18f, -9.3e18f, 0.1f, 3.14159265f};
  std::mt19937_64 rng(5);
  for (int i = 0; i < 4000; ++i) v.push_back(bits(static_cast<uint32_t>(rng())));
  return v;
}

// For each source dtype a host tensor of special values; for each target dtype the device
// conversion must equal the CPU conversion bit for bit.
TEST(CudaCopy, DeviceConversionIsBitIdenticalToCpuForSpecialValues) {
  LTX_REQUIRE_CUDA();
  const std::vector<float> f = special_floats();
  const int64_t nf = static_cast<int64_t>(f.size());
  std::vector<Tensor> sources;
  sources.push_back(Tensor::from_vector(f, {nf}));
  std::vector<double> dv(f.begin(), f.end());
  dv.push_back(1.0 + std::ldexp(1.0, -30));  // rounds differently via f32 than directly
  dv.push_back(std::numeric_limits<double>::denorm_min());
  dv.push_back(std::nan("0x123456789"));
  dv.push_back(1e300);
  dv.push_back(-1e300);
  sources.push_back(Tensor::from_vector(dv, {static_cast<int64_t>(dv.size())}));
  // Every bit pattern of the 16- and 8-bit types.
  std::vector<uint16_t> p16(65536);
  for (size_t i = 0; i < p16.size(); ++i) p16[i] = static_cast<uint16_t>(i);
  std::vector<uint8_t> p8(256);
  for (size_t i = 0; i < p8.size(); ++i) p8[i] = static_cast<uint8_t>(i);
  auto u16_as = [&](DType dt) {
    Tensor t = Tensor::empty({65536}, dt);
    std::memcpy(t.raw_data(), p16.data(), p16.size() * 2);
    return t;
  };
  auto u8_as = [&](DType dt) {
    Tensor t = Tensor::empty({256}, dt);
    std::memcpy(t.raw_data(), p8.data(), p8.size());
    return t;
  };
  sources.push_back(u16_as(DType::F16));
  sources.push_back(u16_as(DType::BF16));
  sources.push_back(u8_as(DType::F8E4M3FN));
  sources.push_back(u8_as(DType::F8E5M2));
  sources.push_back(u8_as(DType::I8));
  sources.push_back(u8_as(DType::U8));
  std::vector<int64_t> iv = {0, 1, -1, 127, 128, -129, 255, 256, 65535, 2147483647LL,
                             -2147483648LL, (1LL << 53) + 1, std::numeric_limits<int64_t>::max(),
                             std::numeric_limits<int64_t>::min(), 16777217, -16777217};
  sources.push_back(Tensor::from_vector(iv, {static_cast<int64_t>(iv.size())}));
  std::vector<int32_t> i32v(iv.size());
  for (size_t i = 0; i < iv.size(); ++i) i32v[i] = static_cast<int32_t>(iv[i]);
  sources.push_back(Tensor::from_vector(i32v, {static_cast<int64_t>(i32v.size())}));
  std::vector<uint8_t> bv = {0, 1, 2, 255};  // non-canonical bools are still nonzero
  sources.push_back(Tensor::from_vector(bv, {4}).view_as_dtype(DType::Bool));

  for (const Tensor& h : sources) {
    const Tensor d = h.to(kGpu);
    for (DType dt : kAll) {
      SCOPED_TRACE(std::string(dtype_name(h.dtype())) + " -> " + dtype_name(dt));
      const Tensor want = h.to(dt);
      EXPECT_TRUE(same_bytes(d.to(dt), want));                    // device kernel
      EXPECT_TRUE(same_bytes(d.to(Device::cpu(), dt), want));     // convert before D2H
      EXPECT_TRUE(same_bytes(h.to(kGpu, dt), want));              // convert after H2D
      // Strided source on the device (every other element).
      EXPECT_TRUE(same_bytes(d.slice(0, 0, d.numel(), 2).to(dt),
                             h.slice(0, 0, h.numel(), 2).to(dt)));
    }
  }
}

TEST(CudaCopy, E4M3FnOverflowGivesNaNLikeTheCpu) {
  LTX_REQUIRE_CUDA();
  const std::vector<float> v = {448.0f, 464.0f, 470.0f, 480.0f, -470.0f, 1e9f};
  const std::vector<uint8_t> want = {0x7E, 0x7E, 0x7F, 0x7F, 0xFF, 0x7F};
  const Tensor got = Tensor::from_vector(v, {6}).to(kGpu).to(DType::F8E4M3FN).to(Device::cpu());
  const auto* p = static_cast<const uint8_t*>(got.raw_data());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(p[i], want[i]) << v[i];
}

// Tensor::fill on the device (no host buffer): every dtype and element width, zero (memset) and
// non-zero values, special values, dense and strided destinations, byte for byte the CPU's fill.
TEST(CudaCopy, FillOnTheDeviceMatchesTheCpu) {
  LTX_REQUIRE_CUDA();
  for (DType dt : kAll) {
    SCOPED_TRACE(dtype_name(dt));
    for (double value : {0.0, 1.0, -2.5, 3.0e38, -0.0}) {
      for (int64_t n : {1, 7, 65537}) {
        const Tensor want = Tensor::full({n}, value, dt);
        EXPECT_TRUE(same_bytes(Tensor::full({n}, value, dt, kGpu).to(Device::cpu()), want))
            << value << " x " << n;
      }
      // A strided view: only its elements change, the rest keep their bytes.
      const Tensor base_host = random_of(dt, {6, 10}, 5 + static_cast<int>(dt));
      const Tensor base = base_host.to(kGpu);
      base.narrow(1, 2, 5).fill(value);
      base_host.narrow(1, 2, 5).fill(value);
      EXPECT_TRUE(same_bytes(base.to(Device::cpu()), base_host)) << value;
    }
  }
  const Tensor nan = Tensor::full({33}, std::numeric_limits<double>::quiet_NaN(), DType::BF16, kGpu);
  EXPECT_TRUE(same_bytes(nan.to(Device::cpu()),
                         Tensor::full({33}, std::numeric_limits<double>::quiet_NaN(), DType::BF16)));
}

TEST(CudaCopy, ItemAndVectorsReadDeviceValues) {
  LTX_REQUIRE_CUDA();
  const Tensor d = Tensor::from_vector(std::vector<float>{1.5f, -2.0f, 3.25f}, {3}).to(kGpu);
  EXPECT_EQ(d.select(0, 2).item(), 3.25);
  EXPECT_EQ(d.to_float_vector(), (std::vector<float>{1.5f, -2.0f, 3.25f}));
  EXPECT_EQ(d.to_int_vector(), (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(d.to(DType::BF16).to_double_vector(), (std::vector<double>{1.5, -2.0, 3.25}));
  // Values written on a non-default stream are visible to item() on that stream.
  cuda::OwnedStream s(0);
  cuda::StreamGuard g(s.get());
  const Tensor f = Tensor::full({1000}, 4.0, DType::BF16, kGpu);
  EXPECT_EQ(f.select(0, 999).item(), 4.0);
}

TEST(CudaCopy, PeerCopiesBetweenDevices) {
  LTX_REQUIRE_CUDA();
  if (cuda::device_count() < 2) GTEST_SKIP() << "needs two GPUs";
  const Tensor h = test::random_tensor({33, 17}, 31);
  const Tensor d0 = h.to(Device::cuda(0));
  const Tensor d1 = d0.to(Device::cuda(1));
  EXPECT_EQ(d1.device(), Device::cuda(1));
  EXPECT_TRUE(same_bytes(d1, h));
  EXPECT_TRUE(same_bytes(d0.transpose(0, 1).to(Device::cuda(1), DType::BF16),
                         h.transpose(0, 1).to(DType::BF16)));
}

TEST(CudaCopy, ConvertOnDeviceRejectsMixedDevices) {
  LTX_REQUIRE_CUDA();
  const Tensor d = Tensor::zeros({4}, DType::F32, kGpu);
  const Tensor h = Tensor::zeros({4});
  EXPECT_THROW(cuda::convert_on_device(d, h, cuda::current_stream(0)), Error);
  EXPECT_THROW(cuda::convert_on_device(d, Tensor::zeros({5}, DType::F32, kGpu),
                                       cuda::current_stream(0)),
               Error);
}

}  // namespace
}  // namespace ltx
