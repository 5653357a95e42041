// Reference kernel of the fused `elementwise` op: interprets each output's program element
// by element, in the operand dtype's own arithmetic (f32 or f64), exactly as the unfused
// relu/add kernels would compute it.
#include <algorithm>

#include "backends/cpu_ref/kernels.h"
#include "core/error.h"
#include "ops/elementwise_program.h"

namespace trident::cpu_ref {

namespace {

struct Step {
  int add_input = -1;  // -1: relu
};

class ElementwiseKernel final : public Kernel {
 public:
  explicit ElementwiseKernel(const ir::Node& n) {
    for (const auto& prog : ops::parse_elementwise_programs(n.attrs.s("programs"))) {
      std::vector<Step> steps;
      for (const std::string& s : prog) steps.push_back({s == "relu" ? -1 : std::stoi(s.substr(4))});
      programs_.push_back(std::move(steps));
    }
  }

  void run(const KernelArgs& a) override {
    switch (a.in[0].dtype) {
      case DType::f32: return run_typed<float>(a);
      case DType::f64: return run_typed<double>(a);
      default: throw Error("node '" + a.node.name + "' (elementwise): unsupported dtype");
    }
  }

 private:
  template <class T>
  void run_typed(const KernelArgs& a) {
    const int64_t n = a.in[0].numel();
    const T* x = a.in[0].as<T>();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      const T xi = x[i];
      for (size_t o = 0; o < programs_.size(); ++o) {
        T v = xi;
        for (const Step& s : programs_[o]) v = s.add_input < 0 ? std::max(v, T(0)) : v + a.in[s.add_input].as<T>()[i];
        a.out[o].as<T>()[i] = v;
      }
    }
  }

  std::vector<std::vector<Step>> programs_;
};

}  // namespace

std::unique_ptr<Kernel> make_elementwise(const ir::Node& n, const ir::Graph&) {
  return std::make_unique<ElementwiseKernel>(n);
}

}  // namespace trident::cpu_ref
