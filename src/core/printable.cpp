// printable(): one pass over UTF-8, decoding each sequence strictly (no overlong forms, no
// surrogates, nothing above U+10FFFF) and escaping what a terminal would act on.
#include "core/printable.h"

#include <cstdint>
#include <cstdio>

namespace trident {

namespace {

void append_hex_byte(std::string& out, unsigned char c) {
  char buf[5];
  std::snprintf(buf, sizeof buf, "\\x%02x", c);
  out += buf;
}

// The code point of the valid UTF-8 sequence at text[i] and its length, or length 0.
int decode(std::string_view text, size_t i, uint32_t& cp) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(text[i + k]); };
  const unsigned char c = b(0);
  int len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
  if (c >= 0xF8 || len == 0 || i + len > text.size()) return 0;
  cp = c & (0x7F >> len);
  for (int k = 1; k < len; ++k) {
    if ((b(k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(k) & 0x3F);
  }
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

bool acts_on_terminal(uint32_t cp) {
  return (cp >= 0x80 && cp <= 0x9F) || (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069) ||
         cp == 0x200E || cp == 0x200F || cp == 0x061C;
}

}  // namespace

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      if (c == '\n') out += "\\n";
      else if (c == '\r') out += "\\r";
      else if (c == '\t') out += "\\t";
      else if (c < 0x20 || c == 0x7F) append_hex_byte(out, c);
      else out += static_cast<char>(c);
      ++i;
      continue;
    }
    uint32_t cp = 0;
    const int len = decode(text, i, cp);
    if (len == 0) {
      append_hex_byte(out, c);
      ++i;
    } else if (acts_on_terminal(cp)) {
      char buf[12];
      std::snprintf(buf, sizeof buf, "\\u{%04x}", cp);
      out += buf;
      i += static_cast<size_t>(len);
    } else {
      out.append(text.substr(i, static_cast<size_t>(len)));
      i += static_cast<size_t>(len);
    }
  }
  return out;
}

}  // namespace trident
