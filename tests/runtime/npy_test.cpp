// Tests for the .npy reader and writer: round trips of every supported dtype and header
// version, the NCHW/NHWC conversion, and refusals (bad magic, malformed or Fortran-order headers,
// unsupported dtypes, truncated or oversized data) that each name the file.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "core/tensor_layout.h"
#include "runtime/npy.h"
#include "support/special_files.h"

using trident::DType;
using trident::Error;
using trident::runtime::HostTensor;

namespace {

template <class T>
HostTensor make(trident::Shape shape, DType dtype) {
  HostTensor t{shape, dtype, std::vector<std::byte>(static_cast<size_t>(trident::numel(shape)) * sizeof(T))};
  auto* p = reinterpret_cast<T*>(t.data.data());
  for (int64_t i = 0; i < trident::numel(shape); ++i) p[i] = static_cast<T>(i * 3 - 7);
  return t;
}

// A .npy file by hand: version, raw header text (padding added), and data bytes.
std::string handmade(int major, const std::string& dict, size_t data_bytes) {
  const size_t pre = major == 1 ? 10 : 12;
  std::string header = dict;
  while ((pre + header.size() + 1) % 64) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  for (size_t i = 0; i < pre - 8; ++i) out += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header + std::string(data_bytes, '\0');
}

std::string write_temp(const std::string& name, const std::string& bytes) {
  auto dir = std::filesystem::temp_directory_path() / "trident_npy_test";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / name).string();
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

// Reading `bytes` from a file fails with a message naming the file and containing `needle`.
void expect_refused(const std::string& name, const std::string& bytes, const std::string& needle) {
  const std::string path = write_temp(name, bytes);
  try {
    trident::runtime::read_npy(path);
    ADD_FAILURE() << name << " was accepted";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(path), std::string::npos) << what;
    EXPECT_NE(what.find(needle), std::string::npos) << what;
  }
}

}  // namespace

TEST(Npy, RoundTripsEveryDtypeThroughAFile) {
  for (const HostTensor& t : {make<float>({2, 3, 4, 5}, DType::f32), make<double>({7}, DType::f64),
                              make<int32_t>({3, 2}, DType::i32), make<float>({}, DType::f32),
                              make<float>({0, 4}, DType::f32)}) {
    const std::string path = write_temp("round.npy", "");
    trident::runtime::write_npy(path, t);
    const HostTensor back = trident::runtime::read_npy(path);
    EXPECT_EQ(back.shape, t.shape);
    EXPECT_EQ(back.dtype, t.dtype);
    EXPECT_EQ(back.data, t.data);
  }
}

TEST(Npy, WriterFollowsTheFormat) {
  const std::string b = trident::runtime::npy_bytes(make<float>({3}, DType::f32));
  EXPECT_EQ(b.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  const size_t header_len = static_cast<unsigned char>(b[8]) | (static_cast<unsigned char>(b[9]) << 8);
  EXPECT_EQ((10 + header_len) % 64, 0u);
  EXPECT_EQ(b[10 + header_len - 1], '\n');
  EXPECT_NE(b.find("'shape': (3,)"), std::string::npos);
  EXPECT_EQ(b.size(), 10 + header_len + 12);
}

TEST(Npy, ReadsVersionsTwoAndThreeAndNumpyStyleHeaders) {
  for (int major : {1, 2, 3}) {
    auto bytes = handmade(major, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", 16);
    auto t = trident::runtime::parse_npy(bytes.data(), bytes.size(), "mem");
    EXPECT_EQ(t.shape, (trident::Shape{2, 2}));
  }
  // Keys in another order, double quotes, no trailing comma.
  auto bytes = handmade(1, "{\"shape\": (4,), \"fortran_order\": False, \"descr\": \"<i4\"}", 16);
  auto t = trident::runtime::parse_npy(bytes.data(), bytes.size(), "mem");
  EXPECT_EQ(t.dtype, DType::i32);
  EXPECT_EQ(t.shape, (trident::Shape{4}));
}

TEST(Npy, RefusesCorruptHeadersNamingTheFile) {
  expect_refused("magic.npy", "PK\x03\x04 not numpy at all", "magic");
  expect_refused("version.npy", handmade(4, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", 4), "version 4.0");
  expect_refused("key.npy", handmade(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}", 4), "'x'");
  expect_refused("twice.npy", handmade(1, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}", 4), "twice");
  expect_refused("missing.npy", handmade(1, "{'descr': '<f4', 'shape': (1,), }", 4), "fortran_order");
  expect_refused("negative.npy", handmade(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", 4), "non-negative");
  expect_refused("garbage.npy", handmade(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), } junk", 4), "after");
  expect_refused("bool.npy", handmade(1, "{'descr': '<f4', 'fortran_order': 0, 'shape': (1,), }", 4), "True or False");
  std::string long_header = handmade(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", 4);
  long_header[8] = '\xff';
  long_header[9] = '\x7f';
  expect_refused("headerlen.npy", long_header, "truncated");
  expect_refused("short.npy", std::string("\x93NUMPY\x02\x00\x01", 9), "truncated");
}

TEST(Npy, RefusesFortranOrderAndUnsupportedDtypes) {
  expect_refused("fortran.npy", handmade(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", 16),
                 "Fortran order");
  expect_refused("big.npy", handmade(1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", 8), "big-endian");
  expect_refused("half.npy", handmade(1, "{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }", 4), "'<f2'");
}

TEST(Npy, RefusesTruncatedAndOversizedData) {
  expect_refused("trunc.npy", handmade(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 20), "truncated");
  expect_refused("huge.npy",
                 handmade(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904, 4), }", 8),
                 "truncated");
  expect_refused("extra.npy", handmade(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 12), "12 data bytes");
  expect_refused("nofile.npy.absent", "", "");  // written empty: too short for the magic
  EXPECT_THROW(trident::runtime::read_npy("/nonexistent/dir/x.npy"), Error);
}

TEST(Npy, WriteIsAtomicAndNamesTheFile) {
  const std::string path = "/nonexistent/dir/out.npy";
  try {
    trident::runtime::write_npy(path, make<float>({2}, DType::f32));
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos);
  }
  // No temporary files left next to a successful write.
  auto dir = std::filesystem::temp_directory_path() / "trident_npy_atomic";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  trident::runtime::write_npy((dir / "a.npy").string(), make<float>({2}, DType::f32));
  int files = 0;
  for (auto& e : std::filesystem::directory_iterator(dir)) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
}

TEST(Npy, NchwNhwcConversionRoundTrips) {
  const HostTensor nchw = make<float>({2, 3, 4, 5}, DType::f32);
  const HostTensor nhwc = trident::nchw_to_nhwc(nchw);
  EXPECT_EQ(nhwc.shape, (trident::Shape{2, 4, 5, 3}));
  const auto* a = reinterpret_cast<const float*>(nchw.data.data());
  const auto* b = reinterpret_cast<const float*>(nhwc.data.data());
  // element (n=1, c=2, h=3, w=4)
  EXPECT_EQ(b[((1 * 4 + 3) * 5 + 4) * 3 + 2], a[((1 * 3 + 2) * 4 + 3) * 5 + 4]);
  EXPECT_EQ(trident::nhwc_to_nchw(nhwc).data, nchw.data);
  const HostTensor flat = make<float>({2, 3}, DType::f32);
  EXPECT_EQ(trident::nchw_to_nhwc(flat).shape, flat.shape);
}

TEST(Npy, RefusesAFifoOrADirectoryWithoutBlocking) {
  const trident::test_support::SpecialFiles f("npy", "pipe.npy", "dir.npy");
  trident::test_support::expect_special_files_refused([](const std::string& p) { trident::runtime::read_npy(p); }, f);
}
