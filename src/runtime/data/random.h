// Portable random helpers for the data layer (synthetic data, shuffling).
// std::mt19937_64's output is fixed by the standard, but the std distributions are not, so the
// conversions to indices, uniforms and normals are written here to give the same data everywhere.
#pragma once
#include <cmath>
#include <cstdint>
#include <random>
#include <numeric>
#include <utility>
#include <vector>

namespace trident::data {

// One step of SplitMix64: a strong 64-bit mixer used to derive independent seeds.
inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// Seed for stream `stream` (an epoch, a purpose tag, ...) of the generator family `seed`.
inline uint64_t derive_seed(uint64_t seed, uint64_t stream) {
  return splitmix64(splitmix64(seed) ^ splitmix64(stream + 0x632BE59BD9B4E019ULL));
}

// Uniform integer in [0, bound), bound >= 1, without modulo bias (rejection sampling).
inline uint64_t uniform_below(std::mt19937_64& rng, uint64_t bound) {
  const uint64_t threshold = (0 - bound) % bound;  // 2^64 mod bound
  uint64_t x = rng();
  while (x < threshold) x = rng();
  return x % bound;
}

// Uniform double in [0, 1) from the top 53 bits.
inline double uniform01(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

// Standard normal sample by the Box-Muller transform (one of the pair is used).
inline double standard_normal(std::mt19937_64& rng) {
  const double u1 = 1.0 - uniform01(rng);  // in (0, 1], so log is finite
  const double u2 = uniform01(rng);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * 3.14159265358979323846 * u2);
}

// Fisher-Yates shuffle of v[0..n), driven only by rng's raw output.
template <typename T>
void fisher_yates(T* v, int64_t n, std::mt19937_64& rng) {
  for (int64_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(uniform_below(rng, static_cast<uint64_t>(i) + 1));
    if (j != i) std::swap(v[i], v[j]);
  }
}

// The sample order of `epoch` over `count` samples: 0, 1, … count - 1, Fisher-Yates shuffled by
// a generator seeded from (seed, epoch) when `shuffle`, so an epoch's order never depends on
// which epochs came before it.
inline std::vector<int64_t> epoch_order(int64_t count, bool shuffle, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(static_cast<size_t>(count));
  std::iota(order.begin(), order.end(), int64_t{0});
  if (shuffle) {
    std::mt19937_64 rng(derive_seed(seed, static_cast<uint64_t>(epoch)));
    fisher_yates(order.data(), count, rng);
  }
  return order;
}

}  // namespace trident::data
