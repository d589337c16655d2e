#include "backend/cpu/neighborhood_attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/parallel.h"
#include "op_types/neighborhood_attention.h"

namespace ltx::cpu {

namespace {

// Dot product of two unit-stride rows with 8 independent partial sums (vectorisable).
float dot(const float* a, const float* b, int64_t n) {
  float part[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) part[j] += a[i + j] * b[i + j];
  float s = 0.f;
  for (; i < n; ++i) s += a[i] * b[i];
  for (int j = 0; j < 8; ++j) s += part[j];
  return s;
}

std::vector<int64_t> window_starts(int64_t length, int64_t kernel) {
  std::vector<int64_t> s(static_cast<size_t>(length));
  for (int64_t i = 0; i < length; ++i) s[i] = ops::neighborhood_window_start(i, length, kernel);
  return s;
}

}  // namespace

Tensor neighborhood_attention_3d(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                                 const std::array<int64_t, 3>& kernel, float scale,
                                 const ops::QueryColumns& cols) {
  // Rows along the head dim must be unit-stride; other strides are used as they are.
  const Tensor q = q_in.stride(5) == 1 ? q_in : q_in.contiguous();
  const Tensor k = k_in.stride(5) == 1 ? k_in : k_in.contiguous();
  const Tensor v = v_in.stride(5) == 1 ? v_in : v_in.contiguous();
  const int64_t batch = q.size(0), t_len = q.size(1), h_len = q.size(2), w_len = q.size(3);
  const int64_t heads = q.size(4), d = q.size(5), dv = v.size(5);
  const int64_t w0 = cols.begin, w_out = cols.count < 0 ? w_len - w0 : cols.count;
  Tensor out = Tensor::empty({batch, t_len, h_len, w_out, heads, dv});
  if (out.numel() == 0) return out;

  const int64_t kt = std::min(kernel[0], t_len), kh = std::min(kernel[1], h_len),
                kw = std::min(kernel[2], w_len);
  const std::vector<int64_t> st = window_starts(t_len, kt), sh = window_starts(h_len, kh),
                             sw = window_starts(w_len, kw);
  const float* qb = q.data<float>();
  const float* kb = k.data<float>();
  const float* vb = v.data<float>();
  float* ob = out.data<float>();
  const int64_t nk = kt * kh * kw;

  // Element strides, hoisted out of the loops.
  const int64_t qs[5] = {q.stride(0), q.stride(1), q.stride(2), q.stride(3), q.stride(4)};
  const int64_t ks[5] = {k.stride(0), k.stride(1), k.stride(2), k.stride(3), k.stride(4)};
  const int64_t vs[5] = {v.stride(0), v.stride(1), v.stride(2), v.stride(3), v.stride(4)};

  // One task = one (b, t, h, head) row of queries along W.
  const int64_t tasks = batch * t_len * h_len * heads;
  parallel_for(0, tasks, 1, [&](int64_t t0, int64_t t1) {
    std::vector<float> s(static_cast<size_t>(nk));
    std::vector<float> acc(static_cast<size_t>(dv));
    for (int64_t task = t0; task < t1; ++task) {
      int64_t rest = task;
      const int64_t hd = rest % heads;
      rest /= heads;
      const int64_t hi = rest % h_len;
      rest /= h_len;
      const int64_t ti = rest % t_len;
      const int64_t b = rest / t_len;
      const float* q_row = qb + b * qs[0] + ti * qs[1] + hi * qs[2] + hd * qs[4];
      // The (t, h) part of the window is the same for the whole row.
      const float* k_row = kb + b * ks[0] + st[ti] * ks[1] + sh[hi] * ks[2] + hd * ks[4];
      const float* v_row = vb + b * vs[0] + st[ti] * vs[1] + sh[hi] * vs[2] + hd * vs[4];
      for (int64_t wi = w0; wi < w0 + w_out; ++wi) {
        const float* qp = q_row + wi * qs[3];
        // Scores over the window, t outermost, w innermost (the key order of the reference).
        int64_t n = 0;
        float mx = -INFINITY;
        for (int64_t a = 0; a < kt; ++a)
          for (int64_t c = 0; c < kh; ++c) {
            const float* kp = k_row + a * ks[1] + c * ks[2] + sw[wi] * ks[3];
            for (int64_t e = 0; e < kw; ++e, ++n) {
              s[n] = dot(qp, kp + e * ks[3], d) * scale;
              mx = std::max(mx, s[n]);
            }
          }
        float sum = 0.f;
        for (int64_t j = 0; j < nk; ++j) {
          s[j] = std::exp(s[j] - mx);
          sum += s[j];
        }
        std::fill(acc.begin(), acc.end(), 0.f);
        n = 0;
        for (int64_t a = 0; a < kt; ++a)
          for (int64_t c = 0; c < kh; ++c) {
            const float* vp = v_row + a * vs[1] + c * vs[2] + sw[wi] * vs[3];
            for (int64_t e = 0; e < kw; ++e, ++n) {
              const float p = s[n];
              const float* row = vp + e * vs[3];
              for (int64_t j = 0; j < dv; ++j) acc[j] += p * row[j];
            }
          }
        const float inv = 1.f / sum;
        float* op = ob + ((((b * t_len + ti) * h_len + hi) * w_out + (wi - w0)) * heads + hd) * dv;
        for (int64_t j = 0; j < dv; ++j) op[j] = acc[j] * inv;
      }
    }
  });
  return out;
}

}  // namespace ltx::cpu
