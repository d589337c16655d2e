#include "parity/parity.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/log.h"
#include "io/safetensors.h"

namespace ltx::parity {

ErrorStats compare(const Tensor& x, const Tensor& ref) {
  LTX_CHECK(x.shape() == ref.shape(), "shape ", x.shape().str(), " differs from the reference's ",
            ref.shape().str());
  const auto a = x.to_double_vector(), b = ref.to_double_vector();
  double diff2 = 0, ref2 = 0, max_abs = 0, max_ref = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = a[i] - b[i];
    diff2 += d * d;
    ref2 += b[i] * b[i];
    max_abs = std::max(max_abs, std::fabs(d));
    max_ref = std::max(max_ref, std::fabs(b[i]));
    if (std::isnan(d)) max_abs = NAN;
  }
  ErrorStats s;
  s.max_abs = max_abs;
  s.rel_l2 = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
  s.max_rel = max_ref > 0 ? max_abs / max_ref : max_abs;
  return s;
}

Run::Run(Args args) : args_(std::move(args)) {
  LTX_CHECK(!args_.inputs.empty(), "parity: --inputs is required");
  LTX_CHECK(!args_.out.empty(), "parity: --out is required");
  io_ = io::SafetensorsFile::open(args_.inputs);
}

Tensor Run::tensor(const std::string& name, DType dtype) const {
  LTX_CHECK(io_->contains(name), "parity: the io file '", io_->path(), "' has no tensor '", name,
            "'");
  return io_->tensor(name).to(dtype).contiguous();
}

std::vector<std::string> Run::names_with_prefix(const std::string& prefix) const {
  std::vector<std::string> out;
  for (const auto& n : io_->names())
    if (n.rfind(prefix, 0) == 0) out.push_back(n);
  return out;
}

void Run::emit(const std::string& name, const Tensor& value) {
  LTX_CHECK(value.defined(), "parity: output '", name, "' is undefined");
  Tensor host = value.to(Device::cpu()).contiguous();
  for (auto& [n, t] : outputs_)
    if (n == name) {
      t = host;
      return;
    }
  outputs_.emplace_back(name, host);
}

int Run::finish() {
  io::write_safetensors(args_.out, outputs_, {{"inputs", args_.inputs}});
  std::printf("%-52s %12s %12s %12s\n", "output", "max_abs", "rel_l2", "max_rel");
  for (const auto& [name, t] : outputs_) {
    if (!io_->contains(name)) {
      std::printf("%-52s %38s\n", name.c_str(), "(no reference)");
      continue;
    }
    Tensor ref = io_->tensor(name);
    if (ref.shape() != t.shape()) {
      std::printf("%-52s shape %s, reference %s\n", name.c_str(), t.shape().str().c_str(),
                  ref.shape().str().c_str());
      continue;
    }
    const ErrorStats s = compare(t, ref);
    std::printf("%-52s %12.3e %12.3e %12.3e\n", name.c_str(), s.max_abs, s.rel_l2, s.max_rel);
  }
  std::vector<std::string> missing;
  for (const auto& n : names_with_prefix("out.")) {
    const bool done = std::any_of(outputs_.begin(), outputs_.end(),
                                  [&](const auto& o) { return o.first == n; });
    if (!done) missing.push_back(n);
  }
  if (!missing.empty()) {
    std::printf("not computed (%zu):", missing.size());
    for (const auto& n : missing) std::printf(" %s", n.c_str());
    std::printf("\n");
  }
  std::printf("wrote %zu outputs to %s\n", outputs_.size(), args_.out.c_str());
  return 0;
}

}  // namespace ltx::parity
