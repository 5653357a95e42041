// Op cases of quantize_dequantize (ops/quantize.cpp) outside an int8 convolution, as an imported
// QDQ model has it: per tensor on the s8 and u8 grids, with and without a zero point, scales that
// put part of the uniform draw past the grid's ends (saturation) and the negative values below
// an unsigned grid's 0. Per element: the cpu kernel and cpu_ref round with one formula.
#include "support/op_cases/family.h"

namespace trident::test_support::op_family {

void add_quantize_cases(std::vector<OpCase>& cases) {
  struct Grid {
    const char* name;
    double scale;
    bool is_unsigned;
    int64_t zero_point;
  };
  const Grid grids[] = {
      {"s8", 0.6 / 127, false, 0},     {"u8", 0.7 / 255, true, 0},     {"s8_zero_point_minus128", 0.8 / 255, false, -128},
      {"u8_zero_point_128", 0.5 / 127, true, 128}, {"s8_zero_point_9", 0.9 / 255, false, 9},
  };
  for (const Grid& q : grids)
    for (const Shape& s : {Shape{2, 5, 7, 8}, Shape{3, 1001}}) {
      cases.push_back(per_element_case("quantize_dequantize_" + std::string(q.name) + "_" + tag(s), [=](DType d) {
        ir::Graph g;
        const int x = g.add_input("x", s, d);
        g.add_node1("quantize_dequantize", {x},
                    {{"scale", q.scale}, {"unsigned", int64_t{q.is_unsigned}}, {"zero_point", q.zero_point}}, "y");
        return g;
      }));
      cases.back().backends = {"cpu", "cpu_ref"};
    }
}

}  // namespace trident::test_support::op_family
