#include "cli/commands.h"
#include "core/error.h"

namespace ltx::cli {

Command add_inspect(CLI::App& app) {
  auto* sub = app.add_subcommand("inspect", "Describe checkpoint files (components, versions, dtypes)");
  auto files = std::make_shared<std::vector<std::string>>();
  sub->add_option("files", *files, "safetensors files")->required();
  return {sub, [files] () -> int { fail("inspect: not built yet"); }};
}

}  // namespace ltx::cli
