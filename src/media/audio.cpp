#include "media/audio.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "core/dtype_bits.h"
#include "media/temp_output.h"

namespace ltx::media {
namespace {

void put_u32(std::vector<uint8_t>& b, uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put_u16(std::vector<uint8_t>& b, uint16_t v) {
  b.push_back(static_cast<uint8_t>(v));
  b.push_back(static_cast<uint8_t>(v >> 8));
}
void put_tag(std::vector<uint8_t>& b, const char* tag) { b.insert(b.end(), tag, tag + 4); }

int16_t to_int16(double scaled) {
  if (!(scaled == scaled)) return 0;
  return static_cast<int16_t>(scaled);  // |scaled| <= 32767: a truncating cast
}

}  // namespace

std::pair<int, int64_t> audio_layout(const Tensor& waveform, const char* who) {
  LTX_CHECK(waveform.defined(), who, ": the audio waveform is empty; pass no audio instead");
  LTX_CHECK(dtype_is_floating(waveform.dtype()), who,
            ": the audio waveform must be a floating dtype; got ", waveform.describe());
  const bool batched = waveform.dim() == 3 && waveform.size(0) == 1;
  LTX_CHECK(waveform.dim() == 2 || batched, who,
            ": the audio waveform must be [channels, samples] or [1, channels, samples]; got ",
            waveform.describe());
  const int64_t c = waveform.size(-2), n = waveform.size(-1);
  LTX_CHECK(c == 1 || c == 2, who,
            ": the audio waveform must be mono or stereo (1 or 2 "
            "channels in dim -2); got ",
            waveform.describe());
  LTX_CHECK(n > 0, who, ": the audio waveform has no samples (", waveform.describe(),
            "); pass no audio instead");
  return {static_cast<int>(c), n};
}

std::vector<int16_t> waveform_to_int16(const Tensor& waveform) {
  const auto [channels, n] = audio_layout(waveform, "waveform_to_int16");
  const Tensor w2 = waveform.dim() == 3 ? waveform.select(0, 0) : waveform;
  const Tensor cpu = w2.device().is_cpu() ? w2 : w2.to(Device::cpu());
  const DType dt = cpu.dtype();
  LTX_CHECK(dt == DType::F32 || dt == DType::BF16 || dt == DType::F16 || dt == DType::F64,
            "waveform_to_int16: waveforms of dtype ", dtype_name(dt),
            " are not supported; use f32, bf16, f16 or f64");
  // [N, C] row-major = interleaved.
  const Tensor inter = (dt == DType::F64 ? cpu : cpu.to(DType::F32)).transpose(0, 1).contiguous();
  std::vector<int16_t> out(static_cast<size_t>(n * channels));
  if (dt == DType::F64) {
    const double* p = inter.data<double>();
    for (size_t i = 0; i < out.size(); ++i)
      out[i] = to_int16(std::clamp(p[i], -1.0, 1.0) * 32767.0);
    return out;
  }
  const float* p = inter.data<float>();
  for (size_t i = 0; i < out.size(); ++i) {
    float s = std::clamp(p[i], -1.f, 1.f) * 32767.f;
    if (dt == DType::BF16) s = dtype_bits::bf16_to_f32(dtype_bits::f32_to_bf16(s));
    if (dt == DType::F16) s = dtype_bits::f16_to_f32(dtype_bits::f32_to_f16(s));
    out[i] = to_int16(s);
  }
  return out;
}

AudioTrack cut_audio_clip(const AudioTrack& track, double start_time, std::optional<double> max_duration,
                          const std::string& who, double first_time) {
  LTX_CHECK(start_time >= 0.0 && std::isfinite(start_time), "--audio-start-time ", start_time,
            " must be a number >= 0");
  LTX_CHECK(!max_duration || (*max_duration > 0.0 && std::isfinite(*max_duration)), "--audio-max-duration ",
            max_duration.value_or(0.0), " must be a positive number");
  const auto [channels, n] = audio_layout(track.waveform, who.c_str());
  LTX_CHECK(track.sample_rate > 0, who, ": the sample rate ", track.sample_rate, " must be positive");
  const double rate = static_cast<double>(track.sample_rate);
  const int64_t skip = std::max<int64_t>(0, static_cast<int64_t>(std::nearbyint((start_time - first_time) * rate)));
  LTX_CHECK(skip < n, "--audio-start-time ", start_time, " s is at or past the end of ", who, " (",
            first_time + static_cast<double>(n) / rate, " s of audio)");
  int64_t keep = n - skip;
  if (max_duration) keep = std::min(keep, static_cast<int64_t>(std::nearbyint(*max_duration * rate)));
  LTX_CHECK(keep > 0, "--audio-max-duration ", max_duration.value_or(0.0), " s keeps no sample of ", who, " at ",
            track.sample_rate, " Hz");
  AudioTrack out;
  out.waveform = track.waveform.reshape({channels, n}).narrow(1, skip, keep).contiguous();
  out.sample_rate = track.sample_rate;
  return out;
}

void write_wav(const std::string& path, const Tensor& waveform, int sample_rate) {
  const char* who = "write_wav";
  const auto [channels, n] = audio_layout(waveform, who);
  LTX_CHECK(sample_rate > 0, who, ": the sample rate must be positive; got ", sample_rate);
  const std::vector<int16_t> pcm = waveform_to_int16(waveform);
  const uint64_t data_bytes = pcm.size() * sizeof(int16_t);
  LTX_CHECK(data_bytes + 36 <= std::numeric_limits<uint32_t>::max(), who, ": ", n,
            " samples do not fit in a WAV file (4 GiB limit)");
  std::vector<uint8_t> h;
  put_tag(h, "RIFF");
  put_u32(h, static_cast<uint32_t>(36 + data_bytes));
  put_tag(h, "WAVE");
  put_tag(h, "fmt ");
  put_u32(h, 16);
  put_u16(h, 1);  // PCM
  put_u16(h, static_cast<uint16_t>(channels));
  put_u32(h, static_cast<uint32_t>(sample_rate));
  put_u32(h, static_cast<uint32_t>(sample_rate) * 2u * static_cast<uint32_t>(channels));
  put_u16(h, static_cast<uint16_t>(2 * channels));
  put_u16(h, 16);
  put_tag(h, "data");
  put_u32(h, static_cast<uint32_t>(data_bytes));
  std::vector<uint8_t> le(data_bytes);
  for (size_t i = 0; i < pcm.size(); ++i) {
    const uint16_t u = static_cast<uint16_t>(pcm[i]);
    le[2 * i] = static_cast<uint8_t>(u);
    le[2 * i + 1] = static_cast<uint8_t>(u >> 8);
  }

  TempOutput out(path, TempOutput::Kind::File, str(who, " '", path, "'"));
  std::FILE* f = std::fopen(out.temp_path().c_str(), "wb");
  if (f == nullptr) fail(who, ": cannot create '", out.temp_path(), "': ", std::strerror(errno));
  const bool ok = std::fwrite(h.data(), 1, h.size(), f) == h.size() &&
                  std::fwrite(le.data(), 1, le.size(), f) == le.size();
  const int err = errno;
  const bool closed = std::fclose(f) == 0;
  if (!ok || !closed)
    fail(who, ": writing '", out.temp_path(), "' failed: ", std::strerror(ok ? errno : err));
  out.commit();
}

}  // namespace ltx::media
