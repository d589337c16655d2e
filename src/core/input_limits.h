#pragma once
// The largest inputs ltx accepts where a file states how big something is (docs/ARCHITECTURE.md
// "Limits" lists every one with where it is checked). Each is checked before the memory for it
// is allocated, and going past one is an error naming the input, the limit and its value. They are
// far above anything the models use: they stop a corrupt or hostile file from making the process
// allocate what its header claims.
#include <cstdint>
#include <string>

namespace ltx::limits {

// Text files read whole: Gemma's tokenizer.json (about 33 MB for Gemma 3) ...
inline constexpr int64_t kMaxTokenizerJsonBytes = int64_t{256} << 20;
// ... and config.json, tokenizer_config.json, chat templates (*.jinja) and system prompts.
inline constexpr int64_t kMaxTextFileBytes = int64_t{16} << 20;
// An image file (PNG / JPEG), and the pixels its header declares (before decoding): 16384 x 16384.
inline constexpr int64_t kMaxImageFileBytes = int64_t{512} << 20;
inline constexpr int64_t kMaxImageSide = 16384;
inline constexpr int64_t kMaxImagePixels = kMaxImageSide * kMaxImageSide;
// EXR frames (--video-conditioning folders): at most kMaxImageSide a side, from the header.
// One decoded video frame (16384 x 16384) and all frames of a decoded clip together (u8 RGB).
inline constexpr int64_t kMaxVideoFramePixels = int64_t{16384} * 16384;
inline constexpr int64_t kMaxDecodedVideoBytes = int64_t{32} << 30;
// Decoded audio: the samples of one channel, as seconds at the stream's rate, and the channels.
inline constexpr double kMaxAudioSeconds = 4 * 3600.0;
inline constexpr int64_t kMaxAudioChannels = 64;

// The whole file at `path` when it has at most `max_bytes` (its size is checked before reading);
// `what` names it in errors ("tokenizer.json"). Throws ltx::Error naming the file, its size and
// the limit, or the read error.
std::string read_file_within(const std::string& path, int64_t max_bytes, const std::string& what);

// "256 MiB" / "16384 x 16384" style text of a byte limit, for messages.
std::string bytes_text(int64_t bytes);

}  // namespace ltx::limits
