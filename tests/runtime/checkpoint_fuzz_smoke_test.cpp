// Bounded smoke run of the safetensors fuzz target's idea inside the regular suite: 2000
// deterministic mutations (bit flips, byte edits, truncations, header-length edits) of valid
// files must each be read or rejected with trident::Error, never crash. fuzz/ runs it longer.
#include <gtest/gtest.h>

#include <random>

#include "core/error.h"
#include "runtime/checkpoint/safetensors.h"
#include "support/mutate.h"

using namespace trident;
using namespace trident::runtime;

namespace {

std::vector<std::vector<std::byte>> seeds() {
  auto t = [](Shape s, DType d) {
    return HostTensor{s, d, std::vector<std::byte>(numel(s) * dtype_size(d), std::byte{0x3c})};
  };
  return {encode_safetensors({{"conv.weight", t({4, 3, 3, 2}, DType::f32)}, {"bn.mean", t({4}, DType::f64)},
                              {"h", t({3}, DType::f16)}, {"b", t({2, 1}, DType::bf16)}, {"i", t({}, DType::i32)}},
                             {{"format", "trident-checkpoint-1"}, {"step", "12"}}),
          encode_safetensors({{"w", t({2}, DType::f32)}}, {}),
          encode_safetensors({}, {})};
}

}  // namespace

TEST(SafetensorsFuzzSmoke, MutatedFilesAreReadOrRejected) {
  const auto base = seeds();
  std::mt19937_64 rng(20240601);
  int accepted = 0, rejected = 0;
  for (int i = 0; i < 2000; ++i) {
    std::vector<std::byte> b = base[i % base.size()];
    test_support::mutate(b, rng, /*header=*/64);
    try {
      Metadata md;
      const WeightMap w = read_safetensors_from_memory(b, "mutant", &md);
      // Whatever was accepted must survive a write and a second read unchanged.
      const WeightMap again = read_safetensors_from_memory(encode_safetensors(w, md), "re-encoded");
      ASSERT_EQ(again.size(), w.size());
      for (const auto& [name, t] : w) ASSERT_EQ(again.at(name).data, t.data) << name;
      ++accepted;
    } catch (const Error& e) {
      ASSERT_NE(std::string(e.what()).find("mutant"), std::string::npos) << e.what();
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 1000);
  EXPECT_GT(accepted, 0);
}
