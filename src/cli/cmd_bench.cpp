// `ltx bench [all|transformer|vae|diffdec|flops] [--preset ltx23-22b|ltx25-22b|tiny]
// [--device cpu|cuda[:N]] ...`: times one transformer denoising forward, the conv VAE decode and
// the LTX-2.5 diffusion video decode with random weights made on the device, next to the FLOP floor
// and (with --official FILE, repeatable) the official stack's numbers.
// `ltx bench kernels [--filter NAME]... [--device cuda[:N]] [--json] [--out FILE]`: single CUDA
// kernels on the models' full-size shapes (src/bench/kernel_timings.h).
// bench/README.md has the commands for the GPU runs.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "bench/cold_start.h"
#include "bench/model_files.h"
#include "bench/presets.h"
#include "bench/engine_throughput.h"
#include "bench/pipeline_bench.h"
#include "bench/kernel_timings.h"
#include "cli/commands.h"
#include "cli/model_flags.h"
#include "core/error.h"
#include "generate/memory_budget.h"
#include "media/temp_output.h"

namespace ltx::cli {

namespace {

struct BenchCliOptions {
  std::string what = "all";
  std::string preset = "ltx23-22b";
  std::string device;  // empty: cpu, or cuda for `kernels`
  std::string dtype;
  std::string max_gpu_memory;  // GiB; empty: none
  std::string quantization = "none";
  std::string weights_format = "dense";
  std::vector<std::string> sizes;
  std::string vae_size;
  int64_t frames = 0, text_tokens = 0;
  int64_t warmup = 2, iters = 5;
  uint64_t seed = 0;
  bool no_audio = false, no_tiling = false, cuda_graph = false, guided = false, no_text_kv_share = false,
       per_token_timesteps = false, image_conditioned = false;
  std::string offload;  // empty: none, or for `pipeline` under --max-gpu-memory on CUDA auto
  double decode_free_gib = 0;  // 0: the device's free memory
  std::vector<std::string> official;
  std::string official_section = "best";
  double gemm_tflops = 790, attention_tflops = 690;
  bool json = false;
  std::string out;
  std::vector<std::string> filters;  // `kernels` only
  // `engine` only
  std::string pipeline = "distilled";
  int64_t jobs = 8, steps = 0;
  std::vector<int64_t> batches;
  std::string mp4;  // `pipeline` only
  std::string text_encoder_format = "dense";  // `pipeline` only
  // `write-models` and `cold-start`
  std::string dir;
  int runs = 2;
  bool whole_clip = false;
  std::string cache = "none";  // `pipeline` only, with the three below
  double cache_threshold = 0.08;
  int64_t cache_warmup_steps = 8, cache_first_blocks = 1;
};

// The flags of `ltx bench pipeline` alone.
void reject_pipeline_only_options(const CLI::App& sub) {
  for (const char* name : {"--mp4", "--text-encoder-format", "--cache", "--cache-threshold",
                           "--cache-warmup-steps", "--cache-first-blocks"})
    LTX_CHECK(sub.count(name) == 0, name, " applies to `ltx bench pipeline` only");
}

// The options of the model benchmarks, which `ltx bench kernels` does not take.
const char* const kModelBenchOptions[] = {
    "--preset", "--dtype", "--quantization", "--weights-format", "--size", "--vae-size", "--frames", "--text-tokens", "--no-audio",
    "--no-tiling", "--cuda-graph", "--guided", "--no-text-kv-share", "--per-token-timesteps",
    "--image-conditioned", "--decode-free-gib", "--warmup", "--iters", "--seed", "--official",
    "--official-section", "--gemm-tflops", "--attention-tflops"};

// The options `ltx bench engine` takes besides --device, --size, --frames, --json and --out.
const char* const kEngineOptions[] = {"--pipeline", "--jobs", "--batch", "--steps"};

// --quantization for models made of random weights: the modes that read a pre-quantised file's
// layers have nothing to read there.
quantization::Mode random_weights_mode(const std::string& name) {
  const quantization::Mode mode = quantization::parse_mode(name);
  LTX_CHECK(mode != quantization::Mode::Fp8ScaledMm,
            "--quantization fp8-scaled-mm reads the FP8 layers and scales of a pre-quantised "
            "checkpoint, which random weights are not; bench --quantization fp8 (FP8 GEMMs with "
            "per-token activation scales) or fp8-cast");
  LTX_CHECK(mode != quantization::Mode::Nvfp4Prequant,
            "ltx bench: --quantization nvfp4-prequant reads the NVFP4 layers of a pre-quantised "
            "file, and the bench makes random weights; use --quantization nvfp4-cast (the same "
            "layers, quantised at load)");
  return mode;
}

bench::BenchOptions to_options(const BenchCliOptions& c) {
  bench::BenchOptions o;
  o.preset = c.preset;
  o.device = parse_device(c.device.empty() ? "cpu" : c.device, "--device");
  o.quantization = random_weights_mode(c.quantization);
  o.weights_format = c.weights_format;
  if (!c.dtype.empty()) {
    DType dt;
    LTX_CHECK(dtype_from_name(c.dtype, &dt), "--dtype: unknown dtype '", c.dtype, "'; use f32 or bf16");
    o.dtype = dt;
  }
  for (const std::string& s : c.sizes) o.sizes.push_back(bench::parse_video_size(s, "--size"));
  if (!c.vae_size.empty()) o.vae_size = bench::parse_video_size(c.vae_size, "--vae-size");
  if (c.frames != 0) o.frames = c.frames;
  if (c.text_tokens != 0) o.text_tokens = c.text_tokens;
  o.warmup = c.warmup;
  o.iters = c.iters;
  o.seed = c.seed;
  o.audio = !c.no_audio;
  o.vae_tiling = !c.no_tiling;
  o.cuda_graph = c.cuda_graph;
  LTX_CHECK(c.offload != "auto", "--offload auto plans a whole clip under --max-gpu-memory: use it with "
            "`ltx bench pipeline`; a transformer step takes none, cpu or disk");
  o.offload_slots = c.offload.empty() || c.offload == "none" ? 0 : 2;
  o.offload_from_file = c.offload == "disk";
  o.guided = c.guided;
  o.share_text_kv = !c.no_text_kv_share;
  o.per_token_timesteps = c.per_token_timesteps;
  o.image_conditioned = c.image_conditioned;
  if (c.decode_free_gib > 0)
    o.decode_free_bytes = static_cast<int64_t>(c.decode_free_gib * 1024.0 * 1024.0 * 1024.0);
  o.ceilings.gemm_tflops = c.gemm_tflops;
  o.ceilings.attention_tflops = c.attention_tflops;
  return o;
}

void write_text_atomically(const std::string& path, const std::string& text) {
  media::TempOutput out(path, media::TempOutput::Kind::File, "--out");
  {
    std::ofstream f(out.temp_path(), std::ios::binary);
    f << text;
    f.close();
    LTX_CHECK(f.good(), "--out ", path, ": cannot write ", out.temp_path());
  }
  out.commit();
}

// The report: its JSON to --out (when given), and to stdout with --json, else `table`.
int emit_report(const BenchCliOptions& c, const nlohmann::json& report, const std::string& table) {
  const std::string json = report.dump(2) + "\n";
  if (!c.out.empty()) write_text_atomically(c.out, json);
  std::cout << (c.json ? json : table) << std::flush;
  return 0;
}

// --max-gpu-memory in bytes (0: not given), checked against `device`.
int64_t gpu_budget(const BenchCliOptions& c, Device device) {
  if (c.max_gpu_memory.empty()) return 0;
  const int64_t bytes = generate::parse_gib(c.max_gpu_memory, "--max-gpu-memory");
  LTX_CHECK(!device.is_cpu(), "--max-gpu-memory budgets GPU memory; it does not apply to --device "
            "cpu (drop it, or add --device cuda)");
  return bytes;
}

int run_kernels(const BenchCliOptions& c, const CLI::App& sub) {
  reject_pipeline_only_options(sub);
  LTX_CHECK(c.max_gpu_memory.empty(), "--max-gpu-memory does not apply to `ltx bench kernels`");
  for (const char* name : kModelBenchOptions)
    LTX_CHECK(sub.count(name) == 0, name,
              " does not apply to `ltx bench kernels` (it takes --filter, --device, --json and --out)");
  for (const char* name : kEngineOptions)
    LTX_CHECK(sub.count(name) == 0, name, " applies to `ltx bench engine` only");
  const std::vector<std::string> harnesses = bench::select_kernel_harnesses(c.filters);
  const Device device = parse_device(c.device.empty() ? "cuda" : c.device, "--device");
  const std::vector<bench::KernelTiming> rows =
      bench::run_kernel_timings(harnesses, device, [&](const bench::KernelTiming& t) {
        if (!c.json) std::cout << t.line() << "\n" << std::flush;
      });
  const std::string json = bench::kernel_timings_json(rows, device.str()).dump(2) + "\n";
  if (!c.out.empty()) write_text_atomically(c.out, json);
  if (c.json) std::cout << json << std::flush;
  return 0;
}

int run_engine(const BenchCliOptions& c, const CLI::App& sub) {
  reject_pipeline_only_options(sub);
  for (const char* name : kModelBenchOptions)
    LTX_CHECK(std::string(name) == "--frames" || std::string(name) == "--size" || sub.count(name) == 0,
              name, " does not apply to `ltx bench engine` (it takes --pipeline, --size, --frames, "
                    "--steps, --jobs, --batch, --device, --max-gpu-memory, --json and --out)");
  LTX_CHECK(c.filters.empty(), "--filter applies to `ltx bench kernels` only");
  LTX_CHECK(c.sizes.size() <= 1, "`ltx bench engine` takes one --size");
  bench::EngineThroughputOptions o;
  o.device = parse_device(c.device.empty() ? "cpu" : c.device, "--device");
  o.pipeline = c.pipeline;
  o.max_gpu_memory_bytes = gpu_budget(c, o.device);
  if (!c.sizes.empty()) {
    const auto size = bench::parse_video_size(c.sizes[0], "--size");
    o.width = size.width;
    o.height = size.height;
  }
  if (c.frames != 0) o.frames = c.frames;
  o.steps = c.steps;
  o.jobs = c.jobs;
  if (!c.batches.empty()) o.batches = c.batches;
  const auto rows = bench::run_engine_throughput(o, [&](const bench::EngineThroughputRow& r) {
    if (!c.json)
      std::fprintf(stderr, "batch %lld: %.2f s for %lld jobs\n", static_cast<long long>(r.batch),
                   r.seconds, static_cast<long long>(r.jobs));
  });
  return emit_report(c, bench::engine_throughput_json(o, rows),
                     bench::format_engine_throughput(o, rows));
}

// The options of the component benchmarks that `ltx bench pipeline` does not take.
const char* const kNotPipelineOptions[] = {
    "--vae-size", "--text-tokens", "--no-tiling", "--cuda-graph", "--guided", "--no-text-kv-share",
    "--per-token-timesteps", "--image-conditioned", "--decode-free-gib", "--warmup", "--iters",
    "--official", "--official-section", "--gemm-tflops", "--attention-tflops", "--jobs", "--batch",
    "--filter"};

// The clip of `pipeline` and `cold-start`: 768x512x121 unless set, the tiny preset's own shapes
// for `tiny` (seconds on the CPU), then --size and --frames.
struct ClipSize {
  int64_t width = 768, height = 512, frames = 121;
};
ClipSize clip_size(const BenchCliOptions& c, const CLI::App& sub, const char* what) {
  LTX_CHECK(c.sizes.size() <= 1, "`ltx bench ", what, "` takes one --size");
  ClipSize clip;
  const bench::Preset p = bench::preset(c.preset);
  if (p.name == "tiny") {
    clip.width = clip.height = 128;
    clip.frames = p.frames;
  }
  if (!c.sizes.empty()) {
    const auto size = bench::parse_video_size(c.sizes[0], "--size");
    clip.width = size.width;
    clip.height = size.height;
  }
  if (sub.count("--frames") != 0) clip.frames = c.frames;
  return clip;
}

int run_pipeline(const BenchCliOptions& c, const CLI::App& sub) {
  for (const char* name : kNotPipelineOptions)
    LTX_CHECK(sub.count(name) == 0, name,
              " does not apply to `ltx bench pipeline` (it takes --preset, --pipeline, --size, "
              "--frames, --steps, --seed, --no-audio, --device, --dtype, --max-gpu-memory, "
              "--quantization, --weights-format, --text-encoder-format, --offload, --mp4, --cache, "
              "--json and --out)");
  const ClipSize clip = clip_size(c, sub, "pipeline");
  bench::PipelineBenchOptions o;
  o.preset = c.preset;
  o.pipeline = c.pipeline;
  o.device = parse_device(c.device.empty() ? "cpu" : c.device, "--device");
  if (!c.dtype.empty()) {
    DType dt{};
    LTX_CHECK(dtype_from_name(c.dtype, &dt) && (dt == DType::F32 || dt == DType::BF16),
              "--dtype: unknown dtype '", c.dtype, "'; use f32 or bf16");
    o.dtype = dt;
  }
  o.width = clip.width;
  o.height = clip.height;
  o.frames = clip.frames;
  if (sub.count("--steps") != 0) {
    LTX_CHECK(c.steps >= 1, "--steps ", c.steps, ": must be at least 1");
    o.steps = c.steps;
  }
  o.seed = static_cast<int64_t>(c.seed);
  o.audio = !c.no_audio;
  o.mp4_path = c.mp4;
  o.step_cache.mode = models::transformer::parse_step_cache_mode(c.cache);
  o.step_cache.threshold = c.cache_threshold;
  o.step_cache.warmup_steps = c.cache_warmup_steps;
  o.step_cache.first_blocks = c.cache_first_blocks;
  if (!o.step_cache.enabled())
    for (const char* flag : {"--cache-threshold", "--cache-warmup-steps", "--cache-first-blocks"})
      LTX_CHECK(sub.count(flag) == 0, flag, " applies to a step cache; add --cache fbcache");
  o.max_gpu_memory_bytes = gpu_budget(c, o.device);
  o.quantization = random_weights_mode(c.quantization);
  o.weights_format = c.weights_format;
  o.text_encoder_format = c.text_encoder_format;
  // As ltx generate: unset, the planner decides under a GPU budget, else everything is resident.
  o.offload = !c.offload.empty() ? generate::parse_offload(c.offload)
              : o.max_gpu_memory_bytes > 0 && o.device.is_cuda() ? generate::Offload::Auto
                                                                  : generate::Offload::None;
  const bench::PipelineBenchResult r = bench::run_pipeline_bench(o);
  return emit_report(c, bench::pipeline_bench_json(r), bench::format_pipeline_bench(r));
}

// The flags `write-models` and `cold-start` take (besides --preset and --json / --out).
const char* const kModelFileOptions[] = {"--dir", "--runs", "--whole-clip"};

// Refuses every flag given to `ltx bench <what>` but those of `takes` (long names without "--");
// `list` names them in the message.
void only_options(const CLI::App& sub, const char* what, const std::set<std::string>& takes,
                  const char* list) {
  for (const CLI::Option* opt : sub.get_options())
    for (const std::string& name : opt->get_lnames())
      LTX_CHECK(sub.count("--" + name) == 0 || name == "help" || takes.count(name) != 0, "--", name,
                " does not apply to `ltx bench ", what, "` (it takes ", list, ")");
}

int run_write_models(const BenchCliOptions& c, const CLI::App& sub) {
  only_options(sub, "write-models", {"preset", "dir", "seed"}, "--preset, --dir and --seed");
  LTX_CHECK(!c.dir.empty(), "ltx bench write-models needs --dir DIR: the folder the files go to");
  const bench::Preset p = bench::preset(c.preset);
  const bench::ModelFileSet files =
      bench::write_model_files(p, c.dir, c.seed, [](const std::string& path, double s) {
        std::fprintf(stderr, "wrote %s in %.1f s\n", path.c_str(), s);
      });
  std::cout << "--checkpoint-path " << files.checkpoint << " --text-encoder-path "
            << files.text_encoder << " --spatial-upsampler-path " << files.spatial_upsampler
            << "\n";
  return 0;
}

int run_cold_start(const BenchCliOptions& c, const CLI::App& sub) {
  only_options(sub, "cold-start",
               {"preset", "dir", "runs", "whole-clip", "device", "pipeline", "size", "frames",
                "quantization", "offload", "max-gpu-memory", "json", "out"},
               "--preset, --dir, --runs, --whole-clip, --device, --pipeline, --size, --frames, "
               "--quantization, --offload, --max-gpu-memory, --json and --out");
  const ClipSize clip = clip_size(c, sub, "cold-start");
  bench::ColdStartOptions o;
  o.preset = c.preset;
  o.dir = c.dir;
  o.device = c.device.empty() ? "cpu" : c.device;
  o.pipeline = c.pipeline;
  o.runs = c.runs;
  o.whole_clip = c.whole_clip;
  o.width = clip.width;
  o.height = clip.height;
  o.frames = clip.frames;
  if (sub.count("--quantization") != 0) o.extra_args.insert(o.extra_args.end(), {"--quantization", c.quantization});
  if (sub.count("--offload") != 0) o.extra_args.insert(o.extra_args.end(), {"--offload", c.offload});
  if (!c.max_gpu_memory.empty())
    o.extra_args.insert(o.extra_args.end(), {"--max-gpu-memory", c.max_gpu_memory});
  const bench::ColdStartResult r = bench::run_cold_start(o);
  return emit_report(c, bench::cold_start_json(r), bench::format_cold_start(r));
}

int run_bench(const BenchCliOptions& c, const CLI::App& sub) {
  for (const char* name : kEngineOptions)
    LTX_CHECK(sub.count(name) == 0, name, " applies to `ltx bench engine` ",
              std::string(name) == "--pipeline" || std::string(name) == "--steps"
                  ? "and `ltx bench pipeline` only"
                  : "only");
  LTX_CHECK(c.filters.empty(), "--filter applies to `ltx bench kernels` only");
  reject_pipeline_only_options(sub);
  const bench::BenchOptions o = to_options(c);
  if (const int64_t budget = gpu_budget(c, o.device); budget > 0 && c.what != "flops")
    generate::apply_gpu_budget(o.device, budget);
  const bench::BenchTarget target = c.what == "transformer" ? bench::BenchTarget::Transformer
                                    : c.what == "vae"       ? bench::BenchTarget::Vae
                                    : c.what == "diffdec"   ? bench::BenchTarget::DiffusionDecoder
                                                            : bench::BenchTarget::All;
  const bench::OfficialChoice choice = bench::parse_official_choice(c.official_section);
  bench::BenchReport report = bench::plan(o, target);
  // Read the official file before the (long) run, so that a bad path fails at once.
  for (const std::string& file : c.official) bench::attach_official(report, file, choice);
  if (c.what != "flops") bench::run(report);
  return emit_report(c, bench::to_json(report), bench::format_table(report));
}

}  // namespace

Command add_bench(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "bench",
      "Time a transformer denoising step and the video decoders with random weights (bench/README.md)");
  auto o = std::make_shared<BenchCliOptions>();
  sub->add_option("what", o->what,
                  "all (default), transformer, vae (conv VAE decode), diffdec (LTX-2.5 diffusion video "
                  "decode), flops (shapes and FLOP floors only, runs nothing), kernels (single CUDA "
                  "kernels on the full-size shapes), or engine (jobs per minute through the resident "
                  "engine on the demo bundle, one at a time vs batched), or pipeline (one whole clip "
                  "through a pipeline of `ltx generate` at the preset's full size, every model with "
                  "random weights made on the device: per-stage times, peak memory, end to end), "
                  "write-models (the preset's checkpoint, Gemma and upsampler as files with random "
                  "values in --dir), or cold-start (from starting `ltx generate` on those files to "
                  "its first denoising step)")
      ->check(CLI::IsMember({"all", "transformer", "vae", "diffdec", "flops", "kernels", "engine",
                             "pipeline", "write-models", "cold-start"}));
  std::string presets;
  for (const std::string& p : bench::preset_names()) presets += (presets.empty() ? "" : ", ") + p;
  sub->add_option("--preset", o->preset, "Model preset: " + presets + " (default ltx23-22b)")
      ->check(CLI::IsMember(bench::preset_names()));
  sub->add_option("--device", o->device, "cpu (default; kernels: cuda) or cuda[:N]");
  sub->add_option("--max-gpu-memory", o->max_gpu_memory, kMaxGpuMemoryHelp);
  sub->add_option("--dtype", o->dtype, "Weight/activation dtype: bf16 (CUDA default) or f32 (CPU)");
  add_quantization_flag(sub, o->quantization);
  // Checked by bench::BenchOptions::validate (one error naming the accepted values).
  sub->add_option("--weights-format", o->weights_format,
                  "The transformer's linear weights: dense (default, in --dtype; bf16 says the same "
                  "under --dtype bf16) or GGML blocks of an `ltx quantize` type (q8_0, q6_k, q5_k, "
                  "q5_k_m, q4_k, q4_k_m, q5_0, q4_0) for the weights it quantises, made from one "
                  "quantised pool of random values; not with --quantization. pipeline: the "
                  "transformer loaded and planned as a GGUF file of those blocks");
  sub->add_option("--text-encoder-format", o->text_encoder_format,
                  "pipeline: Gemma's Linear weights dense (default, in --dtype) or fp8 (stored "
                  "float8_e4m3fn with per-tensor scales, as ComfyUI's FP8 Gemma; kept at a byte "
                  "when the run computes in bf16)")
      ->check(CLI::IsMember({"dense", "fp8"}));
  sub->add_option("--size", o->sizes, "Transformer video size WxH (repeatable; default: the preset's)");
  sub->add_option("--vae-size", o->vae_size,
                  "Video size WxH of both decoders (default: the preset's, 1536x1024)");
  // 0 stands for "the preset's" internally, so it is rejected here.
  sub->add_option("--frames", o->frames, "Video frames, 8k+1 (default: the preset's, 121)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  sub->add_option("--text-tokens", o->text_tokens, "Text-context tokens (default: the preset's, 1024)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  sub->add_flag("--no-audio", o->no_audio, "Transformer without the audio stream");
  sub->add_flag("--no-tiling", o->no_tiling, "Decode in one tile (default: the pipelines' auto tiling)");
  sub->add_flag("--cuda-graph", o->cuda_graph,
                "Record the transformer step once as a CUDA graph and time its replays (CUDA only)");
  sub->add_option("--offload", o->offload,
                  "none (default), cpu (the transformer's blocks in page-locked host memory, "
                  "streamed to the GPU block by block) or disk (the blocks copied through "
                  "staging buffers at every pass), as ltx generate --offload; `pipeline` also takes "
                  "auto, its default under --max-gpu-memory on CUDA (the planner keeps what fits)")
      ->check(CLI::IsMember({"none", "cpu", "disk", "auto"}));
  sub->add_flag("--guided", o->guided,
                "Time one guided denoising step (the preset's default guidance: cond, uncond, STG and "
                "isolated-modality passes batched) instead of one forward");
  sub->add_flag("--no-text-kv-share", o->no_text_kv_share,
                "With --guided: recompute the text K/V in every pass (as the reference) instead of "
                "once per prompt");
  sub->add_flag("--per-token-timesteps", o->per_token_timesteps,
                "Hand the transformer one timestep per token, as the reference does, instead of one per "
                "sample where all tokens share it (the pipelines' default; same values, for A/B timing)");
  sub->add_flag("--image-conditioned", o->image_conditioned,
                "Condition the first latent frame's tokens (denoise mask 0, as an image at frame 0 does): "
                "the pipelines then form the AdaLN once per run of equal timesteps (two), or per token "
                "with --per-token-timesteps");
  sub->add_option("--decode-free-gib", o->decode_free_gib,
                  "Memory budget in GiB of the diffusion decoder's automatic tiling (default: what is "
                  "free on the device when the run starts, as the official script reads it)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--warmup", o->warmup, "Untimed calls first (default 2)");
  sub->add_option("--iters", o->iters, "Timed calls (default 5); the table shows median and min");
  sub->add_option("--seed", o->seed, "Seed of the random weights and inputs (default 0)");
  sub->add_option("--official", o->official,
                  "JSON written by tools/bench/bench_official.py or bench_official_diffdec.py on the same "
                  "GPU (adds the official columns; repeatable)");
  sub->add_option("--official-section", o->official_section,
                  "Official run shown: best (default, the fastest), eager, compiled or capture");
  sub->add_option("--gemm-tflops", o->gemm_tflops, "GEMM ceiling for the floor, TFLOP/s (default 790)");
  sub->add_option("--attention-tflops", o->attention_tflops,
                  "Attention ceiling for the floor, TFLOP/s (default 690)");
  std::string harnesses;
  for (const std::string& h : bench::kernel_harness_names())
    harnesses += (harnesses.empty() ? "" : ", ") + h;
  sub->add_option("--filter", o->filters, "kernels: run only this harness (repeatable): " + harnesses);
  sub->add_option("--pipeline", o->pipeline,
                  "engine, pipeline: the pipeline (default distilled; pipeline: distilled, two-stage "
                  "or two-stage-hq)");
  sub->add_option("--jobs", o->jobs, "engine: jobs timed per batch size (default 8)");
  sub->add_option("--batch", o->batches, "engine: batch sizes to time (repeatable; default 1 and 4)");
  sub->add_option("--steps", o->steps,
                  "engine, pipeline: stage-1 steps of a guided pipeline (default: its own)");
  sub->add_option("--mp4", o->mp4,
                  "pipeline: keep the MP4 at this path (default: a temporary file, removed; needs "
                  "FFmpeg in the build)");
  sub->add_option("--dir", o->dir,
                  "write-models, cold-start: the folder of the model files (written when missing)");
  sub->add_option("--runs", o->runs,
                  "cold-start: `ltx generate` processes started one after another (default 2; the "
                  "later ones find the files in the page cache for sure)")
      ->check(CLI::Range(1, 100));
  sub->add_flag("--whole-clip", o->whole_clip,
                "cold-start: let each run finish the clip (default: interrupt it after its first "
                "denoising step)");
  sub->add_option("--cache", o->cache,
                  "pipeline: {none,fbcache} step caching in the guided stage 1, as ltx generate "
                  "--cache (default none); the report gives the model calls computed and reused");
  sub->add_option("--cache-threshold", o->cache_threshold, "pipeline: as ltx generate (default 0.08)");
  sub->add_option("--cache-warmup-steps", o->cache_warmup_steps, "pipeline: as ltx generate (default 8)");
  sub->add_option("--cache-first-blocks", o->cache_first_blocks, "pipeline: as ltx generate (default 1)");
  sub->add_flag("--json", o->json, "Print the full JSON report instead of the table");
  sub->add_option("--out", o->out, "Also write the JSON report to this file");
  return {sub, [o, sub]() -> int {
            if (o->what != "write-models" && o->what != "cold-start")
              for (const char* name : kModelFileOptions)
                LTX_CHECK(sub->count(name) == 0, name,
                          " applies to `ltx bench write-models` and `ltx bench cold-start` only");
            if (o->what == "kernels") return run_kernels(*o, *sub);
            if (o->what == "engine") return run_engine(*o, *sub);
            if (o->what == "pipeline") return run_pipeline(*o, *sub);
            if (o->what == "write-models") return run_write_models(*o, *sub);
            if (o->what == "cold-start") return run_cold_start(*o, *sub);
            return run_bench(*o, *sub);
          }};
}

}  // namespace ltx::cli
