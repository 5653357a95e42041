// Op cases of the precision casts, bit for bit against cpu_ref's host conversions: every direction
// between f32, f16 and bf16, with the delicate values (the f16 and bf16 limits, overflow to
// infinity, subnormals, halfway cases) planted in whole vectors and tails; fewer elements than one
// vector; misaligned device tensors; and cast_group over more tensors than one launch's table
// (kCastGroupSpans = 64), each equal to the single cast.
#include <limits>

#include "core/half.h"
#include "support/op_cases/family.h"

namespace trident::test_support::op_family {
namespace {

// Values where rounding is delicate, as f32: the f16 and bf16 limits, overflow, subnormals, signed
// zero, infinities, and halfway cases between neighbouring f16 and bf16 values.
std::vector<float> special_values() {
  const float inf = std::numeric_limits<float>::infinity();
  return {65504.f,
          65519.f,
          65520.f,
          -65536.f,
          6.0e-8f,
          2.9e-8f,
          1.0e-5f,
          -3.0e-5f,
          -0.f,
          inf,
          -inf,
          1.0e-40f,
          3.3e38f,
          -3.4e38f,
          1.00048828125f /* 1 + 2^-11, f16 halfway: to even */,
          1.00146484375f /* 1 + 3·2^-11 */,
          1.00390625f /* 1 + 2^-8, bf16 halfway */,
          1.01171875f /* 1 + 3·2^-8 */,
          70000.f,
          1.0e-30f};
}

// Every fifth element of x becomes a special value (converted to x's dtype), so they land in whole
// vectors and in the tail alike.
void plant_special_values(GraphRunner& r, const ir::Graph& g) {
  TensorView x = r.view(g.find_value("x"));
  const std::vector<float> special = special_values();
  for (int64_t i = 0, k = 0; i < x.numel(); i += 5, ++k) {
    const float v = special[static_cast<size_t>(k) % special.size()];
    if (x.dtype == DType::f32) x.as<float>()[i] = v;
    else if (x.dtype == DType::f16) x.as<uint16_t>()[i] = float_to_half(v);
    else x.as<uint16_t>()[i] = float_to_bf16(v);
  }
}

const DType kDtypes[] = {DType::f32, DType::f16, DType::bf16};

// A bitwise case whose graph holds `from` inputs (the case's dtype) and `to` outputs.
OpCase bits(std::string name, DType from, std::function<ir::Graph(DType)> build, uint64_t seed) {
  OpCase c;
  c.name = std::move(name);
  c.build = std::move(build);
  c.dtypes = {from};
  c.measure = Measure::Bits;
  c.reference = Reference::SameDtype;
  c.seeds = {seed};
  return c;
}

}  // namespace

void add_cast_cases(std::vector<OpCase>& cases) {
  for (DType from : kDtypes)
    for (DType to : kDtypes) {
      if (from == to) continue;
      const std::string pair = std::string(dtype_name(from)) + "_to_" + std::string(dtype_name(to));
      auto cast_graph = [to](const Shape& s) {
        return [=](DType d) {
          ir::Graph g;
          g.add_node1("cast", {g.add_input("x", s, d)}, {{"dtype", std::string(dtype_name(to))}}, "y");
          return g;
        };
      };
      for (const Shape& s : std::vector<Shape>{{5}, {8}, {3, 67}, {8, 56, 56, 64}, {1000003}}) {
        OpCase c = bits("cast_" + pair + "_" + tag(s), from, cast_graph(s), 31);
        c.prepare = plant_special_values;
        cases.push_back(std::move(c));
      }
      // Misaligned device tensors: the scalar path (alignment is a property of device memory).
      for (const Shape& s : std::vector<Shape>{{7}, {3, 67}, {2, 9, 9, 64}})
        for (int64_t misalign : {1, 2}) {
          OpCase c =
              bits("cast_" + pair + "_" + tag(s) + "_misaligned" + std::to_string(misalign), from, cast_graph(s), 31);
          c.prepare = plant_special_values;
          c.misalign = misalign;
          c.backends = {"cuda"};
          cases.push_back(std::move(c));
        }
      // cast_group: 70 tensors from one element to more than a million in one node; the reference
      // casts them one by one.
      cases.push_back(bits(
          "cast_group_" + pair, from,
          [to](DType d) {
            ir::Graph g;
            std::vector<int> in;
            for (int k = 0; k < 70; ++k)
              in.push_back(g.add_input("x" + std::to_string(k), {k == 3 ? 1000003 : 1 + 37 * k}, d));
            g.add_node("cast_group", in, {{"dtype", std::string(dtype_name(to))}}, "group");
            return g;
          },
          33));
    }
}

}  // namespace trident::test_support::op_family
