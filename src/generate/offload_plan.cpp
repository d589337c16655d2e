#include "generate/offload_plan.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "core/error.h"
#include "core/log.h"
#include "generate/memory_budget.h"
#include "io/checkpoint.h"
#include "io/gguf.h"
#include "io/safetensors.h"
#include "io/weights.h"
#include "models/text/gemma/model.h"
#include "quantization/fp8_blockwise.h"
#include "quantization/fp8_cast.h"
#include "quantization/nvfp4.h"

namespace ltx::generate {

namespace {

int64_t need_bytes(const StreamableModel& m, int64_t resident, int64_t slots) {
  const int64_t ring = resident < m.blocks ? std::min(slots, m.blocks - resident) : 0;
  return m.fixed_bytes + (resident + ring) * m.block_bytes + m.companion_bytes +
         m.activation_bytes;
}

// What helps a stage that cannot fit under the budget, from what this run already uses.
std::string what_helps(Offload offload, const std::string& budget_flag) {
  std::string s = "what helps: ";
  if (offload == Offload::None) s += "--offload auto or cpu (streams the blocks), ";
  return s + "--quantization fp8-cast (halves the transformer's blocks), a smaller --width / "
             "--height / --num-frames, or a larger " + budget_flag + " (when the device has it)";
}

}  // namespace

std::vector<ModelOffload> plan_offload(const std::vector<StreamableModel>& models,
                                       int64_t budget_bytes, Offload offload, int64_t slots,
                                       const std::string& budget_flag) {
  LTX_CHECK(budget_bytes > 0, "plan_offload: the budget must be > 0 bytes, got ", budget_bytes);
  LTX_CHECK(slots >= 1, "plan_offload: streaming needs at least one slot, got ", slots);
  std::vector<ModelOffload> out;
  for (const StreamableModel& m : models) {
    LTX_CHECK(m.blocks >= 0 && m.block_bytes >= 0 && m.fixed_bytes >= 0,
              "plan_offload: negative sizes for the ", m.component);
    ModelOffload p{m.component, m.blocks, m.blocks, need_bytes(m, m.blocks, slots)};
    const int64_t streamed_need = need_bytes(m, 0, slots);
    if (offload == Offload::Cpu || offload == Offload::Disk) {
      p.resident_blocks = 0;
      p.need_bytes = streamed_need;
    } else if (offload == Offload::Auto && p.need_bytes > budget_bytes &&
               streamed_need <= budget_bytes) {
      // need(K) grows with K: the largest K under the budget.
      int64_t k = 0;
      while (k + 1 < m.blocks && need_bytes(m, k + 1, slots) <= budget_bytes) ++k;
      p.resident_blocks = k;
      p.need_bytes = need_bytes(m, k, slots);
    } else if (offload == Offload::Auto && p.need_bytes > budget_bytes) {
      p.resident_blocks = 0;
      p.need_bytes = streamed_need;
    }
    if (p.need_bytes > budget_bytes) {
      const bool streamed = p.streams();
      throw Error(str(
          "the ", m.stage, " stage needs ", gib_text(p.need_bytes), " of GPU memory with the ",
          m.component, streamed ? str("'s ", m.blocks, " blocks all streamed (")
                                : std::string(" resident ("),
          gib_text(m.fixed_bytes + (streamed ? std::min(slots, m.blocks) : m.blocks) * m.block_bytes),
          " of weights",
          m.companion_bytes > 0 ? str(", ", gib_text(m.companion_bytes), " of other models")
                                : std::string(),
          ", ", gib_text(m.activation_bytes), " of activations), more than the ", budget_flag,
          " budget of ", gib_text(budget_bytes), "; nothing was loaded; ",
          what_helps(offload, budget_flag)));
    }
    out.push_back(p);
  }
  return out;
}

models::BlockStreaming planned_streaming(const ModelOffload& plan, Offload offload,
                                         int64_t slots) {
  if (!plan.streams()) return {};
  return {slots, offload == Offload::Disk, plan.resident_blocks};
}

std::string describe_offload(const ModelOffload& plan, int64_t budget_bytes) {
  const std::string need =
      str("needs ", gib_text(plan.need_bytes), " of the ", gib_text(budget_bytes), " budget");
  if (!plan.streams()) return str(plan.component, ": resident, ", plan.blocks, " blocks (", need, ")");
  return str(plan.component, ": ", plan.resident_blocks, " of ", plan.blocks,
             " blocks resident, ", plan.blocks - plan.resident_blocks, " streamed (", need, ")");
}

int64_t estimate_transformer_activations(int64_t token_rows, int64_t inner_dim, int64_t audio_rows,
                                         int64_t audio_dim, int64_t dtype_bytes) {
  const int64_t live = kTransformerLiveRows * dtype_bytes *
                       (token_rows * inner_dim + audio_rows * audio_dim);
  return live + live / 2 + kStageSlack;
}

int64_t estimate_text_activations(int64_t tokens, int64_t hidden, int64_t ffn, int64_t heads,
                                  int64_t dtype_bytes) {
  // The layer: x, its norm, q/k/v/attention output (~6 hidden) and the gated MLP's gate, up and
  // product (3 ffn); the masked attention's scores in f32.
  const int64_t live = dtype_bytes * tokens * (6 * hidden + 3 * ffn) + 4 * heads * tokens * tokens;
  return live + live / 2 + kStageSlack;
}

namespace {

namespace fs = std::filesystem;

// The bytes a tensor takes once loaded: floating tensors at `dtype` (one byte for the fp8-cast
// Linears' parameters, `fp8`), others as stored; NVFP4 layers are sized by
// quantization::nvfp4_loaded_bytes.
int64_t loaded_bytes(const io::TensorInfo& info, DType dtype, bool fp8) {
  if (!dtype_is_floating(info.dtype)) return static_cast<int64_t>(info.nbytes());
  return info.numel() * (fp8 ? 1 : static_cast<int64_t>(dtype_size(dtype)));
}

// "<digits>." at `pos` of `name` -> the number; -1 otherwise.
int64_t index_at(const std::string& name, size_t pos) {
  size_t k = pos;
  int64_t i = 0;
  while (k < name.size() && std::isdigit(static_cast<unsigned char>(name[k])))
    i = i * 10 + (name[k++] - '0');
  return k > pos && k < name.size() && name[k] == '.' ? i : -1;
}

struct SizeAccumulator {
  int64_t fixed = 0;
  std::map<int64_t, int64_t> blocks;
  void add(int64_t block, int64_t bytes) {
    if (block < 0)
      fixed += bytes;
    else
      blocks[block] += bytes;
  }
  BlockModelSizes sizes() const {
    BlockModelSizes s{fixed, 0, static_cast<int64_t>(blocks.size())};
    for (const auto& [i, b] : blocks) s.block_bytes = std::max(s.block_bytes, b);
    return s;
  }
};

std::vector<std::string> safetensors_files(const std::string& path) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return {path};
  std::vector<std::string> out;
  if (fs::is_directory(path, ec))
    for (const fs::directory_entry& e : fs::directory_iterator(path, ec))
      if (e.is_regular_file(ec) && e.path().extension() == ".safetensors")
        out.push_back(e.path().string());
  return out;
}

}  // namespace

BlockModelSizes transformer_sizes(const std::string& path, DType dtype,
                                  quantization::Mode quantization) {
  if (io::is_gguf_file(path)) {
    // GGML blocks as stored, dense tensors at `dtype`; bare names (the community files).
    SizeAccumulator acc;
    constexpr std::string_view kSingle = "model.diffusion_model.", kBlocks = "transformer_blocks.";
    for (const io::StoredTensorInfo& t : io::stored_tensor_infos(path)) {
      const std::string name = t.name.starts_with(kSingle) ? t.name.substr(kSingle.size()) : t.name;
      if (name.find("embeddings_connector.") != std::string::npos) continue;
      const int64_t block = name.starts_with(kBlocks) ? index_at(name, kBlocks.size()) : -1;
      acc.add(block, t.ggml_blocks || !dtype_is_floating(t.dtype)
                         ? t.nbytes
                         : t.shape.numel() * static_cast<int64_t>(dtype_size(dtype)));
    }
    return acc.sizes();
  }
  const auto file = io::SafetensorsFile::open(path);
  constexpr std::string_view kSingle = "model.diffusion_model.";
  bool single = false;
  for (const io::TensorInfo& info : file->infos()) single = single || info.name.starts_with(kSingle);
  SizeAccumulator acc;
  for (const io::TensorInfo& info : file->infos()) {
    if (single && !info.name.starts_with(kSingle)) continue;
    const std::string name = single ? info.name.substr(kSingle.size()) : info.name;
    // The text connectors share the prefix; the transformer does not load them.
    if (name.find("embeddings_connector.") != std::string::npos) continue;
    const bool fp8 = (quantization == quantization::Mode::Fp8Cast &&
                      quantization::is_fp8_cast_parameter(name)) ||
                     (quantization == quantization::Mode::Fp8Blockwise && name.ends_with(".weight") &&
                      quantization::is_fp8_blockwise_linear(
                          name.substr(0, name.size() - std::string_view(".weight").size())));
    constexpr std::string_view kBlocks = "transformer_blocks.";
    const int64_t block = name.starts_with(kBlocks) ? index_at(name, kBlocks.size()) : -1;
    const std::optional<int64_t> nvfp4 =
        quantization::nvfp4_loaded_bytes(*file, info, name, quantization);
    acc.add(block, nvfp4 ? *nvfp4 : loaded_bytes(info, dtype, fp8));
  }
  return acc.sizes();
}

BlockModelSizes text_encoder_sizes(const std::string& path, DType dtype) {
  SizeAccumulator acc;
  if (io::is_gguf_file(path)) {
    // llama.cpp's Gemma 3 GGUF: layers under "blk.<i>.", GGML blocks as stored.
    constexpr std::string_view kBlocks = "blk.";
    for (const io::StoredTensorInfo& t : io::stored_tensor_infos(path)) {
      const int64_t block = t.name.starts_with(kBlocks) ? index_at(t.name, kBlocks.size()) : -1;
      acc.add(block, t.ggml_blocks || !dtype_is_floating(t.dtype)
                         ? t.nbytes
                         : t.shape.numel() * static_cast<int64_t>(dtype_size(dtype)));
    }
    return acc.sizes();
  }
  for (const std::string& f : safetensors_files(path)) {
    const auto file = io::SafetensorsFile::open(f);
    for (const io::TensorInfo& info : file->infos()) {
      const std::string& n = info.name;
      if (n.find("vision_tower") != std::string::npos ||
          n.find("multi_modal_projector") != std::string::npos)
        continue;
      // "layers.<i>." at the start or after "model." / "language_model." (the HF layouts).
      int64_t block = -1;
      for (size_t pos = n.find("layers."); pos != std::string::npos && block < 0;
           pos = n.find("layers.", pos + 1))
        if (pos == 0 || n[pos - 1] == '.') block = index_at(n, pos + 7);
      // A bf16 load keeps the Linears' FP8 weights as stored (text::GemmaTextModel).
      acc.add(block,
              loaded_bytes(info, dtype, text::gemma_keeps_stored_weight(n, info.dtype, dtype)));
    }
  }
  return acc.sizes();
}

int64_t vision_tower_bytes(const std::string& path, DType dtype) {
  int64_t bytes = 0;
  if (io::is_gguf_file(path)) return 0;  // a llama.cpp GGUF holds no vision tower
  for (const std::string& f : safetensors_files(path)) {
    const auto file = io::SafetensorsFile::open(f);
    for (const io::TensorInfo& info : file->infos())
      if (info.name.starts_with("vision_tower.") || info.name.starts_with("multi_modal_projector."))
        bytes += loaded_bytes(info, dtype, false);
  }
  return bytes;
}

int64_t text_connector_bytes(const ModelPaths& paths, DType dtype) {
  std::set<std::string> files(paths.embeddings_weight_paths.begin(),
                              paths.embeddings_weight_paths.end());
  // A single-file text encoder's own projection is already among text_encoder_sizes' tensors.
  files.erase(paths.text_encoder.path);
  int64_t bytes = 0;
  for (const std::string& f : files) {
    const io::CheckpointSummary s = io::inspect_checkpoint(f);
    for (const char* id : {"video_connector", "audio_connector", "text_projection"})
      if (const io::ComponentSummary* c = s.component(id))
        bytes += c->params * static_cast<int64_t>(dtype_size(dtype));
  }
  return bytes;
}

StreamingPlan plan_streaming(const ModelPaths& paths, DType dtype, const RunShape& shape,
                             Offload offload, int64_t budget_bytes, Device device,
                             const std::string& budget_flag) {
  StreamingPlan plan;
  if (device.is_cpu()) return plan;
  const int64_t dtype_bytes = static_cast<int64_t>(dtype_size(dtype));
  std::vector<StreamableModel> models;
  // The activations' widths from the headers: the patchify projections' and Gemma's first layer.
  if (paths.transformer.given()) {
    const BlockModelSizes t = transformer_sizes(paths.transformer.path, dtype, paths.quantization);
    int64_t video_dim = 0, audio_dim = 0;
    for (const io::StoredTensorInfo& info : io::stored_tensor_infos(paths.transformer.path)) {
      if (info.shape.size() != 2) continue;
      if (info.name.ends_with("audio_patchify_proj.weight"))
        audio_dim = info.shape[0];
      else if (info.name.ends_with("patchify_proj.weight"))
        video_dim = info.shape[0];
    }
    // Audio: 25 latent rows a second at the slowest frame rate the pipelines take (8 fps).
    const int64_t audio_rows = (shape.frames / 8 + 1) * 25 * std::max<int64_t>(shape.passes, 1);
    StreamableModel m{"transformer", "denoising", t.fixed_bytes, t.block_bytes, t.blocks};
    for (const ComponentSize& c : component_sizes(paths, dtype))
      if (c.component == "video encoder" || c.component == "spatial upsampler" ||
          c.component == "temporal upsampler")
        m.companion_bytes += c.bytes;
    m.activation_bytes = estimate_transformer_activations(
        video_token_rows(shape.width, shape.height, shape.frames, shape.passes), video_dim,
        audio_rows, audio_dim, dtype_bytes);
    models.push_back(m);
  }
  if (paths.text_encoder.given()) {
    const BlockModelSizes g = text_encoder_sizes(paths.text_encoder.path, dtype);
    int64_t hidden = 0, ffn = 0, q_rows = 0;
    for (const std::string& f : safetensors_files(paths.text_encoder.path)) {
      const auto file = io::SafetensorsFile::open(f);
      for (const io::TensorInfo& info : file->infos()) {
        if (info.shape.size() != 2 || info.name.find("vision_tower") != std::string::npos) continue;
        if (info.name.ends_with("layers.0.mlp.gate_proj.weight")) {
          ffn = info.shape[0];
          hidden = info.shape[1];
        } else if (info.name.ends_with("layers.0.self_attn.q_proj.weight")) {
          q_rows = info.shape[0];
        }
      }
    }
    // Heads of at least 128 wide: as many heads as that allows (Gemma 3's are 256).
    StreamableModel m{"text encoder", "text encoding", g.fixed_bytes, g.block_bytes, g.blocks};
    // The connectors and the feature extractor's projection load beside Gemma in this stage.
    m.companion_bytes = text_connector_bytes(paths, dtype);
    if (shape.vision_tower) m.companion_bytes += vision_tower_bytes(paths.text_encoder.path, dtype);
    m.activation_bytes = estimate_text_activations(shape.prompt_tokens, hidden, ffn,
                                                   std::max<int64_t>(q_rows / 128, 1), dtype_bytes);
    models.push_back(m);
  }
  for (const ModelOffload& p : plan_offload(models, budget_bytes, offload, kOffloadSlots, budget_flag)) {
    log_info("memory plan (--offload ", offload_name(offload), "): ",
             describe_offload(p, budget_bytes));
    const models::BlockStreaming s = planned_streaming(p, offload);
    (p.component == "transformer" ? plan.transformer : plan.text_encoder) = s;
    plan.models.push_back(p);
  }
  return plan;
}

int64_t video_token_rows(int64_t width, int64_t height, int64_t frames, int64_t passes) {
  const int64_t latent_frames = frames > 0 ? (frames - 1) / 8 + 1 : 1;
  return latent_frames * (height / 32) * (width / 32) * std::max<int64_t>(passes, 1);
}

std::vector<ComponentSize> unplanned_components(std::vector<ComponentSize> components,
                                                Device device) {
  if (device.is_cpu()) return components;
  std::erase_if(components, [](const ComponentSize& c) {
    return c.component == "transformer" || c.component == "text encoder";
  });
  return components;
}

}  // namespace ltx::generate
