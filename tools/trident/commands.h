// Sub-commands of the `trident` tool. Each adds its options to the CLI11 app and returns the
// function that runs it; main() owns error reporting, so commands just throw trident::Error.
#pragma once
#include <functional>

#include <CLI/CLI.hpp>

namespace trident::cli {

using Runner = std::function<int()>;

Runner add_train_command(CLI::App& app);
Runner add_info_command(CLI::App& app);
Runner add_explain_command(CLI::App& app);
Runner add_infer_command(CLI::App& app);
Runner add_bench_command(CLI::App& app);

}  // namespace trident::cli
