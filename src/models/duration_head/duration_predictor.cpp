#include "models/duration_head/duration_predictor.h"

#include <algorithm>
#include <cmath>

#include "core/log.h"

namespace ltx::models::duration_head {

namespace {

// Python's floor division for a positive divisor.
int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

}  // namespace

AutoDuration::AutoDuration(double min_s, double max_s) : min_seconds(min_s), max_seconds(max_s) {
  LTX_CHECK(std::isfinite(min_s) && std::isfinite(max_s), "--auto-duration: MIN_SECONDS (", min_s,
            ") and MAX_SECONDS (", max_s, ") must be finite numbers");
  LTX_CHECK(min_s <= max_s, "--auto-duration MIN_SECONDS (", min_s, ") must be <= MAX_SECONDS (",
            max_s, ")");
}

int64_t python_round(double x) {
  LTX_CHECK(std::isfinite(x), "round: cannot convert ", x, " to an integer");
  const double f = std::floor(x), diff = x - f;
  double r = diff < 0.5 ? f : diff > 0.5 ? f + 1 : (std::fmod(f, 2.0) == 0 ? f : f + 1);
  return static_cast<int64_t>(r);
}

int64_t snap_frames_to_grid(int64_t frames, int64_t time_scale) {
  LTX_CHECK(frames >= 1, "frames must be >= 1, got ", frames);
  return floor_div(frames - 1, time_scale) * time_scale + 1;
}

int64_t seconds_to_clamped_num_frames(double seconds, double frame_rate, int64_t min_frames,
                                      int64_t max_frames, int64_t time_scale) {
  const int64_t raw =
      std::max(min_frames, std::min(python_round(seconds * frame_rate), max_frames));
  int64_t frames = snap_frames_to_grid(raw, time_scale);
  if (frames < min_frames)
    frames = std::min(-floor_div(-(min_frames - 1), time_scale) * time_scale + 1, max_frames);
  return frames;
}

int64_t frames_from_seconds(double seconds, double frame_rate, const AutoDuration& range) {
  const int64_t min_frames = python_round(range.min_seconds * frame_rate);
  const int64_t max_frames = python_round(range.max_seconds * frame_rate);
  const int64_t frames = seconds_to_clamped_num_frames(seconds, frame_rate, min_frames, max_frames);
  if (seconds > range.max_seconds || seconds < range.min_seconds)
    log_warn("duration head prediction clamped: raw ", seconds, " s outside [", range.min_seconds,
             " s, ", range.max_seconds, " s], using ", static_cast<double>(frames) / frame_rate,
             " s (", frames, " frames) @ ", frame_rate, " fps");
  else
    log_info("duration head predicted ", seconds, " s (", frames, " frames @ ", frame_rate,
             " fps)");
  return frames;
}

double predict_seconds(const DurationHead& head, const Tensor& video_encoding,
                       const Tensor& audio_encoding, Precision precision) {
  const Tensor s = head(video_encoding, audio_encoding, precision);
  LTX_CHECK(s.numel() == 1,
            "duration head: only a single-prompt batch is supported, got a prediction of shape ",
            s.shape().str());
  return s.item();
}

int64_t predict_num_frames(const DurationHead& head, const Tensor& video_encoding,
                           const Tensor& audio_encoding, double frame_rate,
                           const AutoDuration& range, Precision precision) {
  LTX_CHECK(std::isfinite(frame_rate) && frame_rate > 0, "auto-duration: the frame rate must be ",
            "positive, got ", frame_rate);
  const double seconds = predict_seconds(head, video_encoding, audio_encoding, precision);
  return frames_from_seconds(seconds, frame_rate, range);
}

NumFramesRequest num_frames_request(std::optional<int64_t> num_frames,
                                    std::optional<AutoDuration> auto_duration) {
  if (num_frames) {
    if (auto_duration)
      log_warn("both --num-frames and --auto-duration were given; using --num-frames=", *num_frames,
               " and ignoring --auto-duration");
    return *num_frames;
  }
  return auto_duration.value_or(AutoDuration());
}

void require_num_frames_source(const NumFramesRequest& request, const DurationHead* head) {
  LTX_CHECK(!std::holds_alternative<AutoDuration>(request) || head != nullptr,
            "the frame count was left to auto-duration but this checkpoint has no duration head "
            "weights to predict it from (the duration head ships from LTX-2.5 on); pass "
            "--num-frames explicitly");
}

int64_t resolve_num_frames(const NumFramesRequest& request, const DurationHead* head,
                           const Tensor& video_encoding, const Tensor& audio_encoding,
                           double frame_rate, Precision precision) {
  if (const int64_t* n = std::get_if<int64_t>(&request)) return *n;
  require_num_frames_source(request, head);
  return predict_num_frames(*head, video_encoding, audio_encoding, frame_rate,
                            std::get<AutoDuration>(request), precision);
}

}  // namespace ltx::models::duration_head
