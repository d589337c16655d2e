#include "ops/dispatch.h"

namespace ltx::ops {

void unsupported_on(const char* op, Device d) {
  fail(op, ": not available on ", d.str(),
       d.is_cuda() && !LTX_WITH_CUDA ? " (this build has no CUDA backend)" : " yet",
       "; run it on the CPU (--device cpu)");
}

void unreachable_device(const char* op) { fail(op, ": unknown device type"); }

}  // namespace ltx::ops
