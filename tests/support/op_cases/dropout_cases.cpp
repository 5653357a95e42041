// Op cases of dropout's training kernels (ops/dropout.h): the mask from a random state of any
// bits, in every float dtype (the kept value 1/(1−p) rounded once to the mask's dtype, so the
// measure is Rounded: the same elements kept on every backend), on a 4-D activation and a
// ragged head's [N, F]; and the state's step counter, bit for bit.
#include "ops/dropout.h"
#include "support/op_cases/family.h"

namespace trident::test_support::op_family {
namespace {

// The random state: any 64 bits, a different pair for each draw.
void random_state(GraphRunner& r, const ir::Graph& g) {
  TensorView s = r.view(g.find_value("rng"));  // randomize() left labels in it: a seed of the draw
  Rng rng(hash_name("dropout state") + static_cast<uint64_t>(s.as<int32_t>()[0]) * 7 + static_cast<uint64_t>(s.as<int32_t>()[1]));
  for (int i = 0; i < 2; ++i) s.as<uint32_t>()[i] = static_cast<uint32_t>(rng.next() >> 32);
}

}  // namespace

void add_dropout_cases(std::vector<OpCase>& cases) {
  for (const Shape& s : {Shape{2, 5, 7, 8}, Shape{3, 1001}}) {
    for (double p : {0.2, 0.5}) {
      const std::string name = "dropout_mask_" + tag(s) + "_p" + std::to_string(static_cast<int>(p * 10));
      OpCase c = scaled_case(
          name,
          [=](DType d) {
            ir::Graph g;
            const int rng = g.add_state("rng", {2}, {}, DType::i32);
            g.add_node1("dropout_mask", {rng},
                        {{"p", p}, {"salt", int64_t{3}}, {"shape", s}, {"dtype", std::string(dtype_name(d))}}, "mask");
            return g;
          },
          41, kAllFloat, {"mask"});
      c.measure = Measure::Rounded;
      c.prepare = random_state;
      c.seeds = {41, 42};
      cases.push_back(std::move(c));
    }
  }
  // Per sample (stochastic depth): one draw for each sample's C values, [N,1,1,C].
  OpCase per_sample = scaled_case(
      "dropout_mask_per_sample_5x1x1x24",
      [](DType d) {
        ir::Graph g;
        const int rng = g.add_state("rng", {2}, {}, DType::i32);
        g.add_node1("dropout_mask", {rng},
                    {{"p", 0.3}, {"salt", int64_t{1}}, {"shape", Shape{5, 1, 1, 24}}, {"group", int64_t{24}},
                     {"dtype", std::string(dtype_name(d))}},
                    "mask");
        return g;
      },
      44, kAllFloat, {"mask"});
  per_sample.measure = Measure::Rounded;
  per_sample.prepare = random_state;
  cases.push_back(std::move(per_sample));
  OpCase advance = scaled_case(
      "rng_advance",
      [](DType d) {
        ir::Graph g;
        const int rng = g.add_state("rng", {2}, {}, DType::i32);
        const int mask = g.add_node1("dropout_mask", {rng},
                                     {{"p", 0.5}, {"shape", Shape{4, 3}}, {"dtype", std::string(dtype_name(d))}}, "mask");
        g.add_node("rng_advance", {rng, mask}, {}, "advance");
        return g;
      },
      43, {DType::f32}, {"mask", "advance"});
  advance.measure = Measure::Bits;
  advance.prepare = random_state;
  cases.push_back(std::move(advance));
}

}  // namespace trident::test_support::op_family
