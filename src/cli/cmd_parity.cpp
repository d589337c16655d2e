// `ltx parity <component> --weights F [--weights F2 ...] --inputs IO --out OUT [--device cpu|cuda]
// [--dtype f32|bf16] [--quantization MODE]`
#include <memory>
#include <set>
#include <string>

#include "cli/commands.h"
#include "cli/model_flags.h"
#include "core/error.h"
#include "parity/parity.h"

namespace ltx::cli {

Command add_parity(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "parity", "Run one component on a reference io file and report its errors (DEVELOPERS.md)");
  struct Opts {
    std::string component, device = "cpu", dtype = "f32", quantization = "none";
    parity::Args args;
  };
  auto o = std::make_shared<Opts>();
  std::string names;
  for (const auto& c : parity::components()) names += std::string(names.empty() ? "" : ", ") + c.name;
  sub->add_option("component", o->component, "One of: " + names)->required();
  sub->add_option("--weights", o->args.weights, "Weights file(s) of the component (repeatable)");
  sub->add_option("--inputs", o->args.inputs, "Reference io .safetensors file")->required();
  sub->add_option("--out", o->args.out, "Where to write the computed out.* tensors")->required();
  sub->add_option("--device", o->device, "cpu or cuda[:N]");
  sub->add_option("--dtype", o->dtype,
                  "f32 (default) or bf16: load the weights in this dtype and compute in it "
                  "(bf16: transformer, diffusion-decoder, video-vae, upsampler, audio, "
                  "text-encoder or connector, with --device cuda only)");
  add_quantization_flag(sub, o->quantization);
  return {sub, [o]() -> int {
            o->args.device = parse_device(o->device, "--device");
            o->args.quantization = quantization::parse_mode(o->quantization);
            LTX_CHECK(o->args.quantization == quantization::Mode::None ||
                          o->component == "transformer",
                      "parity ", o->component, ": --quantization applies to the transformer only "
                      "(the reference quantizes no other component)");
            LTX_CHECK(o->dtype == "f32" || o->dtype == "bf16", "parity: --dtype must be f32 or bf16, got '",
                      o->dtype, "'");
            if (o->dtype == "bf16") {
              LTX_CHECK(o->args.device.is_cuda(), "parity: --dtype bf16 needs --device cuda (the CPU ",
                        "backend computes in f32 only)");
              static const std::set<std::string> kBf16 = {
                  "transformer", "diffusion-decoder", "video-vae", "upsampler",
                  "audio",       "text-encoder",      "connector"};
              LTX_CHECK(kBf16.contains(o->component), "parity ", o->component,
                        ": --dtype bf16 is supported for the transformer, the diffusion decoder, "
                        "the video VAE, the upsamplers, the audio VAE, the text encoder and the "
                        "connectors only");
              o->args.dtype = DType::BF16;
            }
            for (const auto& c : parity::components()) {
              if (o->component != c.name) continue;
              LTX_CHECK(!o->args.weights.empty(), "parity ", c.name, ": --weights is required (",
                        c.weights_help, ")");
              parity::Run run(o->args);
              c.fn(run);
              return run.finish();
            }
            std::string names;
            for (const auto& c : parity::components())
              names += std::string(names.empty() ? "" : ", ") + c.name;
            fail("parity: unknown component '", o->component, "' (known: ",
                 names.empty() ? "none yet" : names, ")");
          }};
}

}  // namespace ltx::cli
