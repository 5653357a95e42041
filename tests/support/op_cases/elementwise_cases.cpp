// Op cases of the element-wise family: relu, relu_backward, add, mul (same shape and per channel),
// clip, fill, the views, concat and the fused `elementwise` programs, on odd sizes. Within the
// tolerance table, and exactly (the reference rounded once to f32, f16 or bf16) over the 16-byte
// vector paths, their tails, and (on cuda) misaligned tensors' scalar paths.
#include "support/op_cases/family.h"

namespace trident::test_support::op_family {
namespace {

using ir::Attrs;

ir::Graph unary(const char* op, const Shape& s, DType d, const Attrs& a = {}) {
  ir::Graph g;
  g.add_node1(op, {g.add_input("x", s, d)}, a, "y");
  return g;
}

ir::Graph binary(const char* op, const char* a, const char* b, const Shape& sa, const Shape& sb, DType d,
                 const char* out = "y") {
  ir::Graph g;
  g.add_node1(op, {g.add_input(a, sa, d), g.add_input(b, sb, d)}, {}, out);
  return g;
}

// Two outputs sharing x0: relu(x0 + x1) + x2 and relu(x0).
ir::Graph program_graph(DType d, const Shape& s, const std::string& programs = "add:1,relu,add:2;relu") {
  ir::Graph g;
  const int x0 = g.add_input("x0", s, d), x1 = g.add_input("x1", s, d), x2 = g.add_input("x2", s, d);
  g.add_node("elementwise", {x0, x1, x2}, {{"programs", programs}}, "ew");
  return g;
}

}  // namespace

void add_elementwise_cases(std::vector<OpCase>& cases) {
  // Per element, two draws.
  for (const Shape& s : {Shape{2, 5, 5, 3}, Shape{7, 13}, Shape{1}}) {
    const std::string t = tag(s);
    cases.push_back(per_element_case("relu_" + t, [=](DType d) { return unary("relu", s, d); }));
    OpCase back = per_element_case("relu_backward_" + t,
                                   [=](DType d) { return binary("relu_backward", "y", "dy", s, s, d, "dx"); });
    back.prepare = [](GraphRunner& r, const ir::Graph& g) { map_values(r, g, {"y"}, non_negative); };
    cases.push_back(std::move(back));
    cases.push_back(per_element_case("add_" + t, [=](DType d) { return binary("add", "x", "z", s, s, d); }));
  }
  const char* programs[] = {"relu", "add:1", "add:1,relu", "relu;add:1", "add:1,relu;relu,add:2;add:2,add:1,relu"};
  for (const Shape& s : {Shape{2, 5, 5, 3}, Shape{7, 13}})
    for (size_t p = 0; p < std::size(programs); ++p) {
      const std::string program = programs[p];
      const std::string name = "elementwise_program" + std::to_string(p + 1) + "_" + tag(s);
      cases.push_back(per_element_case(name, [=](DType d) { return program_graph(d, s, program); }));
      cases.push_back(decomposition_case(name, [=](DType d) { return program_graph(d, s, program); }));
    }
  cases.push_back(per_element_case("fill_3x4", [](DType) {
    ir::Graph g;
    g.add_node1("fill", {}, {{"shape", std::vector<int64_t>{3, 4}}, {"value", 2.5}}, "seed");
    return g;
  }));
  // Views: aliased (a no-op) and in separate buffers (a copy).
  for (bool separate : {false, true}) {
    const std::string mode = separate ? "_separate" : "";
    OpCase f = per_element_case("flatten" + mode, [](DType d) { return unary("flatten", {2, 3, 4, 5}, d); });
    OpCase r = per_element_case("reshape" + mode, [](DType d) {
      return unary("reshape", {2, 3, 4, 5}, d, {{"shape", std::vector<int64_t>{6, 20}}});
    });
    f.separate_outputs = r.separate_outputs = separate;
    cases.push_back(std::move(f));
    cases.push_back(std::move(r));
  }

  // Relative to the tensor's scale, in f32 and f16 (and bf16 for add), odd sizes.
  const std::vector<Shape> shapes = {{2, 5, 7, 3}, {1, 1, 1, 10}, {3, 17, 19, 33}, {1, 1, 1, 300007}};
  for (const Shape& s : shapes) {
    const std::string t = tag(s);
    cases.push_back(scaled_case(
        "relu_scaled_" + t, [=](DType d) { return unary("relu", s, d); }, 1, kF32F16));
    cases.push_back(scaled_case(
        "relu_backward_scaled_" + t, [=](DType d) { return binary("relu_backward", "y", "dy", s, s, d, "dx"); }, 2,
        kF32F16));
    cases.push_back(scaled_case(
        "add_scaled_" + t, [=](DType d) { return binary("add", "a", "b", s, s, d); }, 3, kAllFloat));
    cases.push_back(
        scaled_case("mul_" + t, [=](DType d) { return binary("mul", "a", "b", s, s, d); }, 4, {DType::f32}));
    cases.push_back(scaled_case("mul_per_channel_" + t,
                                [=](DType d) { return binary("mul", "a", "b", s, {s.back()}, d); }, 4, {DType::f32}));
    cases.push_back(scaled_case(
        "elementwise_program_scaled_" + t, [=](DType d) { return program_graph(d, s); }, 9, kF32F16));
  }
  const std::pair<const char*, Attrs> bounds[] = {
      {"0_0.5", {{"min", 0.0}, {"max", 0.5}}}, {"min_only", {{"min", -0.25}}}, {"max_only", {{"max", 0.3}}}};
  for (const auto& [name, attrs] : bounds) {
    const Attrs a = attrs;
    cases.push_back(scaled_case(
        std::string("clip_") + (name[0] == '0' ? "both" : name),
        [=](DType d) {
          return unary("clip", {3, 7, 5, 10}, d, a);
        },
        5, kF32F16));
  }
  for (const char* dtype : {"f32", "i32"}) {
    const std::string dt = dtype;
    OpCase c = scaled_case(
        "fill_" + dt + "_3x1001",
        [=](DType) {
          ir::Graph g;
          g.add_node1("fill", {}, {{"shape", std::vector<int64_t>{3, 1001}}, {"value", 2.0}, {"dtype", dt}}, "y");
          return g;
        },
        6, {DType::f32});
    if (dt == "i32") c.backends = {"cuda"};  // the cpu backend writes f32 only (and says so)
    cases.push_back(std::move(c));
  }
  cases.push_back(scaled_case("flatten_then_reshape",
                              [](DType d) {
                                ir::Graph g;
                                const int f = g.add_node1("flatten", {g.add_input("x", {4, 3, 5, 7}, d)}, {}, "flat");
                                g.add_node1("reshape", {f}, {{"shape", std::vector<int64_t>{4, 35, 3}}}, "y");
                                return g;
                              },
                              7, {DType::f32}, {"flat", "y"}));
  cases.push_back(scaled_case(
      "concat_channels",
      [](DType d) {
        ir::Graph g;
        const int a = g.add_input("a", {2, 9, 11, 3}, d), b = g.add_input("b", {2, 9, 11, 10}, d),
                  c = g.add_input("c", {2, 9, 11, 1}, d);
        g.add_node1("concat", {a, b, c}, {}, "y");
        return g;
      },
      8, kF32F16));

  // Exact: one rounding of the reference, over vector paths and tails. Element counts: fewer than
  // one vector (a tail only), 210 (a tail of two), odd, whole vectors of a real activation, a large
  // odd count.
  using Build = std::function<ir::Graph(DType, const Shape&)>;
  const std::pair<const char*, Build> ops[] = {
      {"relu", [](DType d, const Shape& s) { return unary("relu", s, d); }},
      {"relu_backward", [](DType d, const Shape& s) { return binary("relu_backward", "y", "dy", s, s, d, "dx"); }},
      {"add", [](DType d, const Shape& s) { return binary("add", "a", "b", s, s, d); }},
      {"mul", [](DType d, const Shape& s) { return binary("mul", "a", "b", s, s, d); }},
      {"mul_per_channel", [](DType d, const Shape& s) { return binary("mul", "a", "b", s, {s.back()}, d); }},
      {"clip",
       [](DType d, const Shape& s) {
         return unary("clip", s, d, {{"min", -0.25}, {"max", 0.5}});
       }},
      {"elementwise_program", [](DType d, const Shape& s) { return program_graph(d, s); }},
  };
  auto exact = [&](const std::string& what, const Build& build, const Shape& s, uint64_t seed, int64_t misalign) {
    OpCase c = scaled_case(
        "exact_" + what + "_" + tag(s) + (misalign ? "_misaligned" + std::to_string(misalign) : ""),
        [=](DType d) { return build(d, s); }, seed, kAllFloat);
    c.measure = Measure::Rounded;
    c.misalign = misalign;
    if (misalign) c.backends = {"cuda"};  // alignment is a property of device memory
    cases.push_back(std::move(c));
  };
  for (const auto& [name, build] : ops) {
    for (const Shape& s :
         std::vector<Shape>{{1, 1, 1, 7}, {2, 5, 7, 3}, {3, 17, 19, 33}, {8, 56, 56, 64}, {1, 1, 1, 300007}})
      exact(name, build, s, 21, 0);
    // Tensors one and three elements past 16-byte alignment: every kernel's scalar path.
    for (const Shape& s : std::vector<Shape>{{2, 5, 7, 3}, {2, 4, 4, 64}})
      for (int64_t misalign : {1, 3}) exact(name, build, s, 22, misalign);
  }
  // Per-channel mul: C a multiple of the vector width (vector path) or not (C = 3, 12, 20: the
  // scalar path in f16/bf16; 12 and 20 are whole f32 vectors), many rows or a single row.
  const Build mul_per_channel = ops[4].second;
  for (const Shape& s : std::vector<Shape>{
           {2, 5, 7, 3}, {4, 6, 6, 12}, {2, 9, 9, 20}, {8, 56, 56, 64}, {3, 1, 1, 2048}, {1, 1, 1, 300008}}) {
    OpCase c = scaled_case(
        "exact_mul_per_channel_paths_" + tag(s), [=](DType d) { return mul_per_channel(d, s); }, 23, kAllFloat);
    c.measure = Measure::Rounded;
    cases.push_back(std::move(c));
  }
}

}  // namespace trident::test_support::op_family
