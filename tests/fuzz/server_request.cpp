// server_request: the body of POST /v1/videos through the server's request validator
// (server::parse_create: the JSON reader, the multipart form's part names `key[]`,
// `key[member]`, `key[][member]`, `key[N][member]` and their values, every pipeline's fields,
// the uploads' checks, the limits, then the engine's option checks), and a checked request
// through the job store's JSON round trip (to_json, video_request_from_json).
//
// Input: a JSON body; or "form\n" and then the parts, separated by NUL, each "name\nfilename\n
// content type\n" followed by the part's bytes. The multipart framing itself (boundaries,
// part headers) is cpp-httplib's, before this code sees the parts.
#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/error.h"
#include "fuzz_support.h"
#include "server/api_error.h"
#include "server/video_request.h"

namespace {

using namespace ltx::server;

// A demo-sized model serving every pipeline the request reader knows, small limits.
const ServedModel& served() {
  static const ServedModel m = [] {
    ServedModel s;
    s.id = "ltx-demo";
    s.demo = true;
    s.pipelines = {"two-stage", "one-stage",   "distilled", "retake", "a2vid",
                   "t2a",       "ic-lora",     "keyframe-interpolation", "dubit"};
    s.default_pipeline = "two-stage";
    for (const auto& p : s.pipelines) s.defaults[p] = {128, 128, 9, 24.0, 4};
    for (const char* p : {"distilled", "retake", "ic-lora", "dubit"}) s.defaults[p].steps.reset();
    s.limits.max_width = s.limits.max_height = 512;
    s.limits.max_frames = 65;
    s.limits.max_image_bytes = 1 << 20;
    s.limits.max_image_pixels = 1 << 20;
    s.limits.max_media_bytes = 1 << 20;
    s.limits.max_media_seconds = 30.0;
    s.loras = {"style", "detail"};
    s.duration_head = true;
    return s;
  }();
  return m;
}

CreateBody body_of(std::string_view text) {
  CreateBody body;
  static constexpr std::string_view kForm = "form\n";
  if (text.substr(0, kForm.size()) != kForm) {
    body.json = std::string(text);
    return body;
  }
  body.multipart = true;
  text.remove_prefix(kForm.size());
  while (true) {
    const size_t end = text.find('\0');
    std::string_view record = text.substr(0, end);
    FormPart part;
    std::string* header[3] = {&part.name, &part.filename, &part.content_type};
    for (std::string* field : header) {
      const size_t nl = record.find('\n');
      *field = std::string(record.substr(0, nl));
      record = nl == std::string_view::npos ? std::string_view() : record.substr(nl + 1);
    }
    part.content = std::string(record);
    body.parts.push_back(std::move(part));
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return body;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ltx::fuzz::quiet();
  struct stat st {};
  if (::stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode)) ::setenv("TMPDIR", "/dev/shm", 1);
  (void)served();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const CreateBody body = body_of(ltx::fuzz::as_text(data, size));
  VideoRequest request;
  try {
    request = parse_create(body, served());
  } catch (const ApiError&) {
    return 0;
  }
  // What the store keeps reads back as the same request.
  const nlohmann::json stored = to_json(request);
  const VideoRequest again = video_request_from_json(nlohmann::json::parse(stored.dump()));
  if (to_json(again) != stored) __builtin_trap();
  return 0;
}
