// Test support: bytes compressed in memory into a gzip stream (as `gzip` writes files), so the
// IDX reader's zlib path can be fed crafted or mutated data without writing a file first.
#pragma once
#include <zlib.h>

#include <cstdint>
#include <stdexcept>
#include <vector>

namespace trident::test_support {

inline std::vector<uint8_t> gzip_bytes(const uint8_t* data, size_t size) {
  z_stream z{};
  if (deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::runtime_error("deflateInit2 failed");
  std::vector<uint8_t> out(deflateBound(&z, size));
  z.next_in = const_cast<uint8_t*>(data);
  z.avail_in = static_cast<uInt>(size);
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  const int r = deflate(&z, Z_FINISH);
  deflateEnd(&z);
  if (r != Z_STREAM_END) throw std::runtime_error("deflate did not finish");
  out.resize(z.total_out);
  return out;
}
inline std::vector<uint8_t> gzip_bytes(const std::vector<uint8_t>& v) { return gzip_bytes(v.data(), v.size()); }

}  // namespace trident::test_support
