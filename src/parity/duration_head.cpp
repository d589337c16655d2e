// `ltx parity duration-head`: the duration_<case> io files (shared/golden/README-ltx25.md §3-4).
// For every prompt `in.p{i}.{video,audio}_encoding` and modality mix (av, v, a):
//   out.seconds.f32 / out.log_seconds.f32  the f32 head;
//   out.seconds.bf16                       the head with bf16-rounded activations (an
//                                          approximation of the reference's bf16 build);
//   out.seconds.f64                        the f32 values stored as f64 (no f64 path);
//   out.frames.<range>.{f32,bf16}          frames_from_seconds with the range of the io file's
//                                          notes.ranges (or parsed from the name, e.g.
//                                          "auto_2_6_24fps", "default_25fps"); -1 if it throws;
// plus table.{min,max,raw}_frames / table.frames from table.{seconds,fps,min_seconds,max_seconds}
// and inter.p0.* (prompt 0, both modalities).
#include <cstdlib>
#include <regex>

#include "models/duration_head/duration_predictor.h"
#include "parity/parity.h"

namespace ltx::parity {

namespace {

using namespace models::duration_head;

struct Range {
  AutoDuration span;
  double fps = 24.0;
};

// "default_24fps" (1-20 s), "auto_<min>_<max>_<fps>fps".
std::optional<Range> range_from_name(const std::string& name) {
  static const std::regex kAuto(R"(auto_([0-9.]+)_([0-9.]+)_([0-9.]+)fps)");
  static const std::regex kDefault(R"(default_([0-9.]+)fps)");
  std::smatch m;
  if (std::regex_match(name, m, kAuto))
    return Range{AutoDuration(std::stod(m[1]), std::stod(m[2])), std::stod(m[3])};
  if (std::regex_match(name, m, kDefault)) return Range{AutoDuration(), std::stod(m[1])};
  return std::nullopt;
}

Range range_of(const Run& run, const std::string& name) {
  const nlohmann::json notes = run.io().metadata_json("notes");
  if (notes.is_object() && notes.contains("ranges") && notes["ranges"].is_array())
    for (const auto& r : notes["ranges"])
      if (r.value("name", "") == name)
        return Range{
            AutoDuration(r.at("min_seconds").get<double>(), r.at("max_seconds").get<double>()),
            r.at("fps").get<double>()};
  auto parsed = range_from_name(name);
  LTX_CHECK(parsed.has_value(), "parity duration-head: unknown range '", name,
            "' (not in the io file's notes.ranges and not of the form default_<fps>fps or "
            "auto_<min>_<max>_<fps>fps)");
  return *parsed;
}

// frames_from_seconds without its log line.
int64_t frames_or_minus_one(double seconds, const Range& r) {
  try {
    return seconds_to_clamped_num_frames(seconds, r.fps, python_round(r.span.min_seconds * r.fps),
                                         python_round(r.span.max_seconds * r.fps));
  } catch (const Error&) {
    return -1;  // the reference raised
  }
}

}  // namespace

void run_duration_head(Run& run) {
  const DurationHead head = DurationHead::from_file(run.args().weights.at(0));
  int64_t prompts = 0;
  while (run.has(str("in.p", prompts, ".video_encoding")) ||
         run.has(str("in.p", prompts, ".audio_encoding")))
    ++prompts;
  LTX_CHECK(prompts > 0, "parity duration-head: the io file has no in.p0.{video,audio}_encoding");

  // Mixes along axis 1: both, video only, audio only.
  constexpr int kMixes = 3;
  std::vector<double> sec32, sec16;
  std::vector<float> log32;
  for (int64_t i = 0; i < prompts; ++i) {
    const std::string p = str("in.p", i, ".");
    const Tensor v = run.has(p + "video_encoding") ? run.tensor(p + "video_encoding") : Tensor();
    const Tensor a = run.has(p + "audio_encoding") ? run.tensor(p + "audio_encoding") : Tensor();
    const Tensor mixes[kMixes][2] = {{v, a}, {v, Tensor()}, {Tensor(), a}};
    for (const auto& mix : mixes) {
      if (!mix[0].defined() && !mix[1].defined()) {
        sec32.push_back(NAN), sec16.push_back(NAN), log32.push_back(NAN);
        continue;
      }
      const Tensor log_s = head.log_seconds(mix[0], mix[1]);
      log32.push_back(static_cast<float>(log_s.item()));
      sec32.push_back(predict_seconds(head, mix[0], mix[1]));
      sec16.push_back(predict_seconds(head, mix[0], mix[1], Precision::Bf16Steps));
    }
    if (i == 0 && v.defined() && a.defined())
      head.log_seconds(v, a, Precision::F32, [&run](const std::string& name, const Tensor& t) {
        const std::string key = "inter.p0." + name;
        if (run.has(key)) run.emit(key, t.reshape(run.io().info(key).shape));
      });
  }
  const Shape grid{prompts, kMixes};
  auto f32_of = [](const std::vector<double>& d) { return std::vector<float>(d.begin(), d.end()); };
  run.emit("out.seconds.f32", Tensor::from_vector(f32_of(sec32), grid));
  run.emit("out.seconds.bf16", Tensor::from_vector(f32_of(sec16), grid));
  run.emit("out.seconds.f64", Tensor::from_vector(f32_of(sec32), grid).to(DType::F64));
  run.emit("out.log_seconds.f32", Tensor::from_vector(log32, grid));

  // out.frames.<range>.<dtype>
  const std::string prefix = "out.frames.";
  for (const auto& name : run.names_with_prefix(prefix)) {
    const size_t dot = name.rfind('.');
    const std::string range = name.substr(prefix.size(), dot - prefix.size());
    const std::string dtype = name.substr(dot + 1);
    if (dtype != "f32" && dtype != "bf16") continue;
    const Range r = range_of(run, range);
    const std::vector<double>& secs = dtype == "f32" ? sec32 : sec16;
    std::vector<int64_t> frames;
    for (double s : secs) frames.push_back(std::isnan(s) ? -1 : frames_or_minus_one(s, r));
    run.emit(name, Tensor::from_vector(frames, grid));
  }

  // The seconds -> frames rounding table.
  if (run.has("table.seconds")) {
    const auto secs = run.tensor("table.seconds", DType::F64).to_double_vector();
    const auto fps = run.tensor("table.fps", DType::F64).to_double_vector();
    const auto lo = run.tensor("table.min_seconds", DType::F64).to_double_vector();
    const auto hi = run.tensor("table.max_seconds", DType::F64).to_double_vector();
    std::vector<int64_t> min_f, max_f, raw, frames;
    for (size_t j = 0; j < secs.size(); ++j) {
      min_f.push_back(python_round(lo[j] * fps[j]));
      max_f.push_back(python_round(hi[j] * fps[j]));
      raw.push_back(python_round(secs[j] * fps[j]));
      try {
        frames.push_back(
            seconds_to_clamped_num_frames(secs[j], fps[j], min_f.back(), max_f.back()));
      } catch (const Error&) {
        frames.push_back(-1);
      }
    }
    const Shape n{static_cast<int64_t>(secs.size())};
    run.emit("table.min_frames", Tensor::from_vector(min_f, n));
    run.emit("table.max_frames", Tensor::from_vector(max_f, n));
    run.emit("table.raw_frames", Tensor::from_vector(raw, n));
    run.emit("table.frames", Tensor::from_vector(frames, n));
  }
}

}  // namespace ltx::parity
