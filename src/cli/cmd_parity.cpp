// `ltx parity <component> --weights F [--weights F2 ...] --inputs IO --out OUT [--device cpu|cuda]`
#include <memory>

#include "cli/commands.h"
#include "core/error.h"
#include "parity/parity.h"

namespace ltx::cli {

Command add_parity(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "parity", "Run one component on a reference io file and report its errors (DEVELOPERS.md)");
  struct Opts {
    std::string component, device = "cpu";
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
  return {sub, [o]() -> int {
            o->args.device = parse_device(o->device, "--device");
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
