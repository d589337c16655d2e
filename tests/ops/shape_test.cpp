#include "ops/shape.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "support/test_support.h"

namespace ltx {
namespace {

using ops::PadMode;
using test::max_abs_diff;
using test::non_contiguous_copy;
using test::random_tensor;
using test::make_ref;
using test::ravel;

std::vector<double> values(const Tensor& t) { return t.to_double_vector(); }

// ---------------------------------------------------------------- pad

int64_t pad_source(int64_t i, int64_t n, PadMode mode) {
  switch (mode) {
    case PadMode::Constant: return (i < 0 || i >= n) ? -1 : i;
    case PadMode::Reflect: return i < 0 ? -i : (i >= n ? 2 * n - 2 - i : i);
    case PadMode::Replicate: return std::clamp<int64_t>(i, 0, n - 1);
    case PadMode::Circular: return ((i % n) + n) % n;
  }
  return -1;
}

Tensor pad_ref(const Tensor& x, const std::vector<int64_t>& pads, PadMode mode, double value) {
  Shape out = x.shape();
  std::vector<int64_t> before(x.dim(), 0);
  for (size_t j = 0; j < pads.size() / 2; ++j) {
    const int d = x.dim() - 1 - static_cast<int>(j);
    before[d] = pads[2 * j];
    out[d] += pads[2 * j] + pads[2 * j + 1];
  }
  const auto xv = values(x);
  return make_ref(out, [&](const std::vector<int64_t>& o) {
    std::vector<int64_t> src(o.size());
    for (int d = 0; d < x.dim(); ++d) {
      src[d] = pad_source(o[d] - before[d], x.size(d), mode);
      if (src[d] < 0) return value;
    }
    return xv[ravel(src, x.shape())];
  });
}

TEST(Pad, OneDimensionalModesGiveTorchValues) {
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4}, {1, 4});
  EXPECT_EQ(values(ops::pad(x, {2, 3}, PadMode::Reflect)),
            (std::vector<double>{3, 2, 1, 2, 3, 4, 3, 2, 1}));
  EXPECT_EQ(values(ops::pad(x, {2, 3}, PadMode::Replicate)),
            (std::vector<double>{1, 1, 1, 2, 3, 4, 4, 4, 4}));
  EXPECT_EQ(values(ops::pad(x, {2, 3}, PadMode::Circular)),
            (std::vector<double>{3, 4, 1, 2, 3, 4, 1, 2, 3}));
  EXPECT_EQ(values(ops::pad(x, {1, 2}, PadMode::Constant, -5)),
            (std::vector<double>{-5, 1, 2, 3, 4, -5, -5}));
  EXPECT_EQ(values(ops::pad(x, {-1, 1})), (std::vector<double>{2, 3, 4, 0}));
}

TEST(Pad, AllModesMatchReferenceOnSeveralDims) {
  const Tensor x = random_tensor({2, 3, 5, 7}, 11);
  const std::vector<std::vector<int64_t>> pad_sets = {
      {1, 2}, {2, 3, 1, 0}, {0, 0, 4, 4}, {3, 1, 2, 2, 1, 1}, {-2, 3, 1, -1}};
  for (PadMode mode :
       {PadMode::Constant, PadMode::Reflect, PadMode::Replicate, PadMode::Circular}) {
    for (const auto& pads : pad_sets) {
      const double value = mode == PadMode::Constant ? 0.25 : 0.0;
      const Tensor ref = pad_ref(x, pads, mode, value);
      for (const Tensor& in : {x, non_contiguous_copy(x)}) {
        const Tensor y = ops::pad(in, pads, mode, value);
        ASSERT_EQ(y.shape(), ref.shape()) << Dims(pads).str();
        EXPECT_TRUE(y.is_contiguous());
        EXPECT_EQ(max_abs_diff(y, ref), 0.0)
            << "mode " << static_cast<int>(mode) << " pads " << Dims(pads).str();
      }
    }
  }
}

TEST(Pad, CopiesAnyDtypeBitExactly) {
  const Tensor x = Tensor::arange(12, DType::I64).reshape({3, 4});
  const Tensor y = ops::pad(x, {1, 0, 0, 2}, PadMode::Constant, 7);
  ASSERT_EQ(y.dtype(), DType::I64);
  EXPECT_EQ(y.shape(), (Shape{5, 5}));
  EXPECT_EQ(y.to_int_vector(), (std::vector<int64_t>{7,  0,  1, 2, 3, 7, 4, 5, 6, 7, 7, 8, 9,
                                                     10, 11, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7}));
  const Tensor h = random_tensor({2, 3}, 3).to(DType::BF16);
  const Tensor r = ops::pad(h, {1, 1}, PadMode::Reflect);
  EXPECT_EQ(r.dtype(), DType::BF16);
  EXPECT_EQ(max_abs_diff(r, pad_ref(h, {1, 1}, PadMode::Reflect, 0)), 0.0);
}

TEST(Pad, RejectsBadArguments) {
  const Tensor x = random_tensor({2, 3, 4}, 1);
  EXPECT_ERROR_HAS(ops::pad(x, {1, 2, 3}), "pairs");
  EXPECT_ERROR_HAS(ops::pad(x, {1, 1, 1, 1, 1, 1, 1, 1}), "only 3 dims");
  EXPECT_ERROR_HAS(ops::pad(x, {4, 0}, PadMode::Reflect), "smaller than dim 2 of size 4");
  EXPECT_ERROR_HAS(ops::pad(x, {0, 5}, PadMode::Circular), "must not exceed");
  EXPECT_ERROR_HAS(ops::pad(x, {-3, -2}), "negative size");
  EXPECT_ERROR_HAS(ops::pad(x, {1, 1}, PadMode::Replicate, 2.0), "constant mode");
  EXPECT_ERROR_HAS(ops::pad(Tensor(), {1, 1}), "undefined");
}

// ---------------------------------------------------------------- concat / stack

TEST(Concat, MatchesReferenceAlongEachDim) {
  for (int64_t dim : {0, 1, 2, -1}) {
    const int d = dim < 0 ? dim + 3 : static_cast<int>(dim);
    std::vector<Tensor> parts;
    const int64_t sizes[] = {1, 3, 0, 2};
    for (int i = 0; i < 4; ++i) {
      Shape s = {2, 3, 4};
      s[d] = sizes[i];
      Tensor t = random_tensor(s, 100 + i);
      parts.push_back(i == 1 ? non_contiguous_copy(t) : t);
    }
    const Tensor y = ops::concat(parts, dim);
    Shape out = {2, 3, 4};
    out[d] = 6;
    const Tensor ref = make_ref(out, [&](std::vector<int64_t> o) {
      int i = 0;
      while (o[d] >= sizes[i]) o[d] -= sizes[i++];
      return values(parts[i])[ravel(o, parts[i].shape())];
    });
    ASSERT_EQ(y.shape(), out);
    EXPECT_EQ(max_abs_diff(y, ref), 0.0) << "dim " << dim;
  }
}

TEST(Concat, RejectsMismatchedInputs) {
  const Tensor a = random_tensor({2, 3}, 1), b = random_tensor({2, 4}, 2);
  EXPECT_ERROR_HAS(ops::concat({a, b}, 0), "sizes must match except in dim 0");
  EXPECT_ERROR_HAS(ops::concat({a, a.to(DType::F16)}, 0), "convert");
  EXPECT_ERROR_HAS(ops::concat({a, random_tensor({6}, 3)}, 0), "ranks differ");
  EXPECT_ERROR_HAS(ops::concat({}, 0), "no tensors");
  EXPECT_ERROR_HAS(ops::concat({a, a}, 2), "out of range");
  EXPECT_NO_THROW(ops::concat({a, b}, 1));
}

TEST(Stack, InsertsANewDim) {
  const Tensor a = random_tensor({3, 5}, 1), b = non_contiguous_copy(random_tensor({3, 5}, 2));
  for (int64_t dim : {0, 1, 2, -1}) {
    const Tensor y = ops::stack({a, b}, dim);
    const int d = dim < 0 ? 2 : static_cast<int>(dim);
    Shape out = {3, 5};
    out.insert(d, 2);
    const Tensor ref = make_ref(out, [&](std::vector<int64_t> o) {
      const Tensor& src = o[d] == 0 ? a : b;
      o.erase(o.begin() + d);
      return values(src)[ravel(o, src.shape())];
    });
    ASSERT_EQ(y.shape(), out);
    EXPECT_EQ(max_abs_diff(y, ref), 0.0);
  }
  EXPECT_ERROR_HAS(ops::stack({a, random_tensor({5, 3}, 3)}, 0), "shapes must be equal");
}

// ---------------------------------------------------------------- indexing

TEST(IndexSelect, MatchesReferenceForI64AndI32Indices) {
  const Tensor x = random_tensor({4, 5, 3}, 7);
  const std::vector<int64_t> idx = {4, 0, 0, 2, 3, 1, 4};
  for (DType it : {DType::I64, DType::I32}) {
    const Tensor index = Tensor::from_vector(idx, {7}).to(it);
    for (const Tensor& in : {x, non_contiguous_copy(x)}) {
      const Tensor y = ops::index_select(in, 1, index);
      const Tensor ref = make_ref({4, 7, 3}, [&](std::vector<int64_t> o) {
        o[1] = idx[o[1]];
        return values(x)[ravel(o, x.shape())];
      });
      ASSERT_EQ(y.shape(), ref.shape());
      EXPECT_EQ(max_abs_diff(y, ref), 0.0);
    }
  }
  const Tensor rows = ops::index_select(x, -3, Tensor::from_vector<int64_t>({3, 1}, {2}));
  EXPECT_EQ(max_abs_diff(rows.select(0, 0), x.select(0, 3)), 0.0);
  EXPECT_EQ(max_abs_diff(rows.select(0, 1), x.select(0, 1)), 0.0);
}

TEST(IndexSelect, RejectsOutOfRangeAndBadIndices) {
  const Tensor x = random_tensor({4, 5}, 1);
  EXPECT_ERROR_HAS(ops::index_select(x, 1, Tensor::from_vector<int64_t>({1, 5}, {2})),
                   "index value 5 (entry 1 of the index) is out of range for dim 1 of size 5");
  EXPECT_ERROR_HAS(ops::index_select(x, 0, Tensor::from_vector<int32_t>({-1}, {1})),
                   "index value -1");
  EXPECT_ERROR_HAS(ops::index_select(x, 0, Tensor::from_vector<float>({1}, {1})), "i64 or i32");
  EXPECT_ERROR_HAS(ops::index_select(x, 0, Tensor::zeros({1, 1}, DType::I64)), "0-D or 1-D");
  EXPECT_ERROR_HAS(ops::index_select(x, 2, Tensor::zeros({1}, DType::I64)), "out of range");
}

TEST(Gather, MatchesReferenceAlongEachDim) {
  const Tensor x = random_tensor({3, 4, 5}, 9);
  for (int dim = 0; dim < 3; ++dim) {
    Shape is = {2, 3, 4};
    std::vector<int64_t> idx(static_cast<size_t>(is.numel()));
    for (size_t i = 0; i < idx.size(); ++i)
      idx[i] = static_cast<int64_t>((i * 7 + 3) % x.size(dim));
    const Tensor index = non_contiguous_copy(Tensor::from_vector(idx, is));
    const Tensor y =
        ops::gather(non_contiguous_copy(x), dim, index.to(dim == 1 ? DType::I32 : DType::I64));
    const Tensor ref = make_ref(is, [&](std::vector<int64_t> o) {
      const int64_t k = idx[ravel(o, is)];
      o[dim] = k;
      return values(x)[ravel(o, x.shape())];
    });
    ASSERT_EQ(y.shape(), is);
    EXPECT_EQ(max_abs_diff(y, ref), 0.0) << "dim " << dim;
  }
}

TEST(Gather, RejectsBadIndices) {
  const Tensor x = random_tensor({3, 4}, 1);
  EXPECT_ERROR_HAS(ops::gather(x, 1, Tensor::from_vector<int64_t>({0, 4}, {1, 2})),
                   "index value 4 (entry 1 of the index) is out of range for dim 1 of size 4");
  EXPECT_ERROR_HAS(ops::gather(x, 1, Tensor::zeros({4, 1}, DType::I64)), "larger than the input");
  EXPECT_ERROR_HAS(ops::gather(x, 1, Tensor::zeros({3}, DType::I64)), "rank");
}

// ---------------------------------------------------------------- repeat / flip / embedding

TEST(Repeat, TilesLikeTorch) {
  const Tensor x = random_tensor({2, 3}, 5);
  for (const std::vector<int64_t>& reps :
       std::vector<std::vector<int64_t>>{{1, 1}, {2, 3}, {3, 1, 2}, {2, 0}, {1, 2, 1, 1}}) {
    const Tensor y = ops::repeat(non_contiguous_copy(x), reps);
    Shape out;
    const int lead = static_cast<int>(reps.size()) - 2;
    for (size_t i = 0; i < reps.size(); ++i)
      out.push_back(reps[i] *
                    (static_cast<int>(i) < lead ? 1 : x.size(static_cast<int>(i) - lead)));
    const Tensor ref = make_ref(out, [&](const std::vector<int64_t>& o) {
      return values(x)[(o[lead] % 2) * 3 + o[lead + 1] % 3];
    });
    ASSERT_EQ(y.shape(), out) << Dims(reps).str();
    EXPECT_EQ(max_abs_diff(y, ref), 0.0) << Dims(reps).str();
  }
  // CausalConv3d's first-frame padding: x[:, :, :1].repeat(1, 1, k - 1, 1, 1).
  const Tensor v = random_tensor({1, 2, 4, 3, 3}, 6);
  const Tensor first = ops::repeat(v.narrow(2, 0, 1), {1, 1, 2, 1, 1});
  ASSERT_EQ(first.shape(), (Shape{1, 2, 2, 3, 3}));
  for (int t = 0; t < 2; ++t) EXPECT_EQ(max_abs_diff(first.select(2, t), v.select(2, 0)), 0.0);
  EXPECT_ERROR_HAS(ops::repeat(x, {2}), "at least one per dim");
  EXPECT_ERROR_HAS(ops::repeat(x, {2, -1}), "negative");
}

TEST(RepeatInterleave, RepeatsEachElement) {
  const Tensor x = random_tensor({2, 3}, 8);
  const Tensor y = ops::repeat_interleave(non_contiguous_copy(x), 2, -1);
  const Tensor ref = make_ref(
      {2, 6}, [&](const std::vector<int64_t>& o) { return values(x)[o[0] * 3 + o[1] / 2]; });
  EXPECT_EQ(max_abs_diff(y, ref), 0.0);
  const Tensor z = ops::repeat_interleave(x, {1, 0, 3}, 1);
  ASSERT_EQ(z.shape(), (Shape{2, 4}));
  const std::vector<int64_t> src = {0, 2, 2, 2};
  const Tensor zref = make_ref(
      {2, 4}, [&](const std::vector<int64_t>& o) { return values(x)[o[0] * 3 + src[o[1]]]; });
  EXPECT_EQ(max_abs_diff(z, zref), 0.0);
  EXPECT_ERROR_HAS(ops::repeat_interleave(x, {1, 2}, 1), "2 repeat counts for dim 1 of size 3");
  EXPECT_ERROR_HAS(ops::repeat_interleave(x, -1, 0), "negative");
}

TEST(Flip, ReversesTheGivenDims) {
  const Tensor x = random_tensor({3, 4, 5}, 4);
  for (const std::vector<int64_t>& dims :
       std::vector<std::vector<int64_t>>{{0}, {-1}, {0, 2}, {1, 0, 2}, {}}) {
    const Tensor y = ops::flip(non_contiguous_copy(x), dims);
    const Tensor ref = make_ref(x.shape(), [&](std::vector<int64_t> o) {
      for (int64_t d : dims) {
        const int dd = d < 0 ? static_cast<int>(d) + 3 : static_cast<int>(d);
        o[dd] = x.size(dd) - 1 - o[dd];
      }
      return values(x)[ravel(o, x.shape())];
    });
    EXPECT_EQ(max_abs_diff(y, ref), 0.0) << Dims(dims).str();
  }
  EXPECT_ERROR_HAS(ops::flip(x, {1, -2}), "more than once");
}

TEST(Embedding, PicksRowsWithIdsShape) {
  const Tensor w = random_tensor({6, 4}, 12);
  const std::vector<int32_t> ids = {5, 0, 3, 3, 1, 2};
  const Tensor y = ops::embedding(w, Tensor::from_vector(ids, {2, 3}));
  ASSERT_EQ(y.shape(), (Shape{2, 3, 4}));
  const Tensor ref = make_ref({2, 3, 4}, [&](const std::vector<int64_t>& o) {
    return values(w)[ids[o[0] * 3 + o[1]] * 4 + o[2]];
  });
  EXPECT_EQ(max_abs_diff(y, ref), 0.0);
  EXPECT_ERROR_HAS(ops::embedding(w, Tensor::from_vector<int64_t>({6}, {1})),
                   "index value 6 (entry 0 of the index) is out of range for dim 0 of size 6");
}

}  // namespace
}  // namespace ltx
