// .npy reading and writing. The header is a Python dict literal; it is parsed by a small strict
// parser (no eval, no guessing), and every size is checked against the bytes actually present.
#include "runtime/npy.h"

#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <unistd.h>

#include "core/atomic_file.h"
#include "core/checked_math.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/printable.h"

namespace trident::runtime {

static_assert(std::endian::native == std::endian::little, "trident's .npy support assumes a little-endian host");

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;

// A cursor over the header text; every failure is one sentence naming the file.
struct HeaderParser {
  const std::string& text;
  const std::string& label;
  size_t pos = 0;

  [[noreturn]] void fail(const std::string& what) const {
    throw Error("'" + label + "' has a malformed .npy header: " + what);
  }
  void skip_ws() {
    while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\t')) ++pos;
  }
  bool eat(char c) {
    skip_ws();
    if (pos < text.size() && text[pos] == c) {
      ++pos;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail(std::string("expected '") + c + "' at offset " + std::to_string(pos));
  }
  std::string string_literal() {
    skip_ws();
    if (pos >= text.size() || (text[pos] != '\'' && text[pos] != '"')) fail("expected a quoted string");
    const char q = text[pos++];
    const size_t end = text.find(q, pos);
    if (end == std::string::npos) fail("unterminated string");
    std::string s = text.substr(pos, end - pos);
    pos = end + 1;
    return s;
  }
  bool boolean() {
    skip_ws();
    for (const auto& [word, value] : {std::pair{"True", true}, std::pair{"False", false}})
      if (text.compare(pos, std::strlen(word), word) == 0) {
        pos += std::strlen(word);
        return value;
      }
    fail("fortran_order must be True or False");
  }
  int64_t integer() {
    skip_ws();
    if (pos >= text.size() || text[pos] < '0' || text[pos] > '9') fail("a shape extent is not a non-negative integer");
    int64_t v = 0;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      if (v > (std::numeric_limits<int64_t>::max() - 9) / 10) fail("a shape extent is too large");
      v = v * 10 + (text[pos++] - '0');
    }
    return v;
  }
  Shape shape() {
    expect('(');
    Shape s;
    if (eat(')')) return s;
    while (true) {
      s.push_back(integer());
      if (s.size() > 32) fail("the shape has more than 32 dimensions");
      if (eat(')')) return s;
      expect(',');
      if (eat(')')) return s;  // "(3,)"
    }
  }
};

struct Header {
  DType dtype = DType::f32;
  Shape shape;
};

Header parse_header(const std::string& text, const std::string& label) {
  HeaderParser p{text, label};
  bool have_descr = false, have_order = false, have_shape = false, fortran = false;
  std::string descr;
  Header h;
  p.expect('{');
  while (!p.eat('}')) {
    const std::string key = p.string_literal();
    p.expect(':');
    bool* seen = nullptr;
    if (key == "descr") {
      seen = &have_descr;
      descr = p.string_literal();
    } else if (key == "fortran_order") {
      seen = &have_order;
      fortran = p.boolean();
    } else if (key == "shape") {
      seen = &have_shape;
      h.shape = p.shape();
    } else {
      p.fail("unexpected key " + quoted_name(key));
    }
    if (*seen) p.fail("key " + quoted_name(key) + " appears twice");
    *seen = true;
    if (p.eat('}')) break;
    p.expect(',');
  }
  // Padding: spaces, then the newline that ends every header.
  while (p.pos < text.size() && (text[p.pos] == ' ' || text[p.pos] == '\t')) ++p.pos;
  if (p.pos + 1 != text.size() || text.back() != '\n') p.fail("unexpected text after the dictionary");
  if (!have_descr || !have_order || !have_shape) p.fail("it needs the keys descr, fortran_order and shape");
  if (fortran)
    throw Error("'" + label + "' is stored in Fortran order; save it in C order (numpy.ascontiguousarray) and try again");
  if (descr == "<f4") h.dtype = DType::f32;
  else if (descr == "<f8") h.dtype = DType::f64;
  else if (descr == "<i4") h.dtype = DType::i32;
  else if (!descr.empty() && descr[0] == '>')
    throw Error("'" + label + "' is big-endian (" + quoted_name(descr) + "); only little-endian arrays are supported");
  else
    throw Error("'" + label + "' holds dtype " + quoted_name(descr) + "; supported are float32 '<f4', float64 '<f8' and int32 '<i4'");
  return h;
}

uint32_t read_le(const unsigned char* p, int bytes) {
  uint32_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

std::string descr_of(DType t) {
  switch (t) {
    case DType::f32: return "<f4";
    case DType::f64: return "<f8";
    case DType::i32: return "<i4";
    default: throw Error("cannot write dtype " + std::string(dtype_name(t)) + " to a .npy file");
  }
}

}  // namespace

HostTensor parse_npy(const void* data, size_t size, const std::string& label) {
  const auto* b = static_cast<const unsigned char*>(data);
  if (size < kMagicLen + 2 || std::memcmp(b, kMagic, kMagicLen) != 0)
    throw Error("'" + label + "' is not a NumPy .npy file (the magic string \\x93NUMPY is missing)");
  const int major = b[6], minor = b[7];
  if (major < 1 || major > 3 || minor != 0)
    throw Error("'" + label + "' has .npy format version " + std::to_string(major) + "." + std::to_string(minor) +
                "; supported are 1.0, 2.0 and 3.0");
  const size_t len_bytes = major == 1 ? 2 : 4;
  const size_t preamble = kMagicLen + 2 + len_bytes;
  if (size < preamble) throw Error("'" + label + "' is truncated inside its .npy header");
  const size_t header_len = read_le(b + 8, static_cast<int>(len_bytes));
  if (header_len > size - preamble)
    throw Error("'" + label + "' is truncated: its header claims " + std::to_string(header_len) + " bytes but the file has " +
                std::to_string(size - preamble) + " after the preamble");
  const std::string text(reinterpret_cast<const char*>(b + preamble), header_len);
  Header h = parse_header(text, label);

  const size_t available = size - preamble - header_len;
  const size_t es = dtype_size(h.dtype);
  size_t need = es;
  for (int64_t d : h.shape) {
    if (d != 0 && need > available / static_cast<size_t>(d))
      throw Error("'" + label + "' is truncated: shape " + shape_str(h.shape) + " needs more than the " +
                  std::to_string(available) + " data bytes present");
    need *= static_cast<size_t>(d);
  }
  checked_numel(h.shape, "'" + label + "'");  // the element limit every tensor obeys
  if (need != available)
    throw Error("'" + label + "' has " + std::to_string(available) + " data bytes but shape " + shape_str(h.shape) + " of " +
                std::string(dtype_name(h.dtype)) + " needs " + std::to_string(need) +
                (need > available ? " (the file is truncated)" : ""));
  HostTensor t{h.shape, h.dtype, std::vector<std::byte>(need)};
  if (need) std::memcpy(t.data.data(), b + preamble + header_len, need);
  return t;
}

HostTensor read_npy(const std::string& path) {
  const std::string bytes = InputFile(path, ".npy file").read_all();
  return parse_npy(bytes.data(), bytes.size(), path);
}

std::string npy_bytes(const HostTensor& t) {
  std::string dict = "{'descr': '" + descr_of(t.dtype) + "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < t.shape.size(); ++i) dict += (i ? ", " : "") + std::to_string(t.shape[i]);
  dict += t.shape.size() == 1 ? ",), }" : "), }";
  if (t.data.size() != static_cast<size_t>(numel(t.shape)) * dtype_size(t.dtype))
    throw Error("internal error: a tensor of shape " + shape_str(t.shape) + " holds " + std::to_string(t.data.size()) + " bytes");
  size_t preamble = kMagicLen + 2 + 2;
  int major = 1;
  size_t total = (preamble + dict.size() + 1 + 63) / 64 * 64;
  if (total - preamble > 65535) {
    major = 2;
    preamble = kMagicLen + 2 + 4;
    total = (preamble + dict.size() + 1 + 63) / 64 * 64;
  }
  const size_t header_len = total - preamble;
  dict.append(header_len - dict.size() - 1, ' ');
  dict += '\n';
  std::string out(kMagic, kMagicLen);
  out += static_cast<char>(major);
  out += '\0';
  for (size_t i = 0; i < (major == 1 ? 2u : 4u); ++i) out += static_cast<char>((header_len >> (8 * i)) & 0xff);
  out += dict;
  out.append(reinterpret_cast<const char*>(t.data.data()), t.data.size());
  return out;
}

void write_npy(const std::string& path, const HostTensor& t) {
  const std::string bytes = npy_bytes(t);
  write_file_atomically(path, bytes.data(), bytes.size());
}

}  // namespace trident::runtime
