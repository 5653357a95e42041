// Sub-commands of the `trident` tool. Each adds its options to the CLI11 app and returns the
// function that runs it; main() owns error reporting, so commands just throw trident::Error.
#pragma once
#include <functional>

#include <CLI/CLI.hpp>

namespace trident::cli {

// What runs a sub-command once its flags are parsed: returns the exit status.
using RunSubcommand = std::function<int()>;

RunSubcommand add_train_command(CLI::App& app);
RunSubcommand add_info_command(CLI::App& app);
RunSubcommand add_explain_command(CLI::App& app);
RunSubcommand add_infer_command(CLI::App& app);
RunSubcommand add_bench_command(CLI::App& app);
RunSubcommand add_export_command(CLI::App& app);
RunSubcommand add_quantize_command(CLI::App& app);

}  // namespace trident::cli
