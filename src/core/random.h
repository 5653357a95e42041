// Deterministic random numbers that do not depend on the standard library's distributions
// (whose algorithms differ between implementations): splitmix64 bits, uniform and normal.
#pragma once
#include <cmath>
#include <cstdint>
#include <string_view>

namespace trident {

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  // Jumps over `n` draws of next(): the stream is a counter, so block b of a long fill can start
  // where a sequential fill would be (normal() takes two draws, uniform() one).
  void skip(uint64_t n) { state_ += n * 0x9E3779B97F4A7C15ull; }
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1).
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  double normal() {  // Box–Muller
    double u1 = uniform(), u2 = uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  uint64_t state_;
};

// store(i, x) for `n` normal draws of rng's stream, the values one sequential loop would draw,
// made in blocks on every host thread (a batch of 256 images is 38.5 M draws); rng then stands
// after them.
template <class Store>
void draw_normals(Rng& rng, int64_t n, Store store) {
  constexpr int64_t kBlock = int64_t{1} << 16;
  const Rng start = rng;
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < (n + kBlock - 1) / kBlock; ++b) {
    Rng r = start;
    r.skip(2 * static_cast<uint64_t>(b * kBlock));  // normal() takes two draws
    const int64_t end = n < (b + 1) * kBlock ? n : (b + 1) * kBlock;
    for (int64_t i = b * kBlock; i < end; ++i) store(i, r.normal());
  }
  rng.skip(2 * static_cast<uint64_t>(n));
}

// A stable 64-bit hash of a name, to give each tensor its own random stream.
inline uint64_t hash_name(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace trident
