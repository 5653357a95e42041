// Test support: the seeded mutator behind the readers' fuzz smoke tests, a bounded stand-in
// for libFuzzer in the regular suite. Edits are the ones that find reader bugs: bit flips,
// random bytes, truncations, inserted and spliced bytes, and digits changed in text headers.
#pragma once
#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <random>

namespace trident::test_support {

// Applies one to four edits to `b` (a std::string or a vector of bytes). With `header` > 0,
// half of the edits land in the first `header` bytes, where the sizes and offsets are.
template <class Bytes>
void mutate(Bytes& b, std::mt19937_64& rng, size_t header = 0) {
  using T = typename Bytes::value_type;
  const int edits = 1 + static_cast<int>(rng() % 4);
  for (int k = 0; k < edits && !b.empty(); ++k) {
    const size_t span = header > 0 && rng() % 2 ? std::min(header, b.size()) : b.size();
    const size_t i = rng() % span;
    switch (rng() % 6) {
      case 0: b[i] = static_cast<T>(static_cast<uint8_t>(b[i]) ^ (1u << (rng() % 8))); break;
      case 1: b[i] = static_cast<T>(static_cast<uint8_t>(rng())); break;
      case 2: b.resize(rng() % b.size()); break;
      case 3: {  // the next digit becomes another (extents, offsets, lengths written as text)
        size_t j = i;
        while (j < b.size() && j < i + 32 && !std::isdigit(static_cast<uint8_t>(b[j]))) ++j;
        if (j < b.size() && std::isdigit(static_cast<uint8_t>(b[j]))) b[j] = static_cast<T>('0' + rng() % 10);
        break;
      }
      case 4: b.insert(b.begin() + static_cast<std::ptrdiff_t>(i), static_cast<T>(static_cast<uint8_t>(rng()))); break;
      default: {  // splice: a copy of up to 16 bytes from elsewhere
        const size_t from = rng() % b.size();
        const size_t n = std::min<size_t>(1 + rng() % 16, b.size() - from);
        const Bytes run(b.begin() + static_cast<std::ptrdiff_t>(from), b.begin() + static_cast<std::ptrdiff_t>(from + n));
        b.insert(b.begin() + static_cast<std::ptrdiff_t>(i), run.begin(), run.end());
      }
    }
  }
}

}  // namespace trident::test_support
