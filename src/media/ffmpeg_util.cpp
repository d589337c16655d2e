#include "media/support.h"

#if LTX_WITH_FFMPEG
#include <mutex>

#include "media/ffmpeg_util.h"

namespace ltx::media::ff {

void quiet_logs() {
  static std::once_flag once;
  // Fatal only: every failure reaches the user as one ltx::Error that carries FFmpeg's message
  // (av_strerror); its own error lines (e.g. "moov atom not found") would double that line.
  std::call_once(once, [] { av_log_set_level(AV_LOG_FATAL); });
}

int sws_colorspace(AVColorSpace cs) {
  switch (cs) {
    case AVCOL_SPC_BT709:
      return SWS_CS_ITU709;
    case AVCOL_SPC_FCC:
      return SWS_CS_FCC;
    case AVCOL_SPC_SMPTE240M:
      return SWS_CS_SMPTE240M;
    case AVCOL_SPC_BT2020_NCL:
    case AVCOL_SPC_BT2020_CL:
      return SWS_CS_BT2020;
    default:
      return SWS_CS_DEFAULT;  // BT.601 (also SMPTE 170M, BT.470 BG)
  }
}

}  // namespace ltx::media::ff
#endif
