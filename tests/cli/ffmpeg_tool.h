#pragma once
// Test clips written by FFmpeg's own encoders (the ffmpeg tool, lavfi sources), for the CLI tests
// of the pipelines that read media.
#include <cstdlib>
#include <string>

#include "media/support.h"

namespace ltx::test {

// Why clips cannot be made here ("" when they can): the ffmpeg tool encodes them.
inline std::string ffmpeg_tool_unavailable() {
  if (!media::ffmpeg_available()) return "this build has no FFmpeg (LTX_FFMPEG=OFF)";
  if (std::system("command -v ffmpeg >/dev/null 2>&1") != 0) return "the ffmpeg tool is not installed";
  return "";
}

// `ffmpeg -f lavfi -i SOURCE ... OUT`, quietly; true on success.
inline bool ffmpeg(const std::string& source, const std::string& extra, const std::string& out) {
  const std::string cmd = "ffmpeg -nostdin -loglevel error -y -f lavfi -i '" + source + "' " + extra + " '" + out + "'";
  return std::system(cmd.c_str()) == 0;
}

}  // namespace ltx::test
