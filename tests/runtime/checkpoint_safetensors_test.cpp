// safetensors reading and writing: every dtype and the metadata survive a round trip, each
// kind of damaged file is one Error naming the file (and tensor), and a failed write leaves
// the previous file exactly as it was.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "core/error.h"
#include "runtime/checkpoint/safetensors.h"
#include "support/sanitizers.h"
#include "support/special_files.h"

using namespace trident;
using namespace trident::runtime;
namespace fs = std::filesystem;

namespace {

fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("trident_st_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

HostTensor tensor(Shape shape, DType dt, int salt) {
  HostTensor t{shape, dt, std::vector<std::byte>(numel(shape) * dtype_size(dt))};
  for (size_t i = 0; i < t.data.size(); ++i) t.data[i] = static_cast<std::byte>((i * 37 + salt) & 0xff);
  return t;
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

// A file from a header text and `data` zero bytes; `length` overrides the header length field.
fs::path make_file(const fs::path& dir, const std::string& name, const std::string& header,
                   size_t data, int64_t length = -1) {
  const fs::path p = dir / name;
  std::ofstream f(p, std::ios::binary);
  uint64_t n = length < 0 ? header.size() : static_cast<uint64_t>(length);
  for (int i = 0; i < 8; ++i, n >>= 8) f.put(static_cast<char>(n & 0xff));
  f << header << std::string(data, '\0');
  return p;
}

void expect_rejected(const fs::path& p, const std::string& needle) {
  test_support::expect_refused_file([](const std::string& path) { read_safetensors(path); }, p, needle);
}

}  // namespace

TEST(Safetensors, EveryDtypeAndTheMetadataRoundTrip) {
  const fs::path d = temp_dir("roundtrip");
  WeightMap w{{"a.f32", tensor({2, 3}, DType::f32, 1)}, {"b.f64", tensor({5}, DType::f64, 2)},
              {"c.f16", tensor({3, 1, 2}, DType::f16, 3)}, {"d.bf16", tensor({7}, DType::bf16, 4)},
              {"e.i32", tensor({2, 2}, DType::i32, 5)}, {"f.scalar", tensor({}, DType::f32, 6)},
              {"g.empty", tensor({0, 4}, DType::f32, 7)}};
  const Metadata md{{"format", "test"}, {"note", "ünïcode, \"quotes\"\n"}, {"empty", ""}};
  write_safetensors((d / "w.safetensors").string(), w, md);
  Metadata back_md;
  const WeightMap back = read_safetensors((d / "w.safetensors").string(), &back_md);
  ASSERT_EQ(back.size(), w.size());
  for (const auto& [name, t] : w) {
    ASSERT_TRUE(back.count(name)) << name;
    EXPECT_EQ(back.at(name).shape, t.shape) << name;
    EXPECT_EQ(back.at(name).dtype, t.dtype) << name;
    EXPECT_EQ(back.at(name).data, t.data) << name;
  }
  EXPECT_EQ(back_md, md);
  // The data starts 8-byte aligned and nothing temporary is left behind.
  const std::string bytes = slurp(d / "w.safetensors");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  EXPECT_EQ((8 + n) % 8, 0u);
  EXPECT_EQ(std::distance(fs::directory_iterator(d), fs::directory_iterator{}), 1);
}

TEST(Safetensors, MemoryAndFileReadersAgree) {
  const WeightMap w{{"x", tensor({4}, DType::i32, 9)}};
  const std::vector<std::byte> bytes = encode_safetensors(w, {{"k", "v"}});
  Metadata md;
  const WeightMap back = read_safetensors_from_memory(bytes, "in-memory", &md);
  EXPECT_EQ(back.at("x").data, w.at("x").data);
  EXPECT_EQ(md.at("k"), "v");
  // A header without __metadata__ gives an empty map.
  const WeightMap none = read_safetensors_from_memory(encode_safetensors(w, {}), "m", &md);
  EXPECT_TRUE(md.empty());
}

TEST(Safetensors, DamagedFilesAreOneErrorNamingTheFile) {
  const fs::path d = temp_dir("corrupt");
  const std::string ok = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  expect_rejected(d / "missing", "cannot open");
  {
    std::ofstream(d / "tiny", std::ios::binary) << "abc";
    expect_rejected(d / "tiny", "too few");
  }
  expect_rejected(make_file(d, "len_past_end", ok, 8, ok.size() + 100), "truncated");
  expect_rejected(make_file(d, "len_absurd", ok, 8, int64_t{1} << 62), "exceeds the limit");
  expect_rejected(make_file(d, "bad_json", R"({"w":{"dtype":)", 8), "not valid JSON");
  expect_rejected(make_file(d, "not_object", "[1,2]", 0), "not an object");
  expect_rejected(make_file(d, "data_truncated", ok, 4), "outside the 4-byte data buffer");
  expect_rejected(make_file(d, "offsets_reversed", R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", 8),
                  "tensor 'w'");
  expect_rejected(make_file(d, "offsets_huge",
                            R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[18446744073709551608,18446744073709551615]}})", 8),
                  "tensor 'w' has data_offsets");
  expect_rejected(make_file(d, "overlap",
                            R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12),
                  "tensors 'a' and 'b' overlap");
  expect_rejected(make_file(d, "byte_count", R"({"w":{"dtype":"F64","shape":[2],"data_offsets":[0,8]}})", 8),
                  "tensor 'w' has 8 bytes of data but its dtype F64");
  expect_rejected(make_file(d, "dtype", R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,8]}})", 8),
                  "tensor 'w' has dtype 'U8'");
  expect_rejected(make_file(d, "absurd_shape",
                            R"({"w":{"dtype":"F32","shape":[1000000000000,1000000000000],"data_offsets":[0,8]}})", 8),
                  "tensor 'w' has a shape whose element count overflows");
  expect_rejected(make_file(d, "float_shape", R"({"w":{"dtype":"F32","shape":[1e12,1e12],"data_offsets":[0,8]}})", 8),
                  "tensor 'w' has a dimension that is not an integer");
  expect_rejected(make_file(d, "negative_shape", R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8),
                  "tensor 'w' has a negative dimension");
  expect_rejected(make_file(d, "duplicate",
                            R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8),
                  "'w' twice");
  expect_rejected(make_file(d, "missing_field", R"({"w":{"dtype":"F32","data_offsets":[0,8]}})", 8),
                  "tensor 'w' has no shape");
  expect_rejected(make_file(d, "extra_field", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})", 8),
                  "unknown field 'x'");
  expect_rejected(make_file(d, "metadata_number", R"({"__metadata__":{"k":3}})", 0), "'k' is not a string");
  expect_rejected(make_file(d, "deep", std::string(5000, '[') + std::string(5000, ']'), 0), "nests deeper");
}

TEST(Safetensors, FailedWritesLeaveTheOldFileIntact) {
  const fs::path d = temp_dir("atomic");
  const std::string path = (d / "w.safetensors").string();
  write_safetensors(path, {{"w", tensor({3}, DType::f32, 1)}}, {{"v", "old"}});
  const std::string before = slurp(path);

  // A missing directory: an Error naming the path, nothing created.
  const std::string nowhere = (d / "no" / "such" / "w.safetensors").string();
  try {
    write_safetensors(nowhere, {{"w", tensor({3}, DType::f32, 2)}}, {});
    ADD_FAILURE() << "wrote into a missing directory";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(nowhere), std::string::npos) << e.what();
  }
  // (Temporary names are random and created exclusively: tests/core/atomic_file_test.cpp.)
  // A read-only directory (meaningless for root, who may write anyway).
  if (::geteuid() != 0) {
    fs::permissions(d, fs::perms::owner_read | fs::perms::owner_exec);
    EXPECT_THROW(write_safetensors(path, {{"w", tensor({3}, DType::f32, 4)}}, {}), Error);
    fs::permissions(d, fs::perms::owner_all);
    EXPECT_EQ(slurp(path), before);
  }
  // An invalid tensor fails before anything is written.
  HostTensor bad = tensor({3}, DType::f32, 5);
  bad.data.pop_back();
  EXPECT_THROW(write_safetensors(path, {{"w", bad}}, {}), Error);
  EXPECT_EQ(slurp(path), before);
  EXPECT_EQ(std::distance(fs::directory_iterator(d), fs::directory_iterator{}), 1);
  // A successful write replaces the file.
  write_safetensors(path, {{"w", tensor({3}, DType::f32, 6)}}, {{"v", "new"}});
  Metadata md;
  read_safetensors(path, &md);
  EXPECT_EQ(md.at("v"), "new");
}

// Every byte of the data buffer belongs to exactly one tensor.
TEST(Safetensors, DataBytesOwnedByNoTensorAreRefused) {
  const fs::path d = temp_dir("coverage");
  const std::string one = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  expect_rejected(make_file(d, "trailing", one, 12), "4 bytes after the last tensor");
  expect_rejected(make_file(d, "gap", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12),
                  "bytes [0, 4) of the data buffer belong to no tensor");
  expect_rejected(make_file(d, "only_empty", R"({"e":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}})", 4),
                  "4 bytes after the last tensor");
  expect_rejected(make_file(d, "rank", R"({"w":{"dtype":"F32","shape":[1,1,1,1,1,1,1,1,1],"data_offsets":[0,4]}})", 4),
                  "more than 8 entries");
  expect_rejected(make_file(d, "nested", R"({"w":{"dtype":"F32","shape":[[2]],"data_offsets":[0,8]}})", 8),
                  "nests deeper");
  expect_rejected(make_file(d, "duplicate_field", R"({"w":{"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8),
                  "'dtype' twice");
  // Exact coverage with empty tensors anywhere and tensors out of file order is accepted.
  const WeightMap w = read_safetensors(make_file(d, "ok",
      R"({"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]},"e":{"dtype":"F32","shape":[0,3],"data_offsets":[8,8]},)"
      R"("a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 8).string());
  EXPECT_EQ(w.size(), 3u);
}

// The header is parsed in linear time: 200,000 empty tensors (a 10 MB header) once took
// minutes through the callback parser, which rescanned every member at each object end.
TEST(Safetensors, AHeaderOfManyEmptyTensorsParsesInLinearTime) {
  const fs::path d = temp_dir("many");
  const int n = 200000;
  std::string header = "{";
  for (int i = 0; i < n; ++i)
    header += (i ? ",\"t" : "\"t") + std::to_string(i) + R"(":{"dtype":"F32","shape":[0],"data_offsets":[0,0]})";
  header += "}";
  const fs::path p = make_file(d, "many", header, 0);
  const auto start = std::chrono::steady_clock::now();
  const WeightMap w = read_safetensors(p.string());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(w.size(), size_t(n));
  EXPECT_LT(seconds, 5.0 * test_support::kTimeScale) << "a " << header.size() << "-byte header took " << seconds << " s";
}

TEST(Safetensors, AFifoOrADirectoryIsRefusedWithoutBlocking) {
  const test_support::SpecialFiles f("st", "pipe.safetensors", "dir.safetensors");
  test_support::expect_special_files_refused([](const std::string& p) { read_safetensors(p); }, f);
}

// Every file trident writes records the CRC-32C of its data: a flipped tensor byte is one
// sentence naming the file (it loaded silently before), a file without the entry (weights from
// elsewhere) still loads, and a malformed entry is refused.
TEST(Safetensors, TheDataChecksumIsWrittenAndVerified) {
  const fs::path d = temp_dir("checksum");
  const WeightMap w{{"a", tensor({4, 3}, DType::f32, 1)}, {"b", tensor({5}, DType::f64, 2)}};
  const std::vector<std::byte> bytes = encode_safetensors(w, {{"format", "test"}});
  const std::string text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  EXPECT_NE(text.find(std::string("\"") + kDataChecksumKey + "\":\""), std::string::npos);
  Metadata md;
  EXPECT_EQ(read_safetensors_from_memory(bytes, "x", &md).size(), 2u);
  EXPECT_EQ(md, (Metadata{{"format", "test"}}));

  for (size_t from_end : {1u, 40u, 80u}) {  // b's last and first bytes, one of a's
    std::vector<std::byte> flipped = bytes;
    flipped[flipped.size() - from_end] ^= std::byte{0x01};
    const fs::path p = d / ("flipped" + std::to_string(from_end) + ".safetensors");
    std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(flipped.data()), flipped.size());
    try {
      read_safetensors(p.string());
      ADD_FAILURE() << "a flipped byte " << from_end << " from the end was accepted";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("'" + p.string() + "' is damaged: its tensor data has CRC-32C"), std::string::npos) << msg;
    }
  }
  // Without the entry (as safetensors files from elsewhere): loads, the flip goes unseen.
  const std::string plain = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  EXPECT_EQ(read_safetensors(make_file(d, "plain.safetensors", plain, 8).string()).at("a").data.size(), 8u);
  expect_rejected(make_file(d, "bad_sum.safetensors",
                            R"({"__metadata__":{"data_crc32c":"XYZ"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                            8),
                  "is not 8 lowercase hexadecimal digits");
  fs::remove_all(d);
}

// Tensor names, dtypes and metadata keys are quoted in the reader's sentences, escaped: a
// crafted name cannot send terminal escapes or forge lines.
TEST(Safetensors, NamesFromTheFileAreEscapedInMessages) {
  const fs::path d = temp_dir("names");
  const fs::path p = make_file(d, "esc.safetensors",
                               "{\"a\\u001b[31m\\n\":{\"dtype\":\"F8\\u0007\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1);
  try {
    read_safetensors(p.string());
    ADD_FAILURE() << "read";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find_first_of("\x1b\n\x07"), std::string::npos) << msg;
    EXPECT_NE(msg.find("tensor 'a\\x1b[31m\\n' has dtype 'F8\\x07'"), std::string::npos) << msg;
  }
  const fs::path m = make_file(d, "meta.safetensors", "{\"__metadata__\":{\"k\\u001b\":1}}", 0);
  expect_rejected(m, "entry 'k\\x1b' is not a string");
  fs::remove_all(d);
}
