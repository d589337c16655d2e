#pragma once
// The web page's files (src/server/web/), compiled into the binary by cmake/EmbedFiles.cmake so
// that `ltx serve` needs no files beside it and loads nothing from a CDN.
#include <string_view>

namespace ltx::server {

struct WebAsset {
  std::string_view bytes;
  std::string_view content_type;
  std::string_view etag;  // quoted sha256 of the bytes
};

// The file of that name under web/ ("index.html", "app.js"), or nullptr.
const WebAsset* find_web_asset(std::string_view name);

}  // namespace ltx::server
