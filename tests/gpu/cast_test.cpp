// The cuda backend's cast against cpu_ref, bit for bit: every direction between f32, f16 and
// bf16 rounds to nearest even exactly like the host conversions, including overflow to
// infinity, subnormals and halfway cases; over whole 16-byte vectors, tails of fewer than
// eight elements, fewer elements than one vector, and misaligned tensors (the scalar path).
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/half.h"
#include "ir/graph.h"
#include "support/gpu_compare.h"

namespace trident {
namespace {

ir::Graph cast_graph(DType from, DType to, const Shape& s) {
  ir::Graph g;
  g.add_node1("cast", {g.add_input("x", s, from)}, {{"dtype", std::string(dtype_name(to))}}, "y");
  return g;
}

// Values where rounding is delicate, as f32: the f16 and bf16 limits, overflow, subnormals,
// signed zero, infinities, and halfway cases between neighbouring f16 and bf16 values.
std::vector<float> special_values() {
  const float inf = std::numeric_limits<float>::infinity();
  return {65504.f,    65519.f,   65520.f,     -65536.f,     6.0e-8f,    2.9e-8f,          1.0e-5f,
          -3.0e-5f,   -0.f,      inf,         -inf,         1.0e-40f,   3.3e38f,          -3.4e38f,
          1.00048828125f /* 1 + 2^-11, f16 halfway: to even */, 1.00146484375f /* 1 + 3·2^-11 */,
          1.00390625f /* 1 + 2^-8, bf16 halfway */, 1.01171875f /* 1 + 3·2^-8 */, 70000.f, 1.0e-30f};
}

// Every fifth element of x becomes a special value (converted to x's dtype), so they land in
// whole vectors and in the tail alike.
void plant_special_values(test_support::GraphRunner& r, const ir::Graph& g) {
  TensorView x = r.view(g.find_value("x"));
  const std::vector<float> special = special_values();
  for (int64_t i = 0, k = 0; i < x.numel(); i += 5, ++k) {
    const float v = special[static_cast<size_t>(k) % special.size()];
    if (x.dtype == DType::f32) x.as<float>()[i] = v;
    else if (x.dtype == DType::f16) x.as<uint16_t>()[i] = float_to_half(v);
    else x.as<uint16_t>()[i] = float_to_bf16(v);
  }
}

// Runs the cast on cuda (tensors `misalign` elements off alignment) and on cpu_ref from the
// same input bits, and compares the output bits.
void check_cast(DType from, DType to, const Shape& s, int64_t misalign) {
  const ir::Graph g = cast_graph(from, to, s);
  test_support::GraphRunner on_gpu(g, "cuda", misalign), on_ref(g, "cpu_ref");
  on_gpu.randomize(31);
  plant_special_values(on_gpu, g);
  const int x = g.find_value("x"), y = g.find_value("y");
  on_ref.copy_from(on_gpu, x, x);
  on_gpu.run();
  on_ref.run();
  const TensorView got = on_gpu.view(y), want = on_ref.view(y);
  ASSERT_EQ(got.bytes(), want.bytes());
  const size_t width = dtype_size(to);
  int reported = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const auto* a = static_cast<const std::byte*>(got.data) + i * width;
    const auto* b = static_cast<const std::byte*>(want.data) + i * width;
    if (std::memcmp(a, b, width) == 0) continue;
    ADD_FAILURE() << "y[" << i << "]: " << on_gpu.values(y)[static_cast<size_t>(i)] << " but the reference gives "
                  << on_ref.values(y)[static_cast<size_t>(i)] << " (input " << on_gpu.values(x)[static_cast<size_t>(i)]
                  << ")";
    if (++reported == 5) return;
  }
}

const DType kDtypes[] = {DType::f32, DType::f16, DType::bf16};

TEST(CudaCast, EveryDirectionIsBitExact) {
  TRIDENT_REQUIRE_GPU();
  for (DType from : kDtypes)
    for (DType to : kDtypes) {
      if (from == to) continue;
      for (const Shape& s : std::vector<Shape>{{5}, {8}, {3, 67}, {8, 56, 56, 64}, {1000003}}) {
        SCOPED_TRACE(std::string(dtype_name(from)) + " to " + std::string(dtype_name(to)) + " " + shape_str(s));
        check_cast(from, to, s, 0);
      }
    }
}

TEST(CudaCast, MisalignedTensorsAreBitExact) {
  TRIDENT_REQUIRE_GPU();
  for (DType from : kDtypes)
    for (DType to : kDtypes) {
      if (from == to) continue;
      for (const Shape& s : std::vector<Shape>{{7}, {3, 67}, {2, 9, 9, 64}})
        for (int64_t misalign : {1, 2}) {
          SCOPED_TRACE(std::string(dtype_name(from)) + " to " + std::string(dtype_name(to)) + " " + shape_str(s) +
                       " misaligned by " + std::to_string(misalign));
          check_cast(from, to, s, misalign);
        }
    }
}

// cast_group: many tensors of one dtype pair in one launch, each output bit for bit the
// single cast's (the reference backend casts pair by pair). More tensors than one launch's
// table (kCastGroupSpans = 64), and sizes from one element to more than a million.
TEST(CudaCast, GroupsEqualSingleCastsBitForBit) {
  TRIDENT_REQUIRE_GPU();
  for (DType from : kDtypes)
    for (DType to : kDtypes) {
      if (from == to) continue;
      SCOPED_TRACE(std::string(dtype_name(from)) + " to " + std::string(dtype_name(to)));
      ir::Graph g;
      std::vector<int> in;
      for (int k = 0; k < 70; ++k) in.push_back(g.add_input("x" + std::to_string(k), {k == 3 ? 1000003 : 1 + 37 * k}, from));
      const std::vector<int> out = g.add_node("cast_group", in, {{"dtype", std::string(dtype_name(to))}}, "group");
      test_support::GraphRunner on_gpu(g, "cuda"), on_ref(g, "cpu_ref");
      on_gpu.randomize(33);
      for (int x : in) on_ref.copy_from(on_gpu, x, x);
      on_gpu.run();
      on_ref.run();
      for (size_t k = 0; k < out.size(); ++k) {
        const TensorView got = on_gpu.view(out[k]), want = on_ref.view(out[k]);
        ASSERT_EQ(got.bytes(), want.bytes());
        EXPECT_EQ(std::memcmp(got.data, want.data, got.bytes()), 0) << "output " << k;
      }
    }
}

}  // namespace
}  // namespace trident
