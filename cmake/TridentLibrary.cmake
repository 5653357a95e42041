# trident as a C++ library: libtrident.so (the API of include/trident/, implemented in src/api/
# over trident_core), the install rules for it, its headers and the CLI, and the CMake package
# a consumer finds with find_package(trident) and links as trident::trident.
#
# Shared rather than static: the archive would make every consumer find and link what the
# engine links (OpenMP, zlib, oneDNN, protobuf and onnx, the CUDA libraries) in the same
# versions, while a shared object records them itself. Built with hidden visibility and
# --exclude-libs, it exports only what include/trident/ declares (TRIDENT_API), so the
# internals and the third-party symbols they bring cannot clash with the consumer's own.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(TRIDENT_PACKAGE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/trident)
set_target_properties(trident PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
install(TARGETS trident RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

if(NOT TRIDENT_BUILD_LIBRARY)
  return()
endif()
# A portable build links libgomp.a, which is not position-independent, and exists to ship the
# CLI to older machines: it builds no library.
if(TRIDENT_PORTABLE_BINARY)
  message(STATUS "trident: libtrident.so not built: TRIDENT_PORTABLE_BINARY links libgomp.a, "
                 "which a shared object cannot hold")
  return()
endif()

# The engine goes into the shared object, so it is compiled position-independent; hidden
# visibility changes nothing for the executables that link it statically.
set_target_properties(trident_core PROPERTIES POSITION_INDEPENDENT_CODE ON CXX_VISIBILITY_PRESET hidden
                      CUDA_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)

file(GLOB TRIDENT_API_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/api/*.cpp)
add_library(trident_library SHARED ${TRIDENT_API_SOURCES})
add_library(trident::trident ALIAS trident_library)
set_target_properties(trident_library PROPERTIES
  OUTPUT_NAME trident EXPORT_NAME trident
  VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}
  CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON
  # Dependencies outside the system's folders (the CUDA libraries) stay findable once installed.
  INSTALL_RPATH_USE_LINK_PATH ON)
target_compile_features(trident_library PUBLIC cxx_std_20)
target_include_directories(trident_library PUBLIC
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_link_libraries(trident_library PRIVATE trident_core)
target_link_options(trident_library PRIVATE LINKER:--exclude-libs,ALL)
if(NOT TRIDENT_SANITIZE)
  # Every symbol the engine needs is resolved when the library is linked, not in the consumer.
  target_link_options(trident_library PRIVATE LINKER:--no-undefined)
endif()

install(TARGETS trident_library EXPORT tridentTargets LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/trident DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT tridentTargets NAMESPACE trident:: DESTINATION ${TRIDENT_PACKAGE_DIR})

# What this build has, for consumers that adapt to it (trident_WITH_CUDA, ...).
set(TRIDENT_PACKAGE_WITH_CUDA OFF)
if(TRIDENT_CUDA_ENABLED)
  set(TRIDENT_PACKAGE_WITH_CUDA ON)
endif()
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/tridentConfig.cmake.in
  ${PROJECT_BINARY_DIR}/tridentConfig.cmake INSTALL_DESTINATION ${TRIDENT_PACKAGE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/tridentConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/tridentConfig.cmake ${PROJECT_BINARY_DIR}/tridentConfigVersion.cmake
  DESTINATION ${TRIDENT_PACKAGE_DIR})
