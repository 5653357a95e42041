// libnvjpeg, opened at run time rather than linked: a GPU binary starts and trains where the
// library is missing (its images then decode on the CPU, with the reason said once), and the
// build needs only nvJPEG's header (scripts/setup.sh fetches it).
#pragma once
#include <nvjpeg.h>  // only where TRIDENT_HAVE_NVJPEG_HEADER (cmake/TridentCuda.cmake)

#include <string>

namespace trident::cuda {

// The entry points trident calls, resolved from the library.
struct NvjpegLibrary {
  decltype(&nvjpegGetProperty) get_property = nullptr;
  decltype(&nvjpegCreateExV2) create_ex_v2 = nullptr;
  decltype(&nvjpegDestroy) destroy = nullptr;
  decltype(&nvjpegJpegStateCreate) state_create = nullptr;
  decltype(&nvjpegJpegStateDestroy) state_destroy = nullptr;
  decltype(&nvjpegDecodeBatchedInitialize) batched_initialize = nullptr;
  decltype(&nvjpegDecodeBatched) decode_batched = nullptr;
  decltype(&nvjpegDecodeBatchedPreAllocate) batched_pre_allocate = nullptr;
  decltype(&nvjpegDecode) decode = nullptr;
  // Decoding only a region of each image (the hardware backend's batched call): null where the
  // library lacks them, and images are then decoded whole.
  decltype(&nvjpegDecodeParamsCreate) params_create = nullptr;
  decltype(&nvjpegDecodeParamsDestroy) params_destroy = nullptr;
  decltype(&nvjpegDecodeParamsSetOutputFormat) params_set_output_format = nullptr;
  decltype(&nvjpegDecodeParamsSetROI) params_set_roi = nullptr;
  decltype(&nvjpegDecodeBatchedEx) decode_batched_ex = nullptr;
  bool decodes_regions() const {
    return params_create && params_destroy && params_set_output_format && params_set_roi && decode_batched_ex;
  }
  std::string version;  // "13.0.0"
};

// The library (opened once per process), or null with the reason in *why: not found on the
// library path, or an entry point missing.
const NvjpegLibrary* nvjpeg_library(std::string* why);

// A status as words, for error sentences.
const char* nvjpeg_status_name(nvjpegStatus_t s);

}  // namespace trident::cuda
