#pragma once
// Audio waveforms for the writers: the reference's float -> int16 conversion and WAV output.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace ltx::media {

// A waveform as the audio decoder produces it: float [C, N] or [1, C, N] (C = 1 or 2 channels,
// values nominally in [-1, 1]) at `sample_rate` Hz.
struct AudioTrack {
  Tensor waveform;
  int sample_rate = 0;
};

// Checks and returns {channels, samples} of a waveform ([C, N] or [1, C, N], C in {1, 2}, N > 0,
// floating dtype); `who` names the caller in errors.
std::pair<int, int64_t> audio_layout(const Tensor& waveform, const char* who);

// The reference's conversion (audio_mux.write_audio): clip to [-1, 1], * 32767, cast to int16
// (truncation toward zero), in the waveform's dtype (bf16 / f16 products are rounded to that
// dtype first, as torch does). NaN -> 0. Returns the samples interleaved: [N * C].
std::vector<int16_t> waveform_to_int16(const Tensor& waveform);

// The reference's cut of decoded audio (decode_audio_from_file): the samples from
// round((start_time - first_time) * rate) on (none skipped when that is negative), at most
// round(max_duration * rate) of them, rounding half to even as Python's round; first_time is the
// first decoded frame's time. `who` names the source in errors: a negative or non-finite start
// (named --audio-start-time), a non-positive duration (--audio-max-duration), a start at or past
// the end, a cut that keeps no sample.
AudioTrack cut_audio_clip(const AudioTrack& track, double start_time, std::optional<double> max_duration,
                          const std::string& who, double first_time = 0.0);

// Writes a 16-bit PCM WAV (pcm_s16le, canonical 44-byte header, no extra chunks) at sample_rate,
// atomically (a temporary name renamed on success; parent folders are created).
void write_wav(const std::string& path, const Tensor& waveform, int sample_rate);

}  // namespace ltx::media
