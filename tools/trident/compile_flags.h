// Flags every compiling sub-command shares: which passes to switch off and where to dump the
// IR after each pass. Unknown pass names are rejected by the pass manager with the list.
#pragma once
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "backends/kernel.h"

namespace trident::cli {

struct CompileFlags {
  std::vector<std::string> disabled_passes;
  std::string dump_dir;
};

inline void add_compile_flags(CLI::App* sub, CompileFlags& f) {
  sub->add_option("--disable-pass", f.disabled_passes,
                  "Turn a pass off by name (repeatable), e.g. fuse_conv_bn_relu");
  sub->add_option("--dump-ir", f.dump_dir, "Write the graph after every pass into this directory");
}

// --backend: one of the backends this build registered (the kernel registry's list, so a
// new backend appears here without touching the commands).
inline void add_backend_option(CLI::App* sub, std::string& backend, const std::string& help) {
  sub->add_option("--backend", backend, help)
      ->check(CLI::IsMember(KernelRegistry::backends()))
      ->capture_default_str();
}

}  // namespace trident::cli
