// Resuming from a checkpoint retraces the uninterrupted run bitwise on cpu_ref: the epoch
// losses after the break and the final weights are equal, in-process and through the
// `trident train --save/--resume` command; mismatched or damaged checkpoints are clear errors.
#include <gtest/gtest.h>

#include "support/run_binary.h"
#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <csignal>
#include <sys/wait.h>
#include <unistd.h>

#include "core/error.h"
#include "frontend/zoo.h"
#include "runtime/checkpoint/checkpoint.h"

using namespace trident;
using namespace trident::runtime;
namespace fs = std::filesystem;

namespace {

constexpr int kEpochs = 3;

fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("trident_ckpt_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

TrainConfig config() {
  TrainConfig c;
  c.compile.backend = "cpu_ref";
  c.seed = 7;
  c.epochs = kEpochs;
  return c;
}

const data::Dataset& dataset() {
  static const data::Dataset ds = data::make_synthetic(128, 28, 28, 1, 10, 11);
  return ds;
}

CheckpointInfo info_after(const Trainer& t, int64_t epoch) {
  CheckpointInfo i = checkpoint_info(t);
  i.model = "fmnist_cnn";
  i.epoch = epoch;
  i.dataset = dataset().name;
  i.train_images = dataset().count;
  return i;
}

using Result = test_support::RunResult;
Result run(const std::string& args) { return test_support::run_trident(args, /*merge=*/false); }
Result run_with_stderr(const std::string& args) { return test_support::run_trident(args, /*merge=*/true); }

// The events of a --json run with the given type.
std::vector<nlohmann::json> events(const std::string& out, const std::string& type) {
  std::vector<nlohmann::json> v;
  size_t pos = 0;
  while (pos < out.size()) {
    const size_t end = out.find('\n', pos);
    const std::string line = out.substr(pos, end - pos);
    pos = end == std::string::npos ? out.size() : end + 1;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.value("event", "") == type) v.push_back(j);
  }
  return v;
}

}  // namespace

TEST(CheckpointResume, ContinuesBitwiseLikeAnUninterruptedRun) {
  omp_set_num_threads(1);  // cpu_ref results do not depend on it; spinning threads cost on busy CI
  const ir::Graph model = frontend::build_model("fmnist_cnn", {32});
  std::vector<double> straight;
  WeightMap straight_weights;
  {
    Trainer t(model, config());
    data::BatchIterator it(dataset(), 32, true, 7, true);
    for (int e = 0; e < kEpochs; ++e) straight.push_back(t.train_epoch(it, e, kEpochs).loss);
    straight_weights = t.train_executable().export_weights();
  }
  const fs::path ckpt = temp_dir("bitwise") / "run.ckpt";
  {
    Trainer t(model, config());
    data::BatchIterator it(dataset(), 32, true, 7, true);
    EXPECT_EQ(t.train_epoch(it, 0, kEpochs).loss, straight[0]);
    save_checkpoint(ckpt.string(), t, info_after(t, 1));
  }
  Checkpoint ck = load_checkpoint(ckpt.string());
  EXPECT_EQ(ck.info.epoch, 1);
  EXPECT_EQ(ck.info.step, 4);  // 128 images / 32
  EXPECT_EQ(ck.info.config.seed, 7u);
  EXPECT_EQ(ck.info.config.lr, config().lr);
  EXPECT_EQ(ck.info.config.compile.weight_decay, config().compile.weight_decay);
  EXPECT_EQ(ck.info.config.epochs, kEpochs);
  // Parameters, BatchNorm running statistics and momentum buffers all travel.
  size_t momenta = 0, running = 0;
  for (const auto& [name, h] : ck.weights) {
    momenta += name.ends_with(".momentum");
    running += name.ends_with(".running_mean") || name.ends_with(".running_var");
  }
  EXPECT_GT(momenta, 0u);
  EXPECT_GT(running, 0u);

  TrainConfig cfg = config();  // a fresh trainer with a different seed: everything must come from the file
  cfg.seed = 99;
  Trainer t(model, cfg);
  resume_from(t, ck, ckpt.string(), "fmnist_cnn");
  EXPECT_EQ(t.step(), 4);
  data::BatchIterator it(dataset(), 32, true, ck.info.config.seed, true);
  for (int e = 1; e < kEpochs; ++e) EXPECT_EQ(t.train_epoch(it, e, kEpochs).loss, straight[e]) << "epoch " << e + 1;
  const WeightMap resumed = t.train_executable().export_weights();
  ASSERT_EQ(resumed.size(), straight_weights.size());
  for (const auto& [name, h] : straight_weights) EXPECT_EQ(resumed.at(name).data, h.data) << name;
}

TEST(CheckpointResume, MismatchesAreClearErrors) {
  const fs::path d = temp_dir("mismatch");
  const ir::Graph model = frontend::build_model("fmnist_cnn", {32});
  Trainer t(model, config());
  save_checkpoint((d / "c").string(), t, info_after(t, 0));
  const Checkpoint ck = load_checkpoint((d / "c").string());

  auto expect_error = [](auto&& f, const std::string& needle) {
    try {
      f();
      ADD_FAILURE() << "no error; expected one with '" << needle << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error([&] { resume_from(t, ck, "c", "resnet_cifar"); }, "is of model 'fmnist_cnn', not 'resnet_cifar'");
  Trainer t16(frontend::build_model("fmnist_cnn", {16}), config());
  expect_error([&] { resume_from(t16, ck, "c", "fmnist_cnn"); }, "batch 32, not 16");
  Checkpoint partial = ck;
  partial.weights.erase(partial.weights.begin());
  expect_error([&] { resume_from(t, partial, "c", "fmnist_cnn"); }, "lack '");
  // A plain safetensors file is not a checkpoint.
  write_safetensors((d / "plain").string(), ck.weights, {});
  expect_error([&] { load_checkpoint((d / "plain").string()); }, "not a trident checkpoint");
  Metadata md{{"format", kCheckpointFormat}, {"model", "fmnist_cnn"}};
  write_safetensors((d / "thin").string(), ck.weights, md);
  expect_error([&] { load_checkpoint((d / "thin").string()); }, "lacks the metadata entry 'epoch'");
}

// Crashes a `trident train --save` run (SIGKILL) right after its first checkpoint, resumes
// it, and compares with an uninterrupted run: same epoch losses after the break, same test
// accuracy. Should the run get past a second epoch before the kill lands, the resume simply
// starts later; the comparison holds either way.
TEST(CheckpointResume, CommandLineResumeAfterACrashMatchesAnUninterruptedRun) {
  const fs::path d = temp_dir("cli");
  const std::string ckpt = (d / "run.ckpt").string();
  const std::string common =
      "train --synthetic --train-limit 128 --test-limit 64 --batch 32 --backend cpu_ref --threads 1 --json";
  const std::string settings = " --epochs 3 --seed 5 --lr 0.04";
  const Result straight = run(common + settings);
  ASSERT_EQ(straight.code, 0) << straight.output;

  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::close(fds[0]);
    const std::string cmd = "exec " + std::string(TRIDENT_BINARY) + " " + common + settings + " --save " + ckpt + " 2>/dev/null";
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(fds[1]);
  std::string out;
  char c;
  while (::read(fds[0], &c, 1) == 1) {
    out += c;
    if (c == '\n' && !events(out, "checkpoint").empty()) break;
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  ::close(fds[0]);
  ASSERT_EQ(events(out, "checkpoint").size(), 1u) << out;

  const int64_t done = load_checkpoint(ckpt).info.epoch;
  // --epochs: the run's planned 3; --save continues to update the same file.
  const Result resumed = run(common + " --resume " + ckpt + " --save " + ckpt);
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  const auto a = events(straight.output, "epoch"), b = events(resumed.output, "epoch");
  ASSERT_EQ(a.size(), 3u);
  ASSERT_EQ(b.size(), static_cast<size_t>(3 - done));
  for (size_t k = 0; k < b.size(); ++k) {
    EXPECT_EQ(b[k]["epoch"], a[done + k]["epoch"]);
    EXPECT_EQ(b[k]["loss"], a[done + k]["loss"]) << "epoch " << done + k + 1;
  }
  const auto ta = events(straight.output, "test"), tb = events(resumed.output, "test");
  ASSERT_EQ(ta.size(), 1u);
  ASSERT_EQ(tb.size(), 1u);
  EXPECT_EQ(ta[0]["accuracy"], tb[0]["accuracy"]);
  EXPECT_EQ(ta[0]["loss"], tb[0]["loss"]);

  // A finished checkpoint only evaluates, to the same result.
  const Result again = run(common + " --resume " + ckpt);
  ASSERT_EQ(again.code, 0) << again.output;
  EXPECT_TRUE(events(again.output, "epoch").empty());
  ASSERT_EQ(events(again.output, "test").size(), 1u);
  EXPECT_EQ(events(again.output, "test")[0]["accuracy"], ta[0]["accuracy"]);
}

TEST(CheckpointResume, CommandLineErrorsAreOneSentence) {
  const fs::path d = temp_dir("cli_errors");
  const std::string base =
      " train --synthetic --test-limit 32 --batch 32 --backend cpu_ref --threads 1";
  const std::string common = base + " --train-limit 64";
  const std::string ckpt = (d / "c.ckpt").string();
  ASSERT_EQ(run(common + " --epochs 1 --save " + ckpt).code, 0);

  auto expect_failure = [](const Result& r, const std::string& needle) {
    EXPECT_EQ(r.code, 1) << r.output;
    EXPECT_NE(r.output.find(needle), std::string::npos) << r.output;
  };
  const std::string missing = (d / "nope.ckpt").string();
  expect_failure(run_with_stderr(common + " --resume " + missing), missing);
  expect_failure(run_with_stderr(common + " --weights " + missing), missing);
  {
    std::FILE* f = std::fopen((d / "junk.ckpt").c_str(), "wb");
    std::fputs("not a checkpoint at all", f);
    std::fclose(f);
  }
  expect_failure(run_with_stderr(common + " --resume " + (d / "junk.ckpt").string()), "junk.ckpt");
  expect_failure(run_with_stderr(common + " --resume " + ckpt + " --lr 0.5"), "--lr differs from the checkpoint");
  expect_failure(run_with_stderr(base + " --resume " + ckpt + " --train-limit 96"), "--train-limit differs from the checkpoint");
  expect_failure(run_with_stderr(common + " --save " + (d / "no" / "c.ckpt").string()), "does not exist");
  // --weights takes a checkpoint's tensors into a new run; a different model's are an error.
  EXPECT_EQ(run(common + " --epochs 1 --weights " + ckpt).code, 0);
  expect_failure(run_with_stderr(common + " --model resnet_cifar --weights " + ckpt), "does not fit model 'resnet_cifar'");
}

// Every setting read from a checkpoint is held to the range its command-line flag accepts
// (runtime/train_limits.h), and the step to the epoch: a crafted file cannot train for ever,
// overflow the step counter or run with a negative or undefined learning-rate schedule.
TEST(CheckpointResume, OutOfRangeMetadataIsRefused) {
  const fs::path d = temp_dir("limits");
  const std::string good = (d / "good.ckpt").string();
  {
    Trainer t(frontend::build_model("fmnist_cnn", {32}), config());
    save_checkpoint(good, t, info_after(t, 0));
  }
  Metadata md;
  const WeightMap weights = read_safetensors(good, &md);
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"epochs", "9223372036854775807"}, {"epochs", "0"},     {"epoch", "4"},
      {"step", "9223372036854775807"},   {"step", "1"},       {"batch", "0"},
      {"batch", "65537"},                {"lr", "-5"},        {"lr", "inf"},
      {"lr", "nan"},                     {"momentum", "5"},   {"weight_decay", "-0.1"},
      {"warmup_epochs", "nan"},          {"warmup_epochs", "1001"}, {"seed", "-1"},
  };
  for (const auto& [key, value] : bad) {
    const std::string path = (d / (key + "_" + value + ".ckpt")).string();
    Metadata patched = md;
    patched.at(key) = value;
    write_safetensors(path, weights, patched);
    const std::string needle = "checkpoint '" + path + "' has metadata '" + key + "' = '" + value + "'";
    try {
      load_checkpoint(path);
      ADD_FAILURE() << key << " = " << value << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
    const Result r = run_with_stderr("train --synthetic --train-limit 128 --batch 32 --backend cpu_ref --resume " + path);
    EXPECT_EQ(r.code, 1) << r.output;
    EXPECT_NE(r.output.find(needle), std::string::npos) << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  }
  EXPECT_NO_THROW(load_checkpoint(good));
}

// A checkpoint whose tensor bytes changed after it was written (one bit flipped on disk) is
// refused by --resume and by --weights of train and infer, naming the file; before, it loaded.
TEST(CheckpointResume, AFlippedTensorByteIsRefusedNamingTheFile) {
  const fs::path d = temp_dir("flipped");
  const std::string common = " train --synthetic --train-limit 64 --test-limit 32 --batch 32 --backend cpu_ref --threads 1";
  const std::string ckpt = (d / "c.safetensors").string();
  ASSERT_EQ(run(common + " --epochs 1 --save " + ckpt).code, 0);
  {
    std::fstream f(ckpt, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-100, std::ios::end);
    const char c = static_cast<char>(f.get());
    f.seekp(-100, std::ios::end);
    f.put(static_cast<char>(c ^ 0x04));
  }
  const std::string needle = "'" + ckpt + "' is damaged: its tensor data has CRC-32C";
  for (const std::string& args : {common + " --resume " + ckpt, common + " --weights " + ckpt,
                                  std::string(" infer --model fmnist_cnn --weights ") + ckpt}) {
    const Result r = run_with_stderr(args);
    EXPECT_EQ(r.code, 1) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(needle), std::string::npos) << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  }
  fs::remove_all(d);
}

// A metadata value from the file is escaped where a sentence quotes it.
TEST(CheckpointResume, MetadataValuesAreEscapedInMessages) {
  const fs::path d = temp_dir("escaped");
  const std::string good = (d / "good.ckpt").string(), bad = (d / "bad.ckpt").string();
  {
    Trainer t(frontend::build_model("fmnist_cnn", {32}), config());
    save_checkpoint(good, t, info_after(t, 0));
  }
  Metadata md;
  const WeightMap weights = read_safetensors(good, &md);
  md.at("lr") = std::string("0.1") + '\n' + "trident: ok" + '\x1b' + "[2J";
  write_safetensors(bad, weights, md);
  try {
    load_checkpoint(bad);
    ADD_FAILURE() << "loaded";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find_first_of("\x1b\n"), std::string::npos) << msg;
    EXPECT_NE(msg.find("has metadata 'lr' = '0.1\\ntrident: ok\\x1b[2J', which is not a number"), std::string::npos) << msg;
  }
  fs::remove_all(d);
}
