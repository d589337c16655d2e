// `ltx`: one binary for every entry point. Errors print on one line to stderr, exit code 1.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <vector>

#include "cli/commands.h"
#include "core/env_settings.h"
#include "core/error.h"
#include "core/log.h"
#include "profiling/op_profiler.h"

int main(int argc, char** argv) {
  CLI::App app{"ltx: native inference for the LTX-2.x audio-video diffusion models"};
  app.set_version_flag("--version", std::string("ltx ") + LTX_VERSION_STRING);
  app.require_subcommand(1);
  bool quiet = false;
  app.add_flag("-q,--quiet", quiet, "Only print warnings and errors");
  app.add_flag_callback(
      "--help-env",
      [] {
        std::fputs(ltx::env::describe_variables().c_str(), stdout);
        throw CLI::Success();
      },
      "List the environment variables ltx reads and exit");

  const std::vector<ltx::cli::Command> commands = {
      ltx::cli::add_generate(app),
      ltx::cli::add_bench(app),
      ltx::cli::add_inspect(app),
      ltx::cli::add_parity(app),
      ltx::cli::add_tokenize(app),
      ltx::cli::add_serve(app),
      ltx::cli::add_pull(app),
      ltx::cli::add_models(app),
      ltx::cli::add_quantize(app),
      ltx::cli::add_convert(app),
  };

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (quiet) ltx::set_log_level(ltx::LogLevel::Warn);
  try {
    // Every variable is checked before any work, so a bad one fails at once.
    const ltx::env::Settings& settings = ltx::env::settings();
    for (const std::string& name : ltx::env::unknown_variables(ltx::env::environment_names()))
      ltx::log_warn(name, " is set, but ltx reads no such variable (a typo, or a removed knob?); "
                          "`ltx --help-env` lists those it reads");
    ltx::profiling::install_op_profiler(settings.op_profiling);
    for (const auto& c : commands)
      if (c.sub->parsed()) return c.run();
  } catch (const ltx::Error& e) {
    std::fprintf(stderr, "ltx: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ltx: internal error: %s\n", e.what());
    return 2;
  }
  return 0;
}
