#include "quantization/checkpoint_export.h"

#include <sys/statvfs.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/ggml_type.h"
#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "io/safetensors.h"
#include "ops/quantized_linear.h"
#include "quantization/fp8_cast.h"
#include "quantization/ggml_dequant.h"
#include "quantization/ggml_quant.h"
#include "quantization/gguf_policy.h"

namespace ltx::quantization {

namespace {

namespace fs = std::filesystem;

constexpr uint32_t kGgmlQuantVersion = 2;  // general.quantization_version of current ggml files

// "12.3 GB" (decimal units, as `ltx pull` and the hub show sizes).
std::string size_text(uint64_t bytes) {
  const char* units[] = {"B", "kB", "MB", "GB", "TB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  for (; v >= 1000.0 && u < 4; ++u) v /= 1000.0;
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

// One tensor of the inputs.
struct Source {
  const io::SafetensorsFile* st = nullptr;
  const io::GgufFile* gg = nullptr;
  std::string file;
  std::string name;          // as stored
  Shape shape;               // logical (PyTorch) shape
  Shape stored_shape;        // GGUF: the stored sizes (PyTorch order); else == shape
  std::optional<GgmlType> type;  // storage as a GGML type (nullopt: F8_E4M3, BOOL, U8, ...)
  std::optional<DType> dtype;    // dense element type (nullopt: GGUF blocks)
  uint64_t nbytes = 0;

  std::string what() const { return "tensor '" + name + "' of '" + file + "'"; }
  bool is_float() const {
    if (!type) return false;
    return *type == GgmlType::F32 || *type == GgmlType::F16 || *type == GgmlType::BF16 ||
           ggml_is_quantized(*type);
  }
  const uint8_t* bytes() const { return st ? st->tensor_bytes(name) : gg->tensor_bytes(name); }
  // A dense tensor, viewing the mapping.
  Tensor dense() const { return st ? st->tensor(name) : gg->tensor(name); }
  // Every value in f32 (row-major, logical order), dequantised for GGUF blocks.
  Tensor f32() const {
    if (gg && type && ggml_is_quantized(*type)) {
      check_ggml_dequantizable(*type, what());
      return dequantize(gg->ggml_tensor(name), DType::F32);
    }
    return dense().to(DType::F32).contiguous();
  }
};

// The input files, opened and validated, their tensors in file order and their string metadata.
struct Inputs {
  std::vector<std::shared_ptr<const io::SafetensorsFile>> st;
  std::vector<std::shared_ptr<const io::GgufFile>> gg;
  std::vector<Source> tensors;
  std::map<std::string, std::string> metadata;  // first file wins
  uint64_t bytes = 0;
  bool any_gguf = false;
  bool any_safetensors = false;
};

Inputs open_inputs(const std::vector<std::string>& paths) {
  LTX_CHECK(!paths.empty(), "no input file given");
  Inputs in;
  std::map<std::string, std::string> owner;  // tensor name -> file
  for (const std::string& path : paths) {
    LTX_CHECK(fs::is_regular_file(path), "cannot read input '", path,
              "': no such file (or not a regular file)");
    in.bytes += fs::file_size(path);
    auto add = [&](Source s) {
      auto [it, fresh] = owner.emplace(s.name, path);
      LTX_CHECK(fresh, "tensor '", s.name, "' is in both '", it->second, "' and '", path,
                "'; the inputs must be one checkpoint split over files");
      in.tensors.push_back(std::move(s));
    };
    if (io::is_gguf_file(path)) {
      in.any_gguf = true;
      in.gg.push_back(io::GgufFile::open(path));
      const io::GgufFile& f = *in.gg.back();
      for (const io::GgufTensorInfo& ti : f.infos()) {
        Source s;
        s.gg = &f;
        s.file = path;
        s.name = ti.name;
        s.shape = ti.shape;
        for (auto it = ti.ne.rbegin(); it != ti.ne.rend(); ++it) s.stored_shape.push_back(*it);
        s.type = ti.type;
        s.dtype = ggml_dense_dtype(ti.type);
        s.nbytes = ti.nbytes;
        add(std::move(s));
      }
      for (const auto& [k, v] : f.string_metadata())
        if (!k.starts_with("general.") && !k.starts_with("comfy.gguf."))
          in.metadata.emplace(k, v);
    } else {
      in.any_safetensors = true;
      in.st.push_back(io::SafetensorsFile::open(path));
      const io::SafetensorsFile& f = *in.st.back();
      for (const io::TensorInfo& ti : f.infos()) {
        Source s;
        s.st = &f;
        s.file = path;
        s.name = ti.name;
        s.shape = ti.shape;
        s.stored_shape = ti.shape;
        s.type = ggml_type_of(ti.dtype);
        s.dtype = ti.dtype;
        s.nbytes = ti.nbytes();
        add(std::move(s));
      }
      for (const auto& [k, v] : f.metadata()) in.metadata.emplace(k, v);
    }
  }
  return in;
}

std::string type_label(const Source& s) {
  if (s.type) return ggml_type_name(*s.type);
  return io::safetensors_dtype_name(*s.dtype);
}

// ------------------------------------------------------------------------ output checks

void check_output(const std::string& out, const std::vector<std::string>& inputs, bool overwrite,
                  const char* flag_hint) {
  LTX_CHECK(!out.empty(), "--out is empty");
  const fs::path p(out);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  LTX_CHECK(fs::is_directory(dir), "cannot write '", out, "': the folder '", dir.string(),
            "' does not exist");
  std::error_code ec;
  for (const std::string& in : inputs)
    LTX_CHECK(!fs::equivalent(in, out, ec), "--out '", out, "' is the input '", in,
              "'; write the ", flag_hint, " to another file");
  LTX_CHECK(overwrite || !fs::exists(p), "'", out,
            "' exists; pass --overwrite to replace it (it is replaced only once the new file is "
            "complete)");
}

void check_free_space(const std::string& out, uint64_t bytes) {
  const fs::path p(out);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  struct statvfs st {};
  if (statvfs(dir.c_str(), &st) != 0) return;  // unknown: the write itself will tell
  const uint64_t free_bytes = static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
  LTX_CHECK(free_bytes >= bytes, "not enough disk space for '", out, "': it needs ",
            size_text(bytes), ", '", dir.string(), "' has ",
            size_text(free_bytes), " free");
}

void count(ExportSummary& s, const std::string& type, int64_t params, uint64_t bytes) {
  ExportTypeCount& c = s.types[type];
  ++c.tensors;
  c.params += params;
  c.bytes += bytes;
  ++s.tensors;
  s.params += params;
}

void finish_summary(ExportSummary& s, const std::string& out) {
  s.file_bytes = fs::file_size(out);
  uint64_t bytes = 0;
  for (const auto& [_, c] : s.types) bytes += c.bytes;
  s.bits_per_weight = s.params > 0 ? 8.0 * static_cast<double>(bytes) / static_cast<double>(s.params) : 0;
}

void check_finite(const Tensor& f32, const Source& s) {
  const float* v = f32.data<float>();
  for (int64_t i = 0; i < f32.numel(); ++i)
    LTX_CHECK(std::isfinite(v[i]), s.what(), " holds a non-finite value (", v[i], " at index ", i,
              "); a quantised block of it would be garbage, so it is not quantised");
}

// ------------------------------------------------------------------------ GGUF output

struct GgufPlanEntry {
  const Source* src = nullptr;
  io::GgufTensorSpec spec;
};

bool is_ltx_transformer(const std::vector<std::string>& names) {
  bool blocks = false, adaln = false;
  for (const std::string& n : names) {
    blocks = blocks || n.starts_with("transformer_blocks.");
    adaln = adaln || n.find("adaln_single.") != std::string::npos;
  }
  return blocks && adaln;
}

// The transformer's tensors under their bare names (ComfyUI-GGUF's convert.py keeps the keys
// under "model.diffusion_model." and strips it; a file without that prefix is taken as is).
std::vector<std::pair<std::string, const Source*>> transformer_tensors(const Inputs& in,
                                                                       ExportSummary& s) {
  const std::string prefix = kTransformerPrefix;
  bool prefixed = false;
  for (const Source& t : in.tensors) prefixed = prefixed || t.name.starts_with(prefix);
  std::vector<std::pair<std::string, const Source*>> out;
  std::set<std::string> left;
  for (const Source& t : in.tensors) {
    if (!prefixed) {
      out.emplace_back(t.name, &t);
    } else if (t.name.starts_with(prefix)) {
      out.emplace_back(t.name.substr(prefix.size()), &t);
    } else {
      ++s.left_out;
      left.insert(t.name.substr(0, t.name.find('.')) + ".*");
    }
  }
  std::vector<std::string> names;
  for (const auto& [n, src] : out) {
    // ggml-based loaders hold names in GGML_MAX_NAME (128) bytes; convert.py refuses longer ones.
    LTX_CHECK(n.size() <= 127, src->what(), ": the name '", n, "' is ", n.size(),
              " bytes long; GGUF loaders built on ggml take at most 127");
    names.push_back(n);
  }
  LTX_CHECK(is_ltx_transformer(names), "'", in.tensors.empty() ? "" : in.tensors[0].file,
            "' holds no LTX transformer (no transformer_blocks.* and *adaln_single.* tensors",
            prefixed ? " under model.diffusion_model." : "",
            "); GGUF files are written for the LTX transformer only, as ComfyUI-GGUF's");
  if (s.left_out > 0) {
    std::string list;
    for (const std::string& l : left) list += (list.empty() ? "" : ", ") + l;
    s.notes.push_back(str("left out ", s.left_out, " tensors outside the transformer (", list,
                          "): a community GGUF holds the transformer only; the VAEs, vocoder and "
                          "text projection load from the original file"));
  }
  return out;
}

std::vector<io::GgufMetadata> gguf_metadata(const Inputs& in, uint32_t file_type) {
  std::vector<io::GgufMetadata> md = {
      io::gguf_string("general.architecture", "ltxv"),
      io::gguf_u32("general.quantization_version", kGgmlQuantVersion),
      io::gguf_u32("general.file_type", file_type),
  };
  for (const auto& [k, v] : in.metadata) md.push_back(io::gguf_string(k, v));
  return md;
}

// Shapes for the GGUF output: a GGUF source keeps its stored sizes (a tensor ComfyUI-GGUF
// reshaped keeps its comfy.gguf.orig_shape record).
io::GgufTensorSpec spec_for(const std::string& name, const Source& src, GgmlType type,
                            std::vector<io::GgufMetadata>& md) {
  io::GgufTensorSpec spec{name, type, src.stored_shape};
  if (src.stored_shape != src.shape) {
    std::vector<int32_t> dims;
    for (int d = 0; d < src.shape.size(); ++d) dims.push_back(static_cast<int32_t>(src.shape[d]));
    md.push_back(io::gguf_i32_array("comfy.gguf.orig_shape." + name, dims));
  }
  return spec;
}

void write_gguf_plan(const std::string& out, const std::vector<io::GgufMetadata>& md,
                     const std::vector<GgufPlanEntry>& plan, ExportSummary& s,
                     const ExportProgress& progress) {
  std::vector<io::GgufTensorSpec> specs;
  uint64_t total_in = 0;
  for (const GgufPlanEntry& e : plan) {
    specs.push_back(e.spec);
    total_in += e.src->nbytes;
  }
  check_free_space(out, io::gguf_file_size(md, specs));
  uint64_t done_in = 0;
  io::write_gguf(out, md, specs, [&](size_t i, std::span<uint8_t> dst) {
    const GgufPlanEntry& e = plan[i];
    const Source& src = *e.src;
    const GgmlType type = e.spec.type;
    if (src.type == type) {
      LTX_CHECK(src.nbytes == dst.size(), src.what(), ": stored size ", src.nbytes,
                " differs from the planned ", dst.size());
      std::memcpy(dst.data(), src.bytes(), dst.size());
    } else {
      const Tensor f = src.f32();
      if (ggml_is_quantized(type)) check_finite(f, src);
      const int64_t cols = e.spec.shape.size() == 0 ? 1 : e.spec.shape[e.spec.shape.size() - 1];
      quantize_rows(type, f.data<float>(), f.numel() / cols, cols, dst.data());
    }
    count(s, ggml_type_name(type), e.spec.shape.numel(), dst.size());
    done_in += src.nbytes;
    if (progress) progress(static_cast<int64_t>(i) + 1, static_cast<int64_t>(plan.size()), done_in, total_in);
  });
}

// ------------------------------------------------------------------------ safetensors output

enum class StKind { Copy, Convert, Fp8Weight, Fp8Scale };

struct StPlanEntry {
  const Source* src = nullptr;
  io::SafetensorsEntry entry;
  StKind kind = StKind::Copy;
};

void write_st_plan(const std::string& out, const std::map<std::string, std::string>& metadata,
                   const std::vector<StPlanEntry>& plan, ExportSummary& s,
                   const ExportProgress& progress) {
  std::vector<io::SafetensorsEntry> entries;
  uint64_t data = 0, total_in = 0;
  for (const StPlanEntry& e : plan) {
    entries.push_back(e.entry);
    data += static_cast<uint64_t>(e.entry.shape.numel()) * dtype_size(e.entry.dtype);
    if (e.kind != StKind::Fp8Scale) total_in += e.src->nbytes;
  }
  // The header is a small fraction; a generous allowance keeps the check simple.
  check_free_space(out, data + 64 * static_cast<uint64_t>(plan.size()) + 65536);
  uint64_t done_in = 0;
  int64_t done = 0;
  io::write_safetensors_streamed(
      out, entries,
      [&](size_t i) -> Tensor {
        const StPlanEntry& e = plan[i];
        const Source& src = *e.src;
        Tensor t;
        switch (e.kind) {
          case StKind::Copy: t = src.dense(); break;
          case StKind::Convert: t = src.f32().to(e.entry.dtype); break;
          case StKind::Fp8Weight:
          case StKind::Fp8Scale: {
            Tensor dense = src.dense();
            check_finite(dense.to(DType::F32).contiguous(), src);
            ops::Fp8PerTensor q;
            try {
              q = ops::quantize_fp8_per_tensor(dense);
            } catch (const Error& err) {
              fail(src.what(), ": ", err.what());
            }
            t = e.kind == StKind::Fp8Weight ? q.weight : q.weight_scale;
            break;
          }
        }
        count(s, io::safetensors_dtype_name(t.dtype()), t.numel(), t.nbytes());
        if (e.kind != StKind::Fp8Scale) done_in += src.nbytes;
        if (progress) progress(++done, static_cast<int64_t>(plan.size()), done_in, total_in);
        return t;
      },
      metadata);
}

// ------------------------------------------------------------------------ quantize

ExportSummary quantize_fp8(const QuantizeOptions& opt, const Inputs& in) {
  LTX_CHECK(!in.any_gguf, "--type fp8 writes the official FP8 safetensors layout from a "
                          "safetensors checkpoint; '", in.gg[0]->path(), "' is GGUF");
  ExportSummary s;
  s.format = "safetensors";
  s.target = "fp8";
  s.output = opt.output;
  s.source_tensors = static_cast<int64_t>(in.tensors.size());
  s.source_bytes = in.bytes;
  std::set<std::string> names;
  for (const Source& t : in.tensors) names.insert(t.name);
  const std::string prefix = kTransformerPrefix;
  std::vector<StPlanEntry> plan;
  int64_t quantised = 0, already = 0;
  for (const Source& t : in.tensors) {
    StPlanEntry e{&t, {t.name, t.dtype.value_or(DType::U8), t.shape}, StKind::Copy};
    std::string module = t.name.starts_with(prefix) ? t.name.substr(prefix.size()) : t.name;
    const bool weight = module.ends_with(".weight");
    if (weight) module.resize(module.size() - std::strlen(".weight"));
    const bool selected = weight && is_fp8_cast_linear(module) && t.shape.size() == 2;
    const bool dense_float = t.dtype == DType::BF16 || t.dtype == DType::F16 || t.dtype == DType::F32;
    if (selected && t.dtype == DType::F8E4M3FN) ++already;
    if (selected && dense_float) {
      LTX_CHECK(!names.count(t.name + "_scale"), "'", t.file, "' has both a dense '", t.name,
                "' and a '", t.name, "_scale'");
      e.entry.dtype = DType::F8E4M3FN;
      e.kind = StKind::Fp8Weight;
      plan.push_back(e);
      plan.push_back({&t, {t.name + "_scale", DType::F32, Shape{}}, StKind::Fp8Scale});
      ++quantised;
      continue;
    }
    plan.push_back(e);
  }
  LTX_CHECK(quantised + already > 0, "'", opt.inputs[0],
            "' has no Linear the fp8-cast policy stores in FP8 (transformer_blocks.*.to_q / to_k / "
            "to_v / to_out.0 / ff.net.0.proj / ff.net.2 weights); is it an LTX transformer "
            "checkpoint?");
  if (already > 0)
    s.notes.push_back(str(already, " Linear weights were FP8 already and are copied as they are"));
  s.notes.push_back(str(quantised, " Linear weights quantised to e4m3 with a per-tensor "
                                   "weight_scale; no input_scale: load with --quantization "
                                   "fp8-cast or fp8 (fp8-scaled-mm needs calibrated input scales)"));
  write_st_plan(opt.output, in.metadata, plan, s, opt.progress);
  finish_summary(s, opt.output);
  return s;
}

ExportSummary quantize_gguf(const QuantizeOptions& opt, const GgufQuantType& qt, const Inputs& in) {
  ExportSummary s;
  s.format = "GGUF";
  s.target = qt.name;
  s.output = opt.output;
  s.source_tensors = static_cast<int64_t>(in.tensors.size());
  s.source_bytes = in.bytes;
  const auto tensors = transformer_tensors(in, s);
  std::vector<io::GgufMetadata> md = gguf_metadata(in, qt.file_type);
  std::vector<GgufPlanEntry> plan;
  for (const auto& [name, src] : tensors) {
    GgmlType type;
    if (!src->is_float()) {
      LTX_CHECK(src->type.has_value() && src->dtype.has_value(), src->what(), " is stored as ",
                type_label(*src), ", which GGUF cannot hold");
      type = *src->type;  // integer tensors as they are
    } else {
      LTX_CHECK(!ggml_is_quantized(*src->type), src->what(), " is already quantised (",
                ggml_type_name(*src->type), "); quantise from the bf16 checkpoint, not from a "
                "quantised file (the errors would add up)");
      type = community_gguf_type(name, src->shape, *src->type, qt);
    }
    plan.push_back({src, spec_for(name, *src, type, md)});
  }
  write_gguf_plan(opt.output, md, plan, s, opt.progress);
  finish_summary(s, opt.output);
  return s;
}

bool exact_conversion(GgmlType from, GgmlType to) { return from == to || to == GgmlType::F32; }

}  // namespace

ExportSummary quantize_checkpoint(const QuantizeOptions& opt) {
  const bool fp8 = opt.type == "fp8" || opt.type == "FP8";
  const std::optional<GgufQuantType> qt = parse_gguf_quant_type(opt.type);
  LTX_CHECK(fp8 || qt.has_value(), "unknown --type '", opt.type, "' (ltx quantize writes ",
            gguf_quant_type_names(), " as GGUF, and fp8 as the official FP8 safetensors layout)");
  check_output(opt.output, opt.inputs, opt.overwrite, "quantised checkpoint");
  const Inputs in = open_inputs(opt.inputs);
  return fp8 ? quantize_fp8(opt, in) : quantize_gguf(opt, *qt, in);
}

std::optional<ConvertTarget> parse_convert_target(const std::string& name) {
  if (name == "gguf") return ConvertTarget::Gguf;
  if (name == "gguf-bf16") return ConvertTarget::GgufBf16;
  if (name == "gguf-f16") return ConvertTarget::GgufF16;
  if (name == "safetensors") return ConvertTarget::Safetensors;
  return std::nullopt;
}

const char* convert_target_name(ConvertTarget target) {
  switch (target) {
    case ConvertTarget::Gguf: return "gguf";
    case ConvertTarget::GgufBf16: return "gguf-bf16";
    case ConvertTarget::GgufF16: return "gguf-f16";
    case ConvertTarget::Safetensors: return "safetensors";
  }
  return "?";
}

ExportSummary convert_checkpoint(const ConvertOptions& opt) {
  LTX_CHECK(opt.dequantize_to == DType::BF16 || opt.dequantize_to == DType::F32,
            "--dtype must be bf16 or f32, not ", dtype_name(opt.dequantize_to));
  check_output(opt.output, opt.inputs, opt.overwrite, "converted checkpoint");
  const Inputs in = open_inputs(opt.inputs);
  ExportSummary s;
  s.output = opt.output;
  s.target = convert_target_name(opt.target);
  s.source_tensors = static_cast<int64_t>(in.tensors.size());
  s.source_bytes = in.bytes;
  // The first conversion that can change values, for the up-front refusal.
  std::string lossy;
  auto note_lossy = [&](const Source& src, const std::string& to) {
    if (lossy.empty()) lossy = src.what() + " (" + type_label(src) + " -> " + to + ")";
  };

  if (opt.target == ConvertTarget::Safetensors) {
    s.format = "safetensors";
    std::string prefix;
    for (const auto& f : in.gg) {
      bool bare = true;
      for (const std::string& n : f->names()) bare = bare && !n.starts_with("model.");
      if (bare && (f->string_value("general.architecture") == "ltxv" || is_ltx_transformer(f->names())))
        prefix = kTransformerPrefix;
    }
    std::vector<StPlanEntry> plan;
    int64_t dequantised = 0;
    for (const Source& t : in.tensors) {
      const std::string name = t.gg ? prefix + t.name : t.name;
      if (t.dtype) {
        plan.push_back({&t, {name, *t.dtype, t.shape}, StKind::Copy});
        continue;
      }
      check_ggml_dequantizable(*t.type, t.what());
      if (opt.dequantize_to != DType::F32) note_lossy(t, dtype_name(opt.dequantize_to));
      plan.push_back({&t, {name, opt.dequantize_to, t.shape}, StKind::Convert});
      ++dequantised;
    }
    if (!lossy.empty() && !opt.allow_lossy)
      fail("converting would change values: ", lossy,
           " (GGUF blocks dequantise to f32 values that bf16 cannot all hold); pass --dtype f32 "
           "for an exact file (twice the size of bf16), or --allow-lossy to round them");
    if (!prefix.empty())
      s.notes.push_back("transformer names given back their 'model.diffusion_model.' prefix");
    if (dequantised > 0)
      s.notes.push_back(str(dequantised, " GGUF block-quantized tensors dequantised to ",
                            dtype_name(opt.dequantize_to),
                            ": the quantized model's weights, not the original checkpoint's"));
    std::map<std::string, std::string> md = in.metadata;
    write_st_plan(opt.output, md, plan, s, opt.progress);
    finish_summary(s, opt.output);
    return s;
  }

  s.format = "GGUF";
  const auto tensors = transformer_tensors(in, s);
  GgufQuantType dense_target;
  dense_target.base = opt.target == ConvertTarget::GgufF16 ? GgmlType::F16 : GgmlType::BF16;
  std::vector<GgufPlanEntry> plan;
  std::map<GgmlType, int64_t> params_by_type;
  std::vector<io::GgufMetadata> md;
  for (const auto& [name, src] : tensors) {
    LTX_CHECK(src->type.has_value(), src->what(), " is stored as ", type_label(*src),
              ", which GGUF cannot hold");
    GgmlType type = *src->type;
    if (opt.target != ConvertTarget::Gguf && src->is_float())
      type = community_gguf_type(name, src->shape, *src->type, dense_target);
    if (!exact_conversion(*src->type, type)) note_lossy(*src, ggml_type_name(type));
    plan.push_back({src, spec_for(name, *src, type, md)});
    params_by_type[type] += src->shape.numel();
  }
  if (!lossy.empty() && !opt.allow_lossy)
    fail("converting would change values: ", lossy, "; use --to gguf (every tensor in its own "
         "type) for an exact file, or pass --allow-lossy");
  // general.file_type: the input's when it is GGUF and nothing was converted, else from the type
  // holding most values (BF16 32, F16 1, F32 0: llama.cpp's LLAMA_FTYPE values).
  uint32_t file_type = 0;
  GgmlType most = GgmlType::F32;
  int64_t most_params = -1;
  for (const auto& [t, p] : params_by_type)
    if (p > most_params) {
      most = t;
      most_params = p;
    }
  if (most == GgmlType::BF16) file_type = 32;
  if (most == GgmlType::F16) file_type = 1;
  if (ggml_is_quantized(most))
    for (const char* n : {"Q8_0", "Q6_K", "Q5_K", "Q4_K", "Q5_0", "Q4_0"})
      if (ggml_type_from_name(n) == most) file_type = parse_gguf_quant_type(n)->file_type;
  if (opt.target == ConvertTarget::Gguf && in.gg.size() == 1 && !in.any_safetensors)
    if (const io::GgufMetadata* ft = in.gg[0]->find("general.file_type");
        ft != nullptr && ft->type == io::GgufValueType::U32)
      file_type = ft->value.get<uint32_t>();
  std::vector<io::GgufMetadata> all = gguf_metadata(in, file_type);
  all.insert(all.end(), md.begin(), md.end());
  write_gguf_plan(opt.output, all, plan, s, opt.progress);
  finish_summary(s, opt.output);
  return s;
}

nlohmann::ordered_json to_json(const ExportSummary& s) {
  nlohmann::ordered_json types = nlohmann::ordered_json::object();
  for (const auto& [name, c] : s.types)
    types[name] = {{"tensors", c.tensors},
                   {"params", c.params},
                   {"bytes", c.bytes},
                   {"bits_per_weight", c.params > 0 ? 8.0 * double(c.bytes) / double(c.params) : 0.0}};
  return {{"output", s.output},       {"format", s.format},
          {"target", s.target},       {"file_bytes", s.file_bytes},
          {"tensors", s.tensors},     {"params", s.params},
          {"types", types},           {"bits_per_weight", s.bits_per_weight},
          {"source_tensors", s.source_tensors}, {"source_bytes", s.source_bytes},
          {"left_out", s.left_out},   {"notes", s.notes}};
}

std::string to_text(const ExportSummary& s) {
  std::ostringstream o;
  o << "wrote " << s.output << " (" << s.format << ", " << s.target << "): "
    << size_text(s.file_bytes) << ", " << s.tensors << " tensors, "
    << s.params << " values, " << std::fixed;
  o.precision(2);
  o << s.bits_per_weight << " bits per weight (input " << size_text(s.source_bytes)
    << ")\n";
  for (const auto& [name, c] : s.types) {
    o << "  " << name << ": " << c.tensors << " tensors, " << c.params << " values, "
      << size_text(c.bytes);
    if (c.params > 0) o << ", " << 8.0 * double(c.bytes) / double(c.params) << " bits per weight";
    o << "\n";
  }
  for (const std::string& n : s.notes) o << "  note: " << n << "\n";
  return o.str();
}

}  // namespace ltx::quantization
