# The "cuda" backend: CUDA (sm_90 by default), cuDNN 9 from the machine, cudnn-frontend's
# headers from the project-local prefix scripts/setup.sh fills (.deps/, git-ignored), and
# cuBLASLt. TRIDENT_WITH_CUDA=AUTO builds it wherever all of them are found and says which
# one is missing otherwise; ON makes a missing piece an error.
set(TRIDENT_CUDNN_FRONTEND_VERSION 1.23.0)
set(TRIDENT_CUDNN_FRONTEND_INCLUDE
    ${PROJECT_SOURCE_DIR}/.deps/cudnn-frontend-${TRIDENT_CUDNN_FRONTEND_VERSION}/include
    CACHE PATH "cudnn-frontend headers (installed by scripts/setup.sh)")

set(_trident_cuda_missing "")
if(NOT CMAKE_CUDA_COMPILER)
  set(_trident_cuda_missing "no CUDA compiler (nvcc)")
else()
  find_package(CUDAToolkit QUIET)
  if(NOT CUDAToolkit_FOUND)
    set(_trident_cuda_missing "no CUDA toolkit")
  endif()
endif()
if(NOT _trident_cuda_missing)
  find_path(TRIDENT_CUDNN_INCLUDE cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/include /usr/local/cuda/include)
  find_library(TRIDENT_CUDNN_LIBRARY cudnn
    HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib ${CUDAToolkit_LIBRARY_ROOT}/lib64
          /usr/local/cuda/lib /usr/local/cuda/lib64)
  if(NOT TRIDENT_CUDNN_INCLUDE OR NOT TRIDENT_CUDNN_LIBRARY)
    set(_trident_cuda_missing "no cuDNN (cudnn.h / libcudnn)")
  elseif(NOT EXISTS ${TRIDENT_CUDNN_FRONTEND_INCLUDE}/cudnn_frontend.h)
    set(_trident_cuda_missing "no cudnn-frontend headers in ${TRIDENT_CUDNN_FRONTEND_INCLUDE} (run scripts/setup.sh)")
  endif()
endif()

if(_trident_cuda_missing)
  if(TRIDENT_WITH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "TRIDENT_WITH_CUDA=ON but ${_trident_cuda_missing}")
  endif()
  message(STATUS "trident: GPU backend not built: ${_trident_cuda_missing}")
  set(TRIDENT_CUDA_ENABLED OFF)
  return()
endif()

set(TRIDENT_CUDA_ENABLED ON)
set(TRIDENT_CUDA_ARCHITECTURES 90 CACHE STRING "GPU architectures to compile for (90: H100/H200)")
enable_language(CUDA)
# Device code is C++17: CMake 3.25 does not know nvcc's C++20 flag.
set(CMAKE_CUDA_STANDARD 17)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
message(STATUS "trident: GPU backend on CUDA ${CUDAToolkit_VERSION}, sm_${TRIDENT_CUDA_ARCHITECTURES}, "
               "cuDNN ${TRIDENT_CUDNN_LIBRARY}, cudnn-frontend ${TRIDENT_CUDNN_FRONTEND_VERSION}")

file(GLOB_RECURSE TRIDENT_CUDA_SOURCES CONFIGURE_DEPENDS
     ${PROJECT_SOURCE_DIR}/src/backends/cuda/*.cpp ${PROJECT_SOURCE_DIR}/src/backends/cuda/*.cu)
list(FILTER TRIDENT_CUDA_SOURCES EXCLUDE REGEX "/traits\\.cpp$")  # built always (CMakeLists.txt)
target_sources(trident_core PRIVATE ${TRIDENT_CUDA_SOURCES})
set_target_properties(trident_core PROPERTIES CUDA_ARCHITECTURES "${TRIDENT_CUDA_ARCHITECTURES}"
                      CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON)
# -march=native and the warning flags are for the host compiler only.
set_source_files_properties(${TRIDENT_CUDA_SOURCES} PROPERTIES COMPILE_OPTIONS "")
target_compile_options(trident_core PRIVATE
  $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -Xcompiler=-Wall>)
target_include_directories(trident_core SYSTEM PUBLIC ${TRIDENT_CUDNN_INCLUDE} ${CUDAToolkit_INCLUDE_DIRS})
target_include_directories(trident_core SYSTEM PRIVATE ${TRIDENT_CUDNN_FRONTEND_INCLUDE})
# cudnn-frontend ≥ 1.19 includes nvrtc.h for its run-time compiled kernels: link NVRTC.
target_link_libraries(trident_core PUBLIC CUDA::cudart_static CUDA::cublasLt CUDA::nvrtc ${TRIDENT_CUDNN_LIBRARY})
target_compile_definitions(trident_core PUBLIC TRIDENT_HAVE_CUDA=1)

# nvJPEG, for decoding training images on the GPU: its header from the project-local prefix
# (scripts/setup.sh), the library opened at run time (backends/cuda/nvjpeg_library.cpp), so a
# binary starts and trains where libnvjpeg is missing. Without the header the GPU decodes nothing.
set(TRIDENT_NVJPEG_VERSION 13.0.0.40)
set(TRIDENT_NVJPEG_INCLUDE ${PROJECT_SOURCE_DIR}/.deps/nvjpeg-${TRIDENT_NVJPEG_VERSION}/include
    CACHE PATH "nvJPEG header (installed by scripts/setup.sh)")
if(EXISTS ${TRIDENT_NVJPEG_INCLUDE}/nvjpeg.h)
  target_include_directories(trident_core SYSTEM PRIVATE ${TRIDENT_NVJPEG_INCLUDE})
  target_compile_definitions(trident_core PRIVATE TRIDENT_HAVE_NVJPEG_HEADER=1)
  target_link_libraries(trident_core PUBLIC ${CMAKE_DL_LIBS})
  message(STATUS "trident: GPU image decoding through nvJPEG (opened at run time)")
else()
  message(STATUS "trident: GPU image decoding not built: no nvJPEG header in ${TRIDENT_NVJPEG_INCLUDE} (run scripts/setup.sh)")
endif()
