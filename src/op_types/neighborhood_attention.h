#pragma once
// The 3-D neighborhood attention's vocabulary (ops/neighborhood_attention.h has the op and its
// window rule in full), shared by the dispatch layer and both backends.
#include <cstdint>

namespace ltx::ops {

// The query columns (W positions) [begin, begin + count) to compute (count -1: to the end). The
// output then holds only those, [B, T, H, count, NH, Dv]; the keys and every window are still
// those of the whole volume. (The diffusion decoder's W-chunked attention keeps only each slab's
// core columns.)
struct QueryColumns {
  int64_t begin = 0;
  int64_t count = -1;
};

// The window start of position i along an axis of length `length` with kernel `kernel`:
// clamp(i - kernel / 2, 0, length - kernel), 0 when kernel >= length (the window is shifted inward
// at the borders, never truncated).
int64_t neighborhood_window_start(int64_t i, int64_t length, int64_t kernel);

}  // namespace ltx::ops
