# A portable binary: the C++ runtime, libgcc and OpenMP linked statically, plus a local
# arc4random (src/portable/), so a program built on Debian 12 (glibc 2.36) starts on machines
# with glibc 2.35 that lack GCC 12's runtime, such as the H200 test machines.
# An interface source: compiled into every executable that links trident_core, since the static
# libstdc++ that needs it comes after trident_core's archive on the link line.
target_sources(trident_core INTERFACE ${PROJECT_SOURCE_DIR}/src/portable/arc4random.cpp)
add_link_options(-static-libstdc++ -static-libgcc)
execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=libgomp.a
                OUTPUT_VARIABLE TRIDENT_LIBGOMP_STATIC OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT EXISTS "${TRIDENT_LIBGOMP_STATIC}")
  message(FATAL_ERROR "TRIDENT_PORTABLE_BINARY needs libgomp.a from the compiler")
endif()
set(TRIDENT_OPENMP_LINK -fopenmp ${TRIDENT_LIBGOMP_STATIC} Threads::Threads ${CMAKE_DL_LIBS})
