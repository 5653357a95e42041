// CRC-32C against the published check value and RFC 3720's vectors; summing in pieces gives
// the sum of the whole, whatever the split (the table step takes eight bytes at a time).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/crc32c.h"

using trident::crc32c;

TEST(Crc32c, KnownVectors) {
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(crc32c("", 0), 0u);
  const std::vector<unsigned char> zeros(32, 0), ones(32, 0xff);
  EXPECT_EQ(crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
  EXPECT_EQ(crc32c(ones.data(), ones.size()), 0x62A8AB43u);
}

TEST(Crc32c, PiecesSumLikeTheWhole) {
  std::string s;
  for (int i = 0; i < 1000; ++i) s += static_cast<char>(i * 131 + 7);
  const uint32_t whole = crc32c(s.data(), s.size());
  for (size_t split : {0u, 1u, 7u, 8u, 9u, 500u, 999u, 1000u})
    EXPECT_EQ(crc32c(s.data() + split, s.size() - split, crc32c(s.data(), split)), whole) << split;
  s[123] ^= 0x10;
  EXPECT_NE(crc32c(s.data(), s.size()), whole);
}
