#include "hub/digest.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <vector>

#include "core/error.h"

#if LTX_WITH_HUB
#include <openssl/evp.h>
#endif

namespace ltx::hub {

namespace {
bool all_hex(const std::string& s) {
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}
}  // namespace

EtagKind etag_kind(const std::string& etag) {
  if (etag.size() == 64 && all_hex(etag)) return EtagKind::Sha256;
  if (etag.size() == 40 && all_hex(etag)) return EtagKind::GitBlobSha1;
  return EtagKind::Opaque;
}

#if LTX_WITH_HUB

std::string file_digest(const std::string& path, EtagKind kind) {
  if (kind == EtagKind::Opaque) return "";
  std::ifstream in(path, std::ios::binary);
  LTX_CHECK(in, "cannot read ", path, " to verify it: ", std::strerror(errno));
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  LTX_CHECK(ctx && EVP_DigestInit_ex(ctx.get(), kind == EtagKind::Sha256 ? EVP_sha256() : EVP_sha1(),
                                     nullptr) == 1,
            "OpenSSL: cannot start a digest");
  if (kind == EtagKind::GitBlobSha1) {
    in.seekg(0, std::ios::end);
    const std::string prefix = "blob " + std::to_string(static_cast<int64_t>(in.tellg()));
    in.seekg(0);
    EVP_DigestUpdate(ctx.get(), prefix.data(), prefix.size() + 1);  // with its '\0'
  }
  std::vector<char> buf(4 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    if (in.gcount() > 0) EVP_DigestUpdate(ctx.get(), buf.data(), static_cast<size_t>(in.gcount()));
  }
  LTX_CHECK(in.eof(), "reading ", path, " to verify it failed: ", std::strerror(errno));
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_DigestFinal_ex(ctx.get(), md, &n);
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < n; ++i) {
    out += hex[md[i] >> 4];
    out += hex[md[i] & 15];
  }
  return out;
}

#else

std::string file_digest(const std::string&, EtagKind kind) {
  if (kind == EtagKind::Opaque) return "";
  fail("this ltx was built without libcrypto, so it cannot verify downloads: install libssl-dev "
       "and libcurl4-openssl-dev (scripts/install-deps) and rebuild");
}

#endif

}  // namespace ltx::hub
