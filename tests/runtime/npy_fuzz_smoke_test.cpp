// Bounded smoke run of fuzz/fuzz_npy.cpp in the regular suite: 3000 seeded mutations of valid
// .npy files (every version and dtype) must each be read or rejected with a trident::Error
// naming the input; whatever is read must survive npy_bytes → parse_npy unchanged.
#include <gtest/gtest.h>

#include <random>

#include "core/error.h"
#include "runtime/npy.h"
#include "support/mutate.h"

using namespace trident;
using namespace trident::runtime;

namespace {

std::vector<std::string> seeds() {
  auto t = [](Shape s, DType d) {
    return HostTensor{s, d, std::vector<std::byte>(numel(s) * dtype_size(d), std::byte{0x41})};
  };
  std::vector<std::string> v = {npy_bytes(t({3}, DType::f32)), npy_bytes(t({2, 2}, DType::f64)),
                                npy_bytes(t({}, DType::i32)), npy_bytes(t({0}, DType::f32)),
                                npy_bytes(t({1, 2, 2, 2}, DType::f32))};
  // Versions 2.0 and 3.0 have a 4-byte header length; the writer uses them only for long headers.
  for (char major : {'\x02', '\x03'}) {
    const std::string one = npy_bytes(t({2, 1}, DType::i32));
    const std::string len = one.substr(8, 2) + std::string(2, '\0');
    v.push_back(one.substr(0, 6) + major + '\0' + len + one.substr(10));
  }
  return v;
}

}  // namespace

TEST(NpyFuzzSmoke, MutatedFilesAreReadOrRejected) {
  const auto base = seeds();
  for (const std::string& s : base) ASSERT_NO_THROW(parse_npy(s.data(), s.size(), "seed"));
  std::mt19937_64 rng(20261201);
  int accepted = 0, rejected = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string b = base[i % base.size()];
    test_support::mutate(b, rng, /*header=*/128);
    try {
      const HostTensor t = parse_npy(b.data(), b.size(), "mutant");
      const std::string again = npy_bytes(t);
      const HostTensor back = parse_npy(again.data(), again.size(), "re-encoded");
      ASSERT_EQ(back.shape, t.shape);
      ASSERT_EQ(back.dtype, t.dtype);
      ASSERT_EQ(back.data, t.data);
      ++accepted;
    } catch (const Error& e) {
      ASSERT_NE(std::string(e.what()).find("mutant"), std::string::npos) << e.what();
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 1000);
  EXPECT_GT(accepted, 100);
}
