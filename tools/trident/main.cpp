// The `trident` command line: sub-commands train, info, explain, infer, bench, export and quantize. Every failure ends in one sentence
// on stderr and a non-zero exit: 1 for bad input, 2 for an internal error.
#include <iostream>
#include <map>
#include <new>

#include "commands.h"
#include "core/error.h"

int main(int argc, char** argv) {
  CLI::App app{"trident: compiles convolutional networks with fused Conv+BN+ReLU and trains them"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "trident 0.1.0");
  std::map<CLI::App*, trident::cli::RunSubcommand> commands;
  commands[nullptr] = trident::cli::add_train_command(app);
  commands[app.get_subcommand("train")] = std::move(commands[nullptr]);
  commands[nullptr] = trident::cli::add_info_command(app);
  commands[app.get_subcommand("info")] = std::move(commands[nullptr]);
  commands[nullptr] = trident::cli::add_explain_command(app);
  commands[app.get_subcommand("explain")] = std::move(commands[nullptr]);
  commands[nullptr] = trident::cli::add_infer_command(app);
  commands[app.get_subcommand("infer")] = std::move(commands[nullptr]);
  commands[nullptr] = trident::cli::add_bench_command(app);
  commands[app.get_subcommand("bench")] = std::move(commands[nullptr]);
  commands[nullptr] = trident::cli::add_export_command(app);
  commands[app.get_subcommand("export")] = std::move(commands[nullptr]);
  commands[nullptr] = trident::cli::add_quantize_command(app);
  commands[app.get_subcommand("quantize")] = std::move(commands[nullptr]);
  commands.erase(nullptr);
  if (argc > 1 && argv[1][0] != '-') {
    bool known = false;
    std::string names;
    for (auto& [sub, run] : commands) {
      known = known || sub->get_name() == argv[1];
      names += (names.empty() ? "" : ", ") + sub->get_name();
    }
    if (!known) {
      std::cerr << "trident: error: unknown command '" << argv[1] << "' (commands: " << names << ")\n";
      return 1;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help and --version
    // A usage error is one sentence like any other, naming where the help is.
    std::string where = "trident";
    for (auto& [sub, run] : commands)
      if (sub->parsed()) where += " " + sub->get_name();
    std::cerr << "trident: error: " << e.what() << " (see '" << where << " --help')\n";
    return 1;
  }
  try {
    for (auto& [sub, run] : commands)
      if (sub->parsed()) return run();
  } catch (const trident::Error& e) {
    std::cerr << "trident: error: " << e.what() << "\n";
    return 1;
  } catch (const std::bad_alloc&) {
    std::cerr << "trident: error: out of memory; try a smaller --batch\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "trident: internal error: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
