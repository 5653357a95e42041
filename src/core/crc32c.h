// CRC-32C (Castagnoli), the checksum trident stores with the data it writes (checkpoints) and
// verifies when reading it back. Table-driven, eight bytes a step, so it needs no CPU feature
// and no library; incremental, so a buffer can be summed piece by piece.
#pragma once
#include <cstddef>
#include <cstdint>

namespace trident {

// The CRC-32C of `n` bytes at `data` continuing from `crc` (0 to start): crc32c("123456789")
// is 0xE3069283.
uint32_t crc32c(const void* data, size_t n, uint32_t crc = 0);

}  // namespace trident
