#include "media/primaries.h"

#include "core/error.h"

namespace ltx::media {
namespace {

// ACEScg (AP1, D60-adapted) linear -> linear Rec.709 (D65).
constexpr Matrix3 kAcescgToRec709 = {{{1.70505000f, -0.62179000f, -0.08326000f},
                                      {-0.13026000f, 1.14080000f, -0.01055000f},
                                      {-0.02400000f, -0.12897000f, 1.15297000f}}};
// Rec.709 (D65) -> Rec.2020 (D65), ITU-R BT.2087.
constexpr Matrix3 kRec709To2020 = {{{0.62740389f, 0.32928304f, 0.04331307f},
                                    {0.06909729f, 0.91954040f, 0.01136232f},
                                    {0.01639144f, 0.08801331f, 0.89559525f}}};
// ACEScg (AP1, D60) -> Rec.2020 (D65), Bradford adaptation.
constexpr Matrix3 kAcescgTo2020 = {{{1.02582475f, -0.02005319f, -0.00577156f},
                                    {-0.00223437f, 1.00458650f, -0.00235213f},
                                    {-0.00501335f, -0.02529007f, 1.03030342f}}};

// The reference inverts the f32 ACEScg -> Rec.709 matrix in f64 and rounds the result to f32.
Matrix3 rec709_to_acescg() {
  double m[3][3];
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 3; ++c) m[r][c] = static_cast<double>(kAcescgToRec709[r][c]);
  const double det = m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1]) -
                     m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0]) +
                     m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0]);
  Matrix3 out{};
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 3; ++c) {
      // inverse[r][c] = cofactor[c][r] / det
      const int r0 = (c + 1) % 3, r1 = (c + 2) % 3, c0 = (r + 1) % 3, c1 = (r + 2) % 3;
      out[r][c] = static_cast<float>((m[r0][c0] * m[r1][c1] - m[r0][c1] * m[r1][c0]) / det);
    }
  return out;
}

constexpr Matrix3 kIdentity = {{{1.f, 0.f, 0.f}, {0.f, 1.f, 0.f}, {0.f, 0.f, 1.f}}};

}  // namespace

std::string primaries_name(Primaries p) { return p == Primaries::Rec709 ? "rec709" : "acescg"; }

Matrix3 primaries_matrix(Primaries from, Primaries to) {
  if (from == to) return kIdentity;
  if (from == Primaries::ACEScg) return kAcescgToRec709;
  static const Matrix3 to_acescg = rec709_to_acescg();
  return to_acescg;
}

Matrix3 primaries_to_rec2020(Primaries from) {
  return from == Primaries::Rec709 ? kRec709To2020 : kAcescgTo2020;
}

}  // namespace ltx::media
