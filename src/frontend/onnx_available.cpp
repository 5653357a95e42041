// Always compiled: reports whether the ONNX importer was built, and stands in for it with a
// clear Error when trident was configured with -DTRIDENT_WITH_ONNX=OFF.
#include "core/error.h"
#include "frontend/onnx/onnx_export.h"
#include "frontend/onnx/onnx_import.h"

namespace trident::frontend {

#ifdef TRIDENT_HAVE_ONNX
bool onnx_import_available() { return true; }
#else
bool onnx_import_available() { return false; }

namespace {
[[noreturn]] void unavailable(const std::string& what) {
  throw Error("cannot read '" + what +
              "': this trident was built without ONNX support (configure with "
              "-DTRIDENT_WITH_ONNX=ON and install libonnx-dev, libprotobuf-dev)");
}
}  // namespace

OnnxImport import_onnx(const std::string& path, const OnnxOptions&) { unavailable(path); }
OnnxImport import_onnx_from_memory(const void*, size_t, const OnnxOptions&,
                                   const std::string& label) {
  unavailable(label);
}
OnnxExportSummary export_onnx(const ir::Graph&, const runtime::WeightMap&, const OnnxExportOptions&,
                              const std::string& path) {
  throw Error("cannot write '" + path +
              "': this trident was built without ONNX support (configure with -DTRIDENT_WITH_ONNX=ON and install "
              "libonnx-dev, libprotobuf-dev)");
}
#endif

}  // namespace trident::frontend
