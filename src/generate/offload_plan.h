#pragma once
// Which of a generation's block models stay resident on the GPU and which stream, under a GPU
// memory budget (`--offload auto`, the default with --max-gpu-memory on CUDA). A pure function of
// the models' sizes (from the files' headers), the budget and the run's shape, so it is planned
// before anything loads and tested without a GPU (tests/generate/offload_plan_test.cpp).
//
// The stages run one after another and free their models (text encoding: Gemma; denoising: the
// transformer; decoding: the decoders), so each model is planned against the budget with what its
// own stage holds beside it:
//   need(K) = fixed + K * block + (K < blocks ? slots * block : 0) + companions + activations
// where fixed is the weights outside the repeated blocks, block the largest block, K the blocks
// kept resident (the first K; the rest stream through `slots` device slots). Auto takes K = all
// when that fits, else the largest K that fits, else refuses the run up front naming the stage,
// its need, the budget and the flags that help. Explicit --offload cpu|disk (K = 0) and none (K =
// all) are kept as given, with the same up-front error when they cannot fit.
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "generate/memory_budget.h"
#include "generate/model_paths.h"
#include "generate/placement.h"
#include "models/block_streaming.h"

namespace ltx::generate {

// One model that streams its repeated blocks, and what its stage needs beside its weights.
struct StreamableModel {
  std::string component;         // "transformer", "text encoder"
  std::string stage;             // "denoising", "text encoding"
  int64_t fixed_bytes = 0;       // weights outside the blocks (always resident)
  int64_t block_bytes = 0;       // the largest block's weights
  int64_t blocks = 0;
  int64_t companion_bytes = 0;   // other models resident during the stage
  int64_t activation_bytes = 0;  // the stage's activation peak (estimate_*_activations)
};

struct ModelOffload {
  std::string component;
  int64_t blocks = 0;
  int64_t resident_blocks = 0;  // == blocks: resident (no streaming)
  int64_t need_bytes = 0;       // need(resident_blocks) as above
  bool streams() const { return resident_blocks < blocks; }
};

// The plan of `models` under `budget_bytes` (> 0) for `offload` (Auto, None, Cpu or Disk) with
// `slots` device slots. Throws ltx::Error (one line, nothing loaded yet) when a model cannot fit
// even as `offload` allows; `budget_flag` names the budget in it.
std::vector<ModelOffload> plan_offload(const std::vector<StreamableModel>& models,
                                       int64_t budget_bytes, Offload offload,
                                       int64_t slots = kOffloadSlots,
                                       const std::string& budget_flag = "--max-gpu-memory");

// The block streaming of one planned model (`offload` Disk reads from the files).
models::BlockStreaming planned_streaming(const ModelOffload& plan, Offload offload,
                                         int64_t slots = kOffloadSlots);

// "transformer: 20 of 48 blocks resident, 28 streamed (needs 15.10 GiB of the 16.00 GiB budget)"
std::string describe_offload(const ModelOffload& plan, int64_t budget_bytes);

// --- the activation model (DEVELOPERS.md "GPU memory budget"): conservative per-token bytes.

// The transformer's peak beyond its weights for one forward over `token_rows` rows (tokens times
// the batch of guidance passes) of width `inner_dim` (video) plus `audio_rows` of `audio_dim`, in
// `dtype_bytes`-byte activations: kTransformerLiveRows live [rows, dim] tensors (inside a block
// at the feed-forward: the 4x hidden and its GELU output are 8, x, its norm, the residual and the
// gated sum 4) plus a margin of one half for the allocator's rounding, the attention workspace and
// the latents, and a fixed kStageSlack.
inline constexpr int64_t kTransformerLiveRows = 12;
inline constexpr int64_t kStageSlack = int64_t{1} << 30;
int64_t estimate_transformer_activations(int64_t token_rows, int64_t inner_dim, int64_t audio_rows,
                                         int64_t audio_dim, int64_t dtype_bytes);
// Gemma's peak for `tokens` prompt tokens of width `hidden` (intermediate `ffn`) and `heads`
// attention heads: the layer's live tensors, the masked attention's [heads, tokens, tokens]
// scores in f32, and kStageSlack; the same margin of one half.
int64_t estimate_text_activations(int64_t tokens, int64_t hidden, int64_t ffn, int64_t heads,
                                  int64_t dtype_bytes);

// The transformer's video token rows of a run: latent frames (frames - 1) / 8 + 1 times
// (height / 32) * (width / 32), times `passes` (the batch of guidance passes of one forward).
int64_t video_token_rows(int64_t width, int64_t height, int64_t frames, int64_t passes);

}  // namespace ltx::generate

namespace ltx::generate {

// --- from the files to the plan (reads the safetensors headers; loads nothing).

// A block model's weights as they load: `fixed_bytes` outside the blocks, the largest block and
// the block count. Tensors are counted at `dtype` (floating ones converted), the transformer's
// fp8-cast Linears at one byte and NVFP4 layers at their packed size (`quantization`).
struct BlockModelSizes {
  int64_t fixed_bytes = 0, block_bytes = 0, blocks = 0;
};
// The transformer of `path` (single-file layout: under "model.diffusion_model.").
BlockModelSizes transformer_sizes(const std::string& path, DType dtype,
                                  quantization::Mode quantization);
// The Gemma text model of `path` (a file or a folder of .safetensors; the vision tower and the
// multimodal projector, which the text model does not load, left out; in bf16 its FP8 Linear
// weights at a byte, as the load keeps them).
BlockModelSizes text_encoder_sizes(const std::string& path, DType dtype);

// Gemma 3's vision tower and multi-modal projector of `path` at `dtype` (what image-aware
// prompt enhancement loads beside the text model; 0 when the files have none).
int64_t vision_tower_bytes(const std::string& path, DType dtype);

// What the text encoding stage loads beside Gemma: the video / audio text connectors and the
// feature extractor's projection of paths.embeddings_weight_paths, at `dtype`.
int64_t text_connector_bytes(const ModelPaths& paths, DType dtype);

// What one run streams: each model's BlockStreaming, planned.
struct StreamingPlan {
  models::BlockStreaming transformer, text_encoder;
  std::vector<ModelOffload> models;  // what was planned (empty when nothing was)
};

// The run's shape, as the activation model reads it.
struct RunShape {
  int64_t width = 0, height = 0, frames = 0;
  int64_t passes = 1;          // guidance passes batched in one transformer call
  int64_t prompt_tokens = 1024;  // the text encoder's longest input
  bool vision_tower = false;     // the text stage also loads Gemma 3's vision tower
};

// Plans the transformer and the text encoder of `paths` for `offload` under `budget_bytes` on
// `device` (a GPU; on the CPU nothing streams and nothing is checked here) and logs one line per
// model. Throws as plan_offload.
StreamingPlan plan_streaming(const ModelPaths& paths, DType dtype, const RunShape& shape,
                             Offload offload, int64_t budget_bytes, Device device,
                             const std::string& budget_flag = "--max-gpu-memory");

struct GenerateOptions;
struct ResolvedModels;
// The plan of a generation (generate.cpp, the run's own call): under --max-gpu-memory (or the
// device's memory with --offload auto) on a GPU, plan_streaming with the run's shape (the widest
// transformer call: a guided one-stage run batches up to 4 guidance passes at full size, the
// two-stage pipelines theirs at half size, a quarter of the tokens); else --offload as given.
// `jobs`: the requests batched in one denoising run.
StreamingPlan plan_run_streaming(const GenerateOptions& options, const ResolvedModels& models,
                                 int64_t jobs = 1);

// `components` less the ones plan_streaming checks with the run's shape on `device` (a GPU: the
// transformer and the text encoder), for check_budget_fits.
std::vector<ComponentSize> unplanned_components(std::vector<ComponentSize> components,
                                                Device device);

}  // namespace ltx::generate
