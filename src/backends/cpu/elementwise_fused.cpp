// The fused `elementwise` op on the "cpu" backend: an interpreter of the node's programs, one
// loop over the elements for the whole chain (oneDNN's post-op chains cannot express every
// program the fuse_elementwise pass builds). Each step rounds to f32 as the unfused relu/add
// kernels do, so the result is theirs; cpu_ref runs the op as its decomposition.
#include <algorithm>

#include "backends/cpu/kernels.h"
#include "backends/cpu/onednn_util.h"
#include "ops/elementwise_program.h"

namespace trident::cpu {

namespace {

class ElementwisePrograms final : public Kernel {
 public:
  ElementwisePrograms(const ir::Node& node, const ir::Graph& g) {
    expect_f32(node, g);
    for (const auto& prog : ops::parse_elementwise_programs(node.attrs.s("programs"))) {
      std::vector<int> steps;  // -1: relu, else the input added
      for (const std::string& s : prog) steps.push_back(s == "relu" ? -1 : std::stoi(s.substr(4)));
      programs_.push_back(std::move(steps));
    }
  }

  void run(const KernelArgs& a) override {
    const int64_t n = a.in[0].numel();
    const float* x = a.in[0].as<float>();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      const float xi = x[i];  // read before any output is written: an output may share x's buffer
      for (size_t o = 0; o < programs_.size(); ++o) {
        float v = xi;
        for (int s : programs_[o]) v = s < 0 ? std::max(v, 0.0f) : v + a.in[static_cast<size_t>(s)].as<float>()[i];
        a.out[o].as<float>()[i] = v;
      }
    }
  }

 private:
  std::vector<std::vector<int>> programs_;
};

}  // namespace

void register_elementwise_fused_kernels() { add_kernel<ElementwisePrograms>("elementwise"); }

}  // namespace trident::cpu
