#pragma once
// Unicode letter test matching Python's str.isalpha() (used by clean_response).
namespace ltx::text {

// True when `cp` is in one of the general categories Lu, Ll, Lt, Lm, Lo (Unicode 14.0).
bool unicode_is_alpha(char32_t cp);

}  // namespace ltx::text
