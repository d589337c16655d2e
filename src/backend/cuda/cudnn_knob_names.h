#pragma once
// Names of cuDNN's backend knob types, indexed by cudnnBackendKnobType_t value (the cuDNN 9.19
// header's order), for reports: conv_cudnn.cpp's LTX_CUDNN_STATS lines and the standalone
// tools/bench/cudnn_conv_engines_probe.cpp, which includes this header (so it uses nothing else
// of ltx). Null for a value past the table.
#include <cstdint>

namespace ltx::cuda {

inline const char* cudnn_knob_name(int64_t type) {
  static const char* const names[] = {
      "SPLIT_K",     "SWIZZLE",     "TILE_SIZE",     "USE_TEX",     "EDGE",        "KBLOCK",
      "LDGA",        "LDGB",        "CHUNK_K",       "SPLIT_H",     "WINO_TILE",   "MULTIPLY",
      "SPLIT_K_BUF", "TILEK",       "STAGES",        "REDUCTION",   "CTA_SPLIT_K", "SPLIT_K_SLC",
      "IDX_MODE",    "SLICED",      "SPLIT_RS",      "SINGLEBUF",   "LDGC",        "SPECFILT",
      "KERNEL_CFG",  "WORKSPACE",   "TILE_CGA",      "TILE_CGA_M",  "TILE_CGA_N",  "BLOCK_SIZE",
      "OCCUPANCY",   "ARR_PER_THR", "NUM_C_PER_BLK", "SPLIT_COLS",  "TILE_ROWS",   "TILE_COLS",
      "LOAD_SIZE",   "CTA_COUNT",   "STREAM_K",      "SPLIT_P_SLC", "TILE_M",      "TILE_N",
      "WARP_SPEC",   "SWAP_AB"};
  constexpr int64_t n = sizeof(names) / sizeof(names[0]);
  return type >= 0 && type < n ? names[type] : nullptr;
}

}  // namespace ltx::cuda
