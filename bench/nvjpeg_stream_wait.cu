// Where nvJPEG's batched decode waits beside other work on the GPU: a standalone program, apart
// from trident, so a new nvJPEG, driver or GPU can be checked without the engine around it.
// Busy work — a "step" of 300 short kernels that fill every multiprocessor, one 30 ms kernel
// that fills them, or one 30 ms single-block kernel — is queued on one stream, and a batch of
// JPEGs is decoded on a second stream of the highest priority, after it or from a thread just
// before it. Per trial it prints when the busy work ended, when the decode call returned on the
// host and when the decoded event landed (ms from the busy work's start); with CUPTI it also
// lists the CUDA calls nvJPEG made inside the call and those that blocked over 0.3 ms.
// Built and run by bench/nvjpeg_stream_wait.sh; docs/GPU.md says what it found.
//   nvjpeg_stream_wait DIR N [VARIANTS]   VARIANTS: a list naming hw-rgbi, hw-rgb, hybrid-rgbi
#include <cuda_runtime.h>
#include <cupti.h>
#include <dirent.h>
#include <nvjpeg.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

void check(long status, const char* what) {
  if (status == 0) return;
  std::fprintf(stderr, "%s failed (status %ld)\n", what, status);
  std::exit(1);
}

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

__global__ void spin(long long ns) {
  long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}

// The CUDA calls made while `capturing`, by name, and those that took over 0.3 ms.
std::atomic<bool> capturing{false};
std::mutex calls_mutex;
std::map<std::string, int> call_counts;
std::vector<std::pair<std::string, double>> long_calls;
thread_local std::vector<Clock::time_point> entered;

void CUPTIAPI on_call(void*, CUpti_CallbackDomain domain, CUpti_CallbackId, const void* data) {
  const auto* cb = static_cast<const CUpti_CallbackData*>(data);
  if (cb->callbackSite == CUPTI_API_ENTER) {
    entered.push_back(Clock::now());
    return;
  }
  if (entered.empty()) return;
  const double ms = ms_since(entered.back());
  entered.pop_back();
  if (!capturing.load() || domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
  std::lock_guard<std::mutex> lock(calls_mutex);
  call_counts[cb->functionName]++;
  if (ms > 0.3) long_calls.emplace_back(cb->functionName, ms);
}

void print_calls() {
  std::lock_guard<std::mutex> lock(calls_mutex);
  std::printf("    calls:");
  for (const auto& c : call_counts) std::printf(" %s x%d", c.first.c_str(), c.second);
  std::printf("\n    over 0.3 ms:");
  for (const auto& c : long_calls) std::printf(" %s %.2f", c.first.c_str(), c.second);
  std::printf("\n");
  call_counts.clear();
  long_calls.clear();
}

std::vector<std::vector<unsigned char>> read_jpegs(const std::string& dir, int n) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string s = e->d_name;
      if (s.size() > 4 && s.compare(s.size() - 4, 4, ".jpg") == 0) names.push_back(dir + "/" + s);
    }
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  std::vector<std::vector<unsigned char>> files;
  for (int i = 0; i < n && !names.empty(); ++i) {
    std::ifstream in(names[i % names.size()], std::ios::binary);
    files.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return files;
}

// One nvJPEG handle, its batched state and device outputs for `files`.
class BatchDecoder {
 public:
  BatchDecoder(nvjpegBackend_t backend, nvjpegOutputFormat_t format,
               const std::vector<std::vector<unsigned char>>& files) {
    if (nvjpegCreateEx(backend, nullptr, nullptr, 0, &handle_) != NVJPEG_STATUS_SUCCESS) {
      handle_ = nullptr;
      return;
    }
    check(nvjpegJpegStateCreate(handle_, &state_), "nvjpegJpegStateCreate");
    check(nvjpegDecodeBatchedInitialize(handle_, state_, static_cast<int>(files.size()), 1, format),
          "nvjpegDecodeBatchedInitialize");
    for (const auto& f : files) {
      int components = 0, widths[NVJPEG_MAX_COMPONENT], heights[NVJPEG_MAX_COMPONENT];
      nvjpegChromaSubsampling_t subsampling;
      check(nvjpegGetImageInfo(handle_, f.data(), f.size(), &components, &subsampling, widths, heights),
            "nvjpegGetImageInfo");
      nvjpegImage_t image{};
      const int planes = format == NVJPEG_OUTPUT_RGBI ? 1 : 3;
      const size_t row = static_cast<size_t>(widths[0]) * (planes == 1 ? 3 : 1);
      for (int p = 0; p < planes; ++p) {
        check(cudaMalloc(&image.channel[p], row * heights[0]), "cudaMalloc");
        image.pitch[p] = row;
      }
      out_.push_back(image);
      data_.push_back(f.data());
      sizes_.push_back(f.size());
    }
  }
  bool ok() const { return handle_ != nullptr; }
  void decode(cudaStream_t stream) {
    const nvjpegStatus_t s = nvjpegDecodeBatched(handle_, state_, data_.data(), sizes_.data(), out_.data(), stream);
    if (s != NVJPEG_STATUS_SUCCESS) std::printf("    the batch failed (status %d)\n", static_cast<int>(s));
  }

 private:
  nvjpegHandle_t handle_ = nullptr;
  nvjpegJpegState_t state_ = nullptr;
  std::vector<nvjpegImage_t> out_;
  std::vector<const unsigned char*> data_;
  std::vector<size_t> sizes_;
};

int multiprocessors = 0;

void queue_busy(cudaStream_t s, const std::string& kind) {
  if (kind == "step")
    for (int i = 0; i < 300; ++i) spin<<<multiprocessors * 8, 256, 0, s>>>(100000);
  else if (kind == "one full kernel")
    spin<<<multiprocessors * 8, 256, 0, s>>>(30000000);
  else if (kind == "one block")
    spin<<<1, 32, 0, s>>>(30000000);
}

// Busy work `busy` on `busy_stream` and the decode on `decode_stream` (none where `d` is null),
// the decode called after the busy work is queued, or (`decode_first`) from a thread 1 ms before.
void trial(BatchDecoder* d, cudaStream_t busy_stream, cudaStream_t decode_stream, const std::string& busy,
           bool decode_first, bool show_calls, const std::string& label) {
  cudaEvent_t start, busy_end, decoded;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&busy_end), "cudaEventCreate");
  check(cudaEventCreate(&decoded), "cudaEventCreate");
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  double call_start = 0, call_end = 0;
  const Clock::time_point t0 = Clock::now();
  check(cudaEventRecord(start, busy_stream), "cudaEventRecord");
  auto call = [&] {
    capturing = show_calls;
    call_start = ms_since(t0);
    if (d) d->decode(decode_stream);
    call_end = ms_since(t0);
    capturing = false;
    check(cudaEventRecord(decoded, decode_stream), "cudaEventRecord");
  };
  if (decode_first) {
    std::thread caller(call);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    queue_busy(busy_stream, busy);
    check(cudaEventRecord(busy_end, busy_stream), "cudaEventRecord");
    caller.join();
  } else {
    queue_busy(busy_stream, busy);
    check(cudaEventRecord(busy_end, busy_stream), "cudaEventRecord");
    call();
  }
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  float busy_ms = 0, decoded_ms = 0;
  check(cudaEventElapsedTime(&busy_ms, start, busy_end), "cudaEventElapsedTime");
  check(cudaEventElapsedTime(&decoded_ms, start, decoded), "cudaEventElapsedTime");
  std::printf("%-40s busy work ends %6.2f | call %6.2f .. %6.2f | decoded %6.2f\n", label.c_str(), busy_ms, call_start,
              call_end, decoded_ms);
  if (show_calls) print_calls();
  cudaEventDestroy(start);
  cudaEventDestroy(busy_end);
  cudaEventDestroy(decoded);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: nvjpeg_stream_wait DIR N [VARIANTS]\n");
    return 2;
  }
  const auto files = read_jpegs(argv[1], std::atoi(argv[2]));
  const std::string only = argc > 3 ? argv[3] : "";
  if (files.empty()) {
    std::fprintf(stderr, "no .jpg files in %s\n", argv[1]);
    return 2;
  }
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  multiprocessors = prop.multiProcessorCount;
  const char* connections = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  std::printf("%zu JPEGs, %s (%d multiprocessors), CUDA_DEVICE_MAX_CONNECTIONS=%s\n", files.size(), prop.name,
              multiprocessors, connections ? connections : "unset (8)");
  CUpti_SubscriberHandle subscriber;
  const bool cupti = cuptiSubscribe(&subscriber, reinterpret_cast<CUpti_CallbackFunc>(on_call), nullptr) ==
                         CUPTI_SUCCESS &&
                     cuptiEnableDomain(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API) == CUPTI_SUCCESS;
  std::printf("CUPTI call tracing %s\n", cupti ? "on" : "unavailable");
  int least = 0, greatest = 0;
  check(cudaDeviceGetStreamPriorityRange(&least, &greatest), "cudaDeviceGetStreamPriorityRange");
  cudaStream_t busy_stream, decode_stream;
  check(cudaStreamCreateWithFlags(&busy_stream, cudaStreamNonBlocking), "cudaStreamCreate");
  check(cudaStreamCreateWithPriority(&decode_stream, cudaStreamNonBlocking, greatest), "cudaStreamCreate");
  struct Variant {
    const char* name;
    nvjpegBackend_t backend;
    nvjpegOutputFormat_t format;
  };
  const Variant variants[] = {{"hw-rgbi", NVJPEG_BACKEND_HARDWARE, NVJPEG_OUTPUT_RGBI},
                              {"hw-rgb", NVJPEG_BACKEND_HARDWARE, NVJPEG_OUTPUT_RGB},
                              {"hybrid-rgbi", NVJPEG_BACKEND_GPU_HYBRID, NVJPEG_OUTPUT_RGBI}};
  for (const Variant& v : variants) {
    if (!only.empty() && only.find(v.name) == std::string::npos) continue;
    BatchDecoder d(v.backend, v.format, files);
    if (!d.ok()) {
      std::printf("== %s: nvJPEG has no such decoder here\n", v.name);
      continue;
    }
    std::printf("== %s\n", v.name);
    for (int i = 0; i < 3; ++i) d.decode(decode_stream);  // warm up: nvJPEG's buffers
    const std::string name = v.name;
    for (int r = 0; r < 2; ++r) {
      trial(&d, busy_stream, decode_stream, "none", false, cupti && r == 0, name + " alone");
      trial(nullptr, busy_stream, decode_stream, "step", false, false, name + " step alone");
    }
    for (const char* busy : {"step", "one full kernel", "one block"})
      for (int r = 0; r < 2; ++r)
        trial(&d, busy_stream, decode_stream, busy, false, cupti && r == 0, name + " after " + busy);
    for (int r = 0; r < 2; ++r) trial(&d, busy_stream, decode_stream, "step", true, false, name + " just before step");
    std::fflush(stdout);
  }
  return 0;
}
