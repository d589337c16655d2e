#pragma once
// An error a request gets, in the OpenAI shape:
//   {"error": {"message": ..., "type": ..., "param": ..., "code": ...}}
// with `type` following from the HTTP status (invalid_request_error for 400/404/409/413/416/422,
// authentication_error for 401, rate_limit_error for 429, server_error for 5xx). Anything the
// server code throws on a request's behalf is an ApiError; the HTTP layer turns it into the response.
#include <optional>
#include <stdexcept>
#include <string>

namespace ltx::server {

class ApiError : public std::runtime_error {
 public:
  // `code`: a stable machine-readable word ("invalid_value", "unknown_field", "not_found",
  // "video_not_ready", "queue_full", ...); `param`: the request field at fault, if one is.
  ApiError(int status, std::string code, const std::string& message, std::string param = {})
      : std::runtime_error(message), status_(status), code_(std::move(code)), param_(std::move(param)) {}

  int status() const { return status_; }
  const std::string& code() const { return code_; }
  const std::string& param() const { return param_; }
  std::string type() const;
  // The error body (param and code null when empty).
  std::string json() const;

  // Seconds a client should wait before retrying (429 / 503): sent as Retry-After.
  std::optional<int> retry_after_s;

 private:
  int status_;
  std::string code_, param_;
};

}  // namespace ltx::server
