#include "core/out_of_memory.h"

#include <cstdio>

namespace ltx {

namespace {

thread_local std::string t_stage;
thread_local std::string t_scope;

std::string mib(size_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

}  // namespace

std::string out_of_memory_message(const OutOfMemoryReport& r) {
  const std::string budget =
      r.limit_bytes == 0 ? std::string("no --max-gpu-memory budget")
                         : str("a --max-gpu-memory budget of ", mib(r.limit_bytes), ", ",
                               mib(r.reserved_bytes), " of it held");
  return str("out of GPU memory on cuda:", r.device, r.scope.empty() ? "" : " during ", r.scope,
             ": tried to allocate ", mib(r.requested_bytes),
             r.tensor.empty() ? std::string() : str(" for a ", r.tensor, " tensor"), " (",
             mib(r.allocated_bytes), " allocated, ", budget, ", ", mib(r.free_bytes), " free of ",
             mib(r.total_bytes), " on the device); ", kOutOfMemoryHelp);
}

MemoryScope::MemoryScope(const std::string& what) : saved_(t_scope) {
  t_scope = saved_.empty() ? what : str(saved_, ", ", what);
}

MemoryScope::~MemoryScope() { t_scope = std::move(saved_); }

void set_memory_stage(const std::string& stage) { t_stage = stage; }

std::string memory_scope() {
  if (t_stage.empty() || t_scope.empty()) return t_stage.empty() ? t_scope : t_stage;
  return str(t_stage, ", ", t_scope);
}

}  // namespace ltx
