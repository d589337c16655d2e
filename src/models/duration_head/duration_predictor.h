#pragma once
// Auto-duration: from the duration head's seconds to a frame count (reference:
// ltx_pipelines/utils/blocks.py DurationPredictor / require_num_frames_source / resolve_num_frames,
// helpers.py seconds_to_clamped_num_frames / snap_frames_to_grid, types.py AutoDuration).
//
// `ltx generate` without --num-frames asks the checkpoint's duration head for a frame count:
//
//   auto request = num_frames_request(cli.num_frames, cli.auto_duration);  // warns if both given
//   std::optional<DurationHead> head = DurationHead::try_from_file(path);
//   require_num_frames_source(request, head ? &*head : nullptr);          // before any work
//   ... encode the prompt (connector outputs video_encoding / audio_encoding) ...
//   int64_t frames = resolve_num_frames(request, head ? &*head : nullptr, video_enc, audio_enc,
//   fps);
//
// Python's round (half to even) is used throughout, as the reference does.
#include <cstdint>
#include <optional>
#include <variant>

#include "core/tensor.h"
#include "models/duration_head/duration_head.h"

namespace ltx::models::duration_head {

// The predicted duration is clamped to [min_seconds, max_seconds] (the reference's AutoDuration;
// `--auto-duration MIN MAX`). Construction checks 0 <= min <= max, finite.
struct AutoDuration {
  double min_seconds = 1.0;
  double max_seconds = 20.0;
  AutoDuration() = default;
  AutoDuration(double min_s, double max_s);
};

// Python's round(x) for a finite double: nearest integer, ties to even.
int64_t python_round(double x);

// Rounds frames down to k * time_scale + 1; throws for frames < 1.
int64_t snap_frames_to_grid(int64_t frames, int64_t time_scale = 8);

// round(seconds * fps) clamped to [min_frames, max_frames], snapped down to the 8k+1 grid; when
// that undershoots min_frames it is snapped up instead, capped at max_frames (so a narrow range
// can give a count off the grid). Throws (snap_frames_to_grid) when the clamped count is < 1.
int64_t seconds_to_clamped_num_frames(double seconds, double frame_rate, int64_t min_frames = 1,
                                      int64_t max_frames = 1024, int64_t time_scale = 8);

// DurationPredictor.__call__ on a predicted duration: min/max frames = round(min/max_seconds *
// fps), then seconds_to_clamped_num_frames. Logs the prediction (a warning when it was clamped).
int64_t frames_from_seconds(double seconds, double frame_rate, const AutoDuration& range);

// The duration head's prediction in seconds for ONE prompt (batch 1): video_encoding [1, T, Dv]
// and/or audio_encoding [1, T, Da] (the connector outputs; undefined = absent), as a double of
// the f32 (or bf16-stepped) output.
double predict_seconds(const DurationHead& head, const Tensor& video_encoding,
                       const Tensor& audio_encoding, Precision precision = Precision::F32);

// predict_seconds then frames_from_seconds: the frame count for the prompt.
int64_t predict_num_frames(const DurationHead& head, const Tensor& video_encoding,
                           const Tensor& audio_encoding, double frame_rate,
                           const AutoDuration& range = {}, Precision precision = Precision::F32);

// What the user asked for: an explicit frame count, or auto-duration within a range.
using NumFramesRequest = std::variant<int64_t, AutoDuration>;

// The CLI rule: --num-frames wins (with a warning when --auto-duration was also given); without
// it, auto-duration with the given range or the default 1-20 s.
NumFramesRequest num_frames_request(std::optional<int64_t> num_frames,
                                    std::optional<AutoDuration> auto_duration);

// Throws (the reference's message) when auto-duration is requested but `head` is null.
void require_num_frames_source(const NumFramesRequest& request, const DurationHead* head);

// The explicit count, or predict_num_frames with the request's range.
int64_t resolve_num_frames(const NumFramesRequest& request, const DurationHead* head,
                           const Tensor& video_encoding, const Tensor& audio_encoding,
                           double frame_rate, Precision precision = Precision::F32);

}  // namespace ltx::models::duration_head
