#include <gtest/gtest.h>

#include <atomic>

#include "core/parallel.h"
#include "core/storage.h"
#include "core/tensor.h"
#include "support/test_support.h"

namespace ltx {
namespace {

std::vector<float> iota(int64_t n) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(i);
  return v;
}

TEST(Tensor, EmptyHasContiguousStrides) {
  Tensor t = Tensor::empty({2, 3, 4});
  EXPECT_EQ(t.strides(), Strides({12, 4, 1}));
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.nbytes(), 96u);
  EXPECT_EQ(t.describe(), "f32[2, 3, 4] cpu");
}

TEST(Tensor, RejectsMoreThanEightDims) {
  EXPECT_THROW(Tensor::empty({1, 1, 1, 1, 1, 1, 1, 1, 1}), Error);
  EXPECT_NO_THROW(Tensor::empty({1, 1, 1, 1, 1, 1, 1, 2}));
}

TEST(Tensor, SliceNarrowSelect) {
  Tensor t = Tensor::from_vector(iota(24), {2, 3, 4});
  Tensor s = t.slice(2, 1, 4, 2);  // columns 1, 3
  EXPECT_EQ(s.shape(), Shape({2, 3, 2}));
  EXPECT_EQ(s.contiguous().to_float_vector(),
            (std::vector<float>{1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23}));
  EXPECT_EQ(t.slice(1, -2, 100).shape(), Shape({2, 2, 4}));  // python-style clamping
  EXPECT_THROW(t.narrow(1, 2, 2), Error);
  EXPECT_EQ(t.select(0, 1).select(0, 2).to_float_vector(), (std::vector<float>{20, 21, 22, 23}));
  EXPECT_EQ(t.select(-1, -1).contiguous().to_float_vector(),
            (std::vector<float>{3, 7, 11, 15, 19, 23}));
}

TEST(Tensor, PermuteTransposeAndContiguous) {
  Tensor t = Tensor::from_vector(iota(6), {2, 3});
  Tensor p = t.transpose(0, 1);
  EXPECT_FALSE(p.is_contiguous());
  EXPECT_EQ(p.contiguous().to_float_vector(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  EXPECT_THROW(t.permute({0, 0}), Error);
}

TEST(Tensor, ViewFollowsPyTorchRules) {
  Tensor t = Tensor::from_vector(iota(24), {2, 3, 4});
  EXPECT_EQ(t.view({6, -1}).shape(), Shape({6, 4}));
  Tensor n = t.narrow(2, 0, 2);  // [2, 3, 2], strides [12, 4, 1]: dims 0,1 merge, 1,2 do not
  EXPECT_NO_THROW(n.view({6, 2}));
  EXPECT_THROW(n.view({2, 6}), Error);
  Tensor p = t.permute({1, 0, 2});  // [3, 2, 4]
  EXPECT_THROW(p.view({6, 4}), Error);  // needs a copy
  Tensor r = p.reshape({6, 4});         // copies
  EXPECT_EQ(r.select(0, 1).to_float_vector(), (std::vector<float>{12, 13, 14, 15}));
  EXPECT_THROW(t.view({5, -1}), Error);
  EXPECT_EQ(t.flatten(1).shape(), Shape({2, 12}));
  EXPECT_EQ(t.unsqueeze(-1).shape(), Shape({2, 3, 4, 1}));
  EXPECT_EQ(t.unsqueeze(1).squeeze(1).shape(), t.shape());
}

TEST(Tensor, ExpandBroadcasts) {
  Tensor t = Tensor::from_vector<float>({1, 2, 3}, {3, 1});
  Tensor e = t.expand({2, 3, 4});
  EXPECT_EQ(e.strides(), Strides({0, 1, 0}));
  auto v = e.contiguous().to_float_vector();
  EXPECT_EQ(v.size(), 24u);
  EXPECT_EQ(v[5], 2.f);
  EXPECT_EQ(v[12 + 11], 3.f);
  EXPECT_THROW(t.expand({3, 2, 2}), Error);
}

TEST(Tensor, SplitAndChunk) {
  Tensor t = Tensor::from_vector(iota(10), {10});
  auto parts = t.split(4, 0);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[2].to_float_vector(), (std::vector<float>{8, 9}));
  EXPECT_EQ(t.chunk(3, 0).size(), 3u);
}

TEST(Tensor, CopyConvertsAcrossLayoutsAndDtypes) {
  Tensor src = test::random_tensor({5, 7, 3}, 1);
  Tensor nc = test::non_contiguous_copy(src);
  EXPECT_FALSE(nc.is_contiguous());
  EXPECT_EQ(nc.contiguous().to_float_vector(), src.to_float_vector());
  Tensor dst = Tensor::empty({3, 7, 5}, DType::BF16).permute({2, 1, 0});
  dst.copy_from(nc);
  EXPECT_LE(test::max_abs_diff(dst, src), 1.0 / 128);
  EXPECT_EQ(dst.to(DType::F32).to_float_vector(), src.to(DType::BF16).to(DType::F32).to_float_vector());
}

TEST(Tensor, FillAndFull) {
  Tensor t = Tensor::full({3, 2}, 2.5, DType::F16);
  for (float v : t.to_float_vector()) EXPECT_EQ(v, 2.5f);
  Tensor z = Tensor::zeros({4}, DType::I64);
  EXPECT_EQ(z.to_int_vector(), (std::vector<int64_t>{0, 0, 0, 0}));
  Tensor big = Tensor::zeros({4, 6});
  big.transpose(0, 1).slice(0, 1, 2).fill(7);
  EXPECT_EQ(big.to_float_vector()[1], 7.f);
  EXPECT_EQ(big.to_float_vector()[0], 0.f);
  EXPECT_EQ(Tensor::full({}, 3.0).item(), 3.0);
}

TEST(Tensor, DataTypeChecked) {
  Tensor t = Tensor::zeros({2});
  EXPECT_NO_THROW(t.data<float>());
  EXPECT_THROW(t.data<double>(), Error);
  EXPECT_THROW(Tensor().raw_data(), Error);
}

TEST(Tensor, ViewAsDtypeReinterpretsBytes) {
  Tensor t = Tensor::from_vector<uint8_t>({0x38, 0x7E}, {2});
  EXPECT_EQ(t.view_as_dtype(DType::F8E4M3FN).to_float_vector(), (std::vector<float>{1.f, 448.f}));
  EXPECT_THROW(t.view_as_dtype(DType::F16), Error);
}

TEST(Tensor, AllocationCountsCountStorageNotViews) {
  const AllocationCounts before = allocation_counts();
  const Tensor t = Tensor::empty({3, 4});
  const Tensor copy = t.clone();
  const Tensor view = t.narrow(1, 0, 2).transpose(0, 1);  // views share the storage
  const Tensor same = t.to(DType::F32);                   // already f32: no copy
  const AllocationCounts after = allocation_counts();
  EXPECT_EQ(after.host - before.host, 2);
  EXPECT_EQ(after.cuda, before.cuda);
  (void)copy, (void)view, (void)same;
}

TEST(Parallel, CoversRangeExactlyOnceAndPropagatesErrors) {
  // Four workers whatever the machine or LTX_NUM_THREADS says (one thread runs the range inline).
  const int threads_before = num_threads();
  set_num_threads(4);
  std::vector<std::atomic<int>> hits(1000);
  parallel_for(0, 1000, 7, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) hits[i]++;
  });
  for (auto& h : hits) EXPECT_EQ(h.load(), 1);
  EXPECT_THROW(parallel_for(0, 100, 1, [](int64_t b, int64_t) {
                 if (b > 50) fail("boom");
               }),
               Error);
  // Nested calls run inline and still cover their range.
  std::atomic<int> total{0};
  parallel_for(0, 8, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      parallel_for(0, 10, 1, [&](int64_t b2, int64_t e2) { total += static_cast<int>(e2 - b2); });
  });
  EXPECT_EQ(total.load(), 80);
  set_num_threads(threads_before);
}

TEST(Parallel, InsideParallelForIsTrueOnlyWhileRunningATask) {
  const int threads_before = num_threads();
  set_num_threads(4);
  EXPECT_FALSE(inside_parallel_for());
  std::atomic<int> outside{0};
  parallel_for(0, 16, 1, [&](int64_t, int64_t) {
    if (!inside_parallel_for()) ++outside;
  });
  EXPECT_EQ(outside.load(), 0);
  EXPECT_FALSE(inside_parallel_for());  // the calling thread's flag is restored
  set_num_threads(1);  // the range runs inline on the caller: no pool job is involved
  parallel_for(0, 16, 1, [&](int64_t, int64_t) {
    if (!inside_parallel_for()) ++outside;
  });
  EXPECT_EQ(outside.load(), 1);
  set_num_threads(threads_before);
}

}  // namespace
}  // namespace ltx
