#pragma once
// What the hub's ETag of a file is checked against: for files in Git LFS (every model weight) the
// ETag is the SHA-256 of the content; for small files in Git it is the Git blob id, the SHA-1 of
// "blob <size>\0" followed by the content. Computed with OpenSSL's libcrypto.
#include <cstdint>
#include <string>

namespace ltx::hub {

enum class EtagKind { Sha256, GitBlobSha1, Opaque };
// 64 lower-case hex digits: SHA-256; 40: a Git blob SHA-1; anything else: not a digest.
EtagKind etag_kind(const std::string& etag);

// The lower-case hex digest of the file's bytes as `kind` defines it (Opaque: ""). Throws an
// ltx::Error naming the file when it cannot be read.
std::string file_digest(const std::string& path, EtagKind kind);

}  // namespace ltx::hub
