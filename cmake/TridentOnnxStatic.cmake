# ONNX import and export in a portable binary (scripts/build_gpu.sh). Debian's libonnx_proto.so
# and libprotobuf.so are not on the machines a portable binary runs on, so the protobuf classes
# of ONNX are generated here from the onnx.proto that libonnx-dev installs, with the protoc of
# the same protobuf release, and linked with the static libprotobuf.a of libprotobuf-dev.
# The classes go to onnx/onnx-ml.pb.h under the build folder, the name onnx/onnx_pb.h includes
# with ONNX_ML set, and that folder comes before the system's on the include path. The importer
# reads unknown fields and descriptors, so the classes are generated for the full runtime: the
# proto's "optimize_for = LITE_RUNTIME" line is dropped in the copy (this file, run with -P).
if(CMAKE_SCRIPT_MODE_FILE)
  file(READ ${PROTO_IN} text)
  string(REGEX REPLACE "option optimize_for = LITE_RUNTIME;" "" text "${text}")
  file(WRITE ${PROTO_OUT} "${text}")
  return()
endif()
find_program(TRIDENT_PROTOC protoc REQUIRED)
find_file(TRIDENT_ONNX_PROTO onnx/onnx.proto REQUIRED)
find_library(TRIDENT_PROTOBUF_STATIC NAMES libprotobuf.a REQUIRED)
set(TRIDENT_ONNX_GEN ${CMAKE_BINARY_DIR}/onnx_classes)
add_custom_command(
  OUTPUT ${TRIDENT_ONNX_GEN}/onnx/onnx-ml.pb.cc ${TRIDENT_ONNX_GEN}/onnx/onnx-ml.pb.h
  COMMAND ${CMAKE_COMMAND} -E make_directory ${TRIDENT_ONNX_GEN}/onnx
  COMMAND ${CMAKE_COMMAND} -DPROTO_IN=${TRIDENT_ONNX_PROTO} -DPROTO_OUT=${TRIDENT_ONNX_GEN}/onnx/onnx-ml.proto
          -P ${CMAKE_CURRENT_LIST_FILE}
  COMMAND ${TRIDENT_PROTOC} --cpp_out=${TRIDENT_ONNX_GEN} -I${TRIDENT_ONNX_GEN} ${TRIDENT_ONNX_GEN}/onnx/onnx-ml.proto
  DEPENDS ${TRIDENT_ONNX_PROTO} ${CMAKE_CURRENT_LIST_FILE}
  COMMENT "Generating ONNX's protobuf classes from ${TRIDENT_ONNX_PROTO}")
add_library(trident_onnx_classes STATIC ${TRIDENT_ONNX_GEN}/onnx/onnx-ml.pb.cc)
# Generated code: the project's warning flags are not for it.
target_compile_options(trident_onnx_classes PRIVATE -w)
target_include_directories(trident_onnx_classes BEFORE PUBLIC ${TRIDENT_ONNX_GEN})
target_compile_definitions(trident_onnx_classes PUBLIC ONNX_NAMESPACE=onnx ONNX_ML=1)
target_link_libraries(trident_onnx_classes PUBLIC ${TRIDENT_PROTOBUF_STATIC} ZLIB::ZLIB Threads::Threads)
