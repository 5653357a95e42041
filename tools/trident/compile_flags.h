// Flags every compiling sub-command shares: which passes to switch off and where to dump the
// IR after each pass (unknown pass names are rejected by the pass manager with the list), the
// device and the backend options, and the limits on threads, memory and numeric flags.
#pragma once
#include <charconv>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "backends/backend_options.h"
#include "backends/kernel.h"
#include "core/error.h"
#include "core/memory_budget.h"
#include "passes/pass.h"
#include "runtime/device.h"
#include "runtime/host_threads.h"
#include "runtime/train_limits.h"

namespace trident::cli {

// --disable-pass and --dump-ir, bound into the CompileOptions the command compiles with.
inline void add_compile_flags(CLI::App* sub, passes::CompileOptions& f) {
  sub->add_option("--disable-pass", f.disabled_passes,
                  "Turn a pass off by name (repeatable), e.g. fuse_conv_bn_relu");
  sub->add_option("--dump-ir", f.dump_dir, "Write the graph after every pass into this directory");
}

// A flag checked against its entry of runtime/train_limits.h, the table the checkpoint reader
// also uses. Unlike CLI::Range and CLI::PositiveNumber it refuses nan and inf.
inline CLI::Validator within(const runtime::TrainLimit& limit) {
  return CLI::Validator(
      [limit](std::string& s) -> std::string {
        double v = 0;
        const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
        if (r.ec == std::errc() && r.ptr == s.data() + s.size() && limit.allows(v)) return "";
        return "must be " + limit.range() + ", not '" + s + "'";  // CLI11 puts the flag first
      },
      limit.range());
}

// --seed, an unsigned 64-bit number: a negative one is refused rather than saturated.
inline void add_seed_option(CLI::App* sub, uint64_t& seed, const std::string& help) {
  sub->add_option("--seed", seed, help)
      ->check(CLI::Validator(
          [](std::string& s) -> std::string {
            uint64_t v = 0;
            const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
            if (r.ec == std::errc() && r.ptr == s.data() + s.size()) return "";
            return "must be a whole number from 0 to 18446744073709551615, not '" + s + "'";
          },
          ""))
      ->capture_default_str();
}

// --max-memory, for the commands that allocate a plan (train, infer, bench): the plan's
// estimate is checked against it, or against the memory available at start, before allocating.
inline void add_memory_option(CLI::App* sub, std::string& max_memory) {
  sub->add_option("--max-memory", max_memory,
                  "Most host memory the run may use, e.g. 512M or 8G (K, M, G, T are powers of "
                  "1024); the plan's buffers, data and inputs are checked against it before they "
                  "are allocated (default: the memory available at start, MemAvailable capped by "
                  "the cgroup's limit). On the GPU, device buffers are checked against its free memory")
      ->type_name("SIZE")
      ->check(CLI::Validator(
          [](std::string& s) -> std::string {
            if (parse_memory_size(s)) return "";
            return "must be a size such as 512M, 8G or 1.5T (at least 1 byte, at most 1024P), not '" + s + "'";
          },
          "SIZE"));
}

// Claims what reading a whole file costs: its size for what is kept, checked once more for the
// copy the reader holds meanwhile. A file that cannot be sized is left to its reader's sentence.
inline void claim_file(MemoryBudget& budget, const std::string& path, const std::string& what) {
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) return;
  budget.claim(size, what, "use a smaller file or a larger --max-memory");
  budget.check(size, "reading " + what, "use a smaller file or a larger --max-memory");
}

// --threads and --thread-policy, for every command that runs CPU kernels.
struct ThreadFlags {
  int threads = 0;  // 0: every core the process may run on
  std::string policy = "adaptive";
  void apply() const { runtime::HostThreads::configure(threads, runtime::parse_thread_policy(policy)); }
};

inline void add_thread_options(CLI::App* sub, ThreadFlags& f) {
  sub->add_option("--threads", f.threads, "Most CPU threads to use (default: every core this process may run on)")
      ->check(CLI::Range(1, 1024));
  sub->add_option("--thread-policy", f.policy,
                  "adaptive: use only the cores other processes leave free, re-measured every "
                  "0.1 s (threads waiting for a descheduled thread lose more than the core they "
                  "gain); fixed: always --threads")
      ->check(CLI::IsMember({"adaptive", "fixed"}))
      ->capture_default_str();
}

// --device (cpu, cpu_ref, cuda or auto), --backend (its alias, from before --device took a
// backend's name), --precision, and the flags that fill BackendOptions, which the commands
// hand to the runner, the trainer or the executable as a whole.
struct DeviceFlags {
  std::string device = "cpu";
  std::string backend_alias;  // --backend, where given
  std::string precision = "fp32";
  BackendOptions backend_options;
  CLI::Option* device_flag = nullptr;  // tells a --device given from its default
};

// with_int8: the command compiles inference graphs, which the CPU backends can run in int8.
inline void add_device_options(CLI::App* sub, DeviceFlags& f, bool with_int8 = false) {
  f.device_flag =
      sub->add_option("--device", f.device,
                      "cpu (this build's default CPU backend), cpu_ref (the reference backend), "
                      "cuda, or auto (the GPU where there is one, else cpu)")
          ->check(CLI::Validator(
              [](std::string& s) -> std::string {
                std::string backends;
                for (const std::string& b : KernelRegistry::backends()) {
                  if (s == b) return "";
                  backends += (backends.empty() ? "" : ", ") + b;
                }
                if (s == "cpu" || s == "cuda" || s == "auto") return "";
                return s + " not in {cpu,cuda,auto} nor a backend of this build (" + backends + ")";
              },
              "{cpu,cpu_ref,cuda,auto}"))
          ->capture_default_str();
  sub->add_option("--backend", f.backend_alias,
                  "Alias of --device, kept for older command lines; given with --device, the two "
                  "must agree")
      ->check(CLI::IsMember(KernelRegistry::backends()));
  if (with_int8)
    sub->add_option("--precision", f.precision,
                    "fp32; on the GPU fp16 / bf16; on the CPU int8 (convolutions on int8 grids calibrated on "
                    "--calibration's images, everything else fp32)")
        ->check(CLI::IsMember({"fp32", "fp16", "bf16", "int8"}))
        ->capture_default_str();
  else
    sub->add_option("--precision", f.precision,
                    "fp32, or on the GPU fp16 / bf16 (mixed precision: fp32 master weights and BN "
                    "statistics, dynamic loss scaling)")
        ->check(CLI::IsMember({"fp32", "fp16", "bf16"}))
        ->capture_default_str();
  sub->add_flag("!--no-autotune", f.backend_options.autotune,
                "On the GPU, take cuDNN's heuristic plan for each convolution instead of timing the "
                "candidates once at start-up (starts faster; steps may be slower); on the CPU, do "
                "not time Winograd against the direct convolution (--winograd auto means off)");
  sub->add_flag("!--no-cuda-graph", f.backend_options.cuda_graph,
                "On the GPU, launch every kernel of every step instead of replaying the step recorded "
                "as a CUDA graph");
  sub->add_flag("!--no-small-channel-conv", f.backend_options.small_channel_conv,
                "On the GPU, run a first layer's few-channel convolution on cuDNN rather than on trident's "
                "own kernel with its batch statistics");
  sub->add_flag("--side-stream", f.backend_options.side_stream,
                "On the GPU, run each data-gradient convolution beside its weight gradient on a second "
                "stream (faster on large layers; with recorded steps it has broken f16/bf16 training of "
                "small feature maps)");
  sub->add_flag("--deterministic", f.backend_options.deterministic,
                "The same bits on every run, and on the CPU at every thread count: nothing is chosen by "
                "timing (as --no-autotune), cuDNN runs only deterministic engines (a layer without one "
                "is an error), and the cpu backend sums weight gradients and batchnorm statistics in a "
                "fixed order (slower)");
}

// --winograd, for the commands that compile inference graphs (infer, bench, explain): the
// words auto, on and off become BackendOptions::winograd's -1, 1 and 0 as they are parsed.
inline void add_winograd_option(CLI::App* sub, DeviceFlags& f) {
  sub->add_option("--winograd", f.backend_options.winograd,
                  "CPU inference: compute 3x3 stride-1 convolutions by Winograd's transforms "
                  "(oneDNN; rounds differently from the direct convolution, within fp32 "
                  "tolerance): auto where timing each shape once at start-up says it is faster, "
                  "on wherever oneDNN has it, off never")
      ->transform(CLI::Validator(
          [](std::string& s) -> std::string {
            if (s != "auto" && s != "on" && s != "off") return s + " not in {auto,on,off}";
            s = s == "auto" ? "-1" : s == "on" ? "1" : "0";
            return "";
          },
          "{auto,on,off}"))
      ->type_name("TEXT")
      ->default_str("auto");
}

// --plan-cache, for the same commands: where the choices timed at start-up persist, so the
// next run of the same shapes on this machine starts without timing (backends/cpu/plan_cache.h,
// backends/cuda/plan_cache.h).
inline void add_plan_cache_option(CLI::App* sub, DeviceFlags& f) {
  f.backend_options.plan_cache_dir = trident::default_plan_cache_dir();
  sub->add_option("--plan-cache", f.backend_options.plan_cache_dir,
                  "Where the choices timed at start-up (the CPU's convolution implementations, the GPU's "
                  "cuDNN plans) are kept for the next run on this machine (default: $TRIDENT_PLAN_CACHE, else "
                  "$XDG_CACHE_HOME/trident, else ~/.cache/trident); off: time them again every run")
      ->transform(CLI::Validator(
          [](std::string& s) -> std::string {
            if (s == "off") s.clear();
            return "";
          },
          "DIR|off"))
      ->type_name("DIR|off");
}

inline DType precision_dtype(const DeviceFlags& f) {
  return f.precision == "fp16" ? DType::f16 : f.precision == "bf16" ? DType::bf16 : DType::f32;
}

// The device asked for: --device, or --backend where only the alias is given. Both given and
// naming different devices is an Error in one sentence.
inline std::string device_choice(const DeviceFlags& f) {
  if (f.backend_alias.empty()) return f.device;
  if (f.device_flag && f.device_flag->count() > 0 && f.device != f.backend_alias)
    throw trident::Error("--device " + f.device + " and --backend " + f.backend_alias +
                         " disagree; --backend is an alias of --device, so give one of them");
  return f.backend_alias;
}

// The backend that runs: cuda for --device cuda (an Error without a GPU), the CPU backend
// named or the default one otherwise; --device auto prints a notice when it falls back.
// Reduced precision needs the GPU.
inline std::string resolve_device(const DeviceFlags& f) {
  std::string notice;
  const std::string backend = runtime::backend_for_device(device_choice(f), &notice);
  if (!notice.empty()) std::cerr << "trident: notice: " << notice << "\n";
  if (f.precision == "int8" && backend == "cuda")
    throw trident::Error("--precision int8 runs on the CPU backends (cpu, cpu_ref); the cuda backend has no int8 "
                         "convolution yet");
  if (f.precision != "fp32" && f.precision != "int8" && backend != "cuda")
    throw trident::Error("--precision " + f.precision + " needs --device cuda; the CPU backends run fp32 (or int8 in "
                         "inference)");
  return backend;
}

}  // namespace trident::cli
