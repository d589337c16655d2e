#pragma once
// Each `ltx <command>` lives in its own src/cli/cmd_<name>.cpp: add_<name>() creates the
// subcommand on `app` with its options and returns it with the function that runs it after
// parsing (its return value is the exit code). main.cpp lists them.
#include <CLI/CLI.hpp>
#include <functional>

namespace ltx::cli {

struct Command {
  CLI::App* sub = nullptr;
  std::function<int()> run;
};

Command add_generate(CLI::App& app);
Command add_bench(CLI::App& app);
Command add_inspect(CLI::App& app);
Command add_parity(CLI::App& app);
Command add_tokenize(CLI::App& app);
Command add_serve(CLI::App& app);
Command add_pull(CLI::App& app);
Command add_models(CLI::App& app);
Command add_quantize(CLI::App& app);
Command add_convert(CLI::App& app);

}  // namespace ltx::cli
