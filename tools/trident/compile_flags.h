// Flags every compiling sub-command shares: which passes to switch off and where to dump the
// IR after each pass. Unknown pass names are rejected by the pass manager with the list.
#pragma once
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

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

}  // namespace trident::cli
