// The host thread governor: its decision rule, that it measures another process's load and
// gives up threads for it, and that an executable whose thread count changes between steps
// (a oneDNN kernel set per count) computes each step exactly as one built for that count.
#include <gtest/gtest.h>

#include <omp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "core/error.h"
#include "frontend/zoo.h"
#include "runtime/host_threads.h"
#include "runtime/executable.h"

using namespace trident;
using runtime::adaptive_thread_count;
using runtime::HostThreads;
using runtime::ThreadPolicy;

TEST(HostThreads, DecisionRule) {
  // 2 cores. One busy process beside 2 threads takes 2/3 of a core: down to 1.
  EXPECT_EQ(adaptive_thread_count(0.67, 2, 2, 2), 1);
  // ...and beside 1 thread a whole core: stay at 1.
  EXPECT_EQ(adaptive_thread_count(1.0, 2, 2, 1), 1);
  EXPECT_EQ(adaptive_thread_count(1.33, 2, 2, 2), 1);
  // Quiet again: back up to 2.
  EXPECT_EQ(adaptive_thread_count(0.05, 2, 2, 1), 2);
  // A process using about half a core changes nothing in either direction (the dead band).
  EXPECT_EQ(adaptive_thread_count(0.45, 2, 2, 2), 2);
  EXPECT_EQ(adaptive_thread_count(0.45, 2, 2, 1), 1);
  // Never below 1, never above the maximum.
  EXPECT_EQ(adaptive_thread_count(5.0, 2, 2, 2), 1);
  EXPECT_EQ(adaptive_thread_count(0.0, 16, 4, 2), 4);
  // 8 cores, 2.5 of them taken: 6 threads (the nearest whole number of free cores).
  EXPECT_EQ(adaptive_thread_count(2.5, 8, 8, 8), 6);
  EXPECT_EQ(adaptive_thread_count(2.5, 8, 8, 4), 5);
}

TEST(HostThreads, PolicyNames) {
  EXPECT_EQ(runtime::parse_thread_policy("fixed"), ThreadPolicy::Fixed);
  EXPECT_EQ(runtime::parse_thread_policy("adaptive"), ThreadPolicy::Adaptive);
  EXPECT_THROW(runtime::parse_thread_policy("spin"), Error);
}

TEST(HostThreads, FixedPolicyKeepsTheMaximum) {
  HostThreads::configure(2, ThreadPolicy::Fixed);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(HostThreads::for_next_step(), 2);
  EXPECT_EQ(omp_get_max_threads(), 2);
}

// A child process spinning on a core: the adaptive policy must see it and give a thread up.
TEST(HostThreads, AdaptivePolicyYieldsToAnotherProcess) {
  cpu_set_t set;
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  if (CPU_COUNT(&set) != 2) GTEST_SKIP() << "written for a process allowed 2 cores, this one has " << CPU_COUNT(&set);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    for (;;) asm volatile("");  // spin
  }
  HostThreads::configure(2, ThreadPolicy::Adaptive);
  int threads = 2;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (threads == 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the governor's window
    threads = HostThreads::for_next_step();
  }
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  HostThreads::configure(2, ThreadPolicy::Fixed);
  EXPECT_EQ(threads, 1) << "a process spinning on one of two cores went unnoticed for 5 s";
}

namespace {
std::unique_ptr<runtime::Executable> compile_training(int threads) {
  HostThreads::configure(threads, ThreadPolicy::Fixed);
  passes::CompileOptions opt;
  opt.mode = passes::Mode::Train;
  auto exe = runtime::Executable::compile(frontend::build_model("fmnist_cnn", {16}), opt);
  exe->init_parameters(4);
  TensorView images = exe->find("images"), labels = exe->find("labels");
  for (int64_t i = 0; i < images.numel(); ++i) images.as<float>()[i] = static_cast<float>(i % 23) * 0.1f - 1.0f;
  for (int64_t i = 0; i < labels.numel(); ++i) labels.as<int32_t>()[i] = static_cast<int32_t>(i % 10);
  exe->find("lr").as<float>()[0] = 0.05f;
  return exe;
}
}  // namespace

// One executable that runs its steps on 2, 1, 2, 1 threads (a kernel set per count, switched
// between steps) computes each step bit for bit as an executable built for that count alone.
TEST(HostThreads, SwitchedKernelSetsMatchExecutablesBuiltForTheCount) {
  if (omp_get_num_procs() < 2) GTEST_SKIP() << "needs 2 processors to run 2 threads";
  auto switching = compile_training(2);
  auto one = compile_training(1), two = compile_training(2);
  for (int step = 0; step < 4; ++step) {
    const int threads = step % 2 ? 1 : 2;
    runtime::Executable& ref = threads == 1 ? *one : *two;
    ref.import_weights(switching->export_weights(), true);
    HostThreads::configure(threads, ThreadPolicy::Fixed);
    switching->run();
    ref.run();
    EXPECT_EQ(omp_get_max_threads(), threads);
    const runtime::WeightMap got = switching->export_weights(), want = ref.export_weights();
    for (const auto& [name, w] : want) EXPECT_EQ(got.at(name).data, w.data) << name << " after step " << step + 1;
    EXPECT_EQ(std::memcmp(switching->find("loss").data, ref.find("loss").data, 4), 0) << "step " << step + 1;
  }
  HostThreads::configure(2, ThreadPolicy::Fixed);
}
