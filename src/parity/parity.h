#pragma once
// The parity harness behind `ltx parity <component>` (see DEVELOPERS.md): a component reads the
// `in.*` tensors of a reference io file, computes every `out.*` tensor it knows, and the harness
// writes them under the same names, prints the error of each against the reference, and lists the
// reference outputs the component did not produce.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "io/safetensors.h"
#include "quantization/mode.h"

namespace ltx::parity {

struct Args {
  std::vector<std::string> weights;  // --weights (repeatable), in the order given
  std::string inputs;                // --inputs IO.safetensors
  std::string out;                   // --out OUT.safetensors
  Device device = Device::cpu();     // --device
  // --dtype: the weights' (and so the compute) dtype. bf16 needs --device cuda and a component that
  // supports it (transformer, diffusion-decoder, video-vae, upsampler, audio, text-encoder,
  // connector); f32 elsewhere.
  DType dtype = DType::F32;
  // --quantization (transformer only): the reference's policy applied to the weights at load.
  quantization::Mode quantization = quantization::Mode::None;
};

// Errors of one tensor against its reference, measured in double.
struct ErrorStats {
  double max_abs = 0;  // max |x - ref|
  double rel_l2 = 0;   // ||x - ref||_2 / ||ref||_2 (or ||x - ref||_2 when ref is all zeros)
  double max_rel = 0;  // max |x - ref| / max |ref|: the golden READMEs' measure
};
ErrorStats compare(const Tensor& x, const Tensor& ref);

class Run {
 public:
  explicit Run(Args args);

  const Args& args() const { return args_; }
  const io::SafetensorsFile& io() const { return *io_; }
  // Reference input/output tensor `name` of the io file as a CPU tensor of `dtype` (a copy when
  // the stored dtype differs). Throws naming the io file when it is absent.
  Tensor tensor(const std::string& name, DType dtype = DType::F32) const;
  bool has(const std::string& name) const { return io_->contains(name); }
  // Names in the io file starting with `prefix`, in file order.
  std::vector<std::string> names_with_prefix(const std::string& prefix) const;

  // Records a computed output (copied to the CPU); replaces one of the same name.
  void emit(const std::string& name, const Tensor& value);
  // Writes every emitted tensor to args().out, prints one line per output with its errors against
  // the io tensor of the same name (or "no reference"), then the `out.*` names of the io file that
  // were not produced. Returns the process exit code (0: it ran).
  int finish();

 private:
  Args args_;
  std::shared_ptr<const io::SafetensorsFile> io_;
  std::vector<std::pair<std::string, Tensor>> outputs_;
};

// A component: computes its outputs into `run`. Components are listed in components.cpp.
using Component = std::function<void(Run& run)>;
struct ComponentInfo {
  const char* name;
  const char* weights_help;  // what --weights must be, for --help and errors
  Component fn;
};
const std::vector<ComponentInfo>& components();

}  // namespace ltx::parity
