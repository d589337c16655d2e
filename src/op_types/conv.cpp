#include "op_types/conv.h"

namespace ltx::ops {

ConvGeometry conv_geometry(const Tensor& x, const Tensor& w, const ConvSpec& spec, bool transposed) {
  ConvGeometry g;
  const int R = spec.rank;
  g.N = x.size(0);
  g.C = x.size(1);
  g.G = spec.groups;
  g.Cg = g.C / g.G;
  g.Og = transposed ? w.size(1) : w.size(0) / g.G;
  g.O = g.Og * g.G;
  for (int a = 0; a < 3; ++a) {
    const int i = a - (3 - R);
    if (i < 0) {
      g.in[a] = g.out[a] = g.k[a] = g.s[a] = g.d[a] = 1;
      g.p[a] = 0;
      continue;
    }
    g.in[a] = x.size(2 + i);
    g.k[a] = w.size(2 + i);
    g.s[a] = spec.stride[i];
    g.p[a] = spec.padding[i];
    g.d[a] = spec.dilation[i];
    g.out[a] = transposed ? (g.in[a] - 1) * g.s[a] - 2 * g.p[a] + g.d[a] * (g.k[a] - 1) +
                                spec.output_padding[i] + 1
                          : (g.in[a] + 2 * g.p[a] - g.d[a] * (g.k[a] - 1) - 1) / g.s[a] + 1;
    g.K *= g.k[a];
    g.Pin *= g.in[a];
    g.Pout *= g.out[a];
  }
  return g;
}

Shape conv_output_shape(const ConvGeometry& g, int rank) {
  Shape s = {g.N, g.O};
  for (int a = 3 - rank; a < 3; ++a) s.push_back(g.out[a]);
  return s;
}

}  // namespace ltx::ops
