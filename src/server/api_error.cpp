#include "server/api_error.h"

#include <nlohmann/json.hpp>

namespace ltx::server {

std::string ApiError::type() const {
  if (status_ == 401) return "authentication_error";
  if (status_ == 403) return "permission_error";
  if (status_ == 429) return "rate_limit_error";
  if (status_ >= 500) return "server_error";
  return "invalid_request_error";
}

std::string ApiError::json() const {
  nlohmann::json e = {{"message", what()},
                      {"type", type()},
                      {"param", param_.empty() ? nlohmann::json() : nlohmann::json(param_)},
                      {"code", code_.empty() ? nlohmann::json() : nlohmann::json(code_)}};
  return nlohmann::json{{"error", e}}.dump();
}

}  // namespace ltx::server
