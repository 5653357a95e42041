// External data of ONNX tensors: PyTorch's default (dynamo) exporter writes the weights to a
// file beside the model and each initializer names it with a location, an offset and a length.
// The model is untrusted, so the location may only name a regular file inside the model's own
// folder (ExternalData in onnx_detail.h) and the range is checked against the file's size
// before anything is read.
#include <algorithm>
#include <charconv>
#include <filesystem>
#include <system_error>

#include "core/error.h"
#include "core/input_file.h"
#include "core/printable.h"
#include "frontend/onnx/onnx_detail.h"

namespace trident::frontend::onnx_detail {

namespace {

namespace fs = std::filesystem;

uint64_t parse_size(const std::string& text, const char* key, const std::string& what) {
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size())
    throw Error(what + ": external data " + key + " " + quoted_name(text) + " is not a byte count");
  return v;
}

// The location as a path inside `folder`, or an Error saying why it is not one.
fs::path confined_path(const std::string& folder, const std::string& location, const std::string& what) {
  const std::string where = what + ": external data location " + quoted_name(location);
  if (location.empty()) throw Error(what + " keeps its data in an external file but names none");
  if (location.find('\0') != std::string::npos) throw Error(where + " holds a NUL byte");
  const fs::path rel(location);
  if (rel.is_absolute() || rel.has_root_name() || rel.has_root_directory())
    throw Error(where + " is absolute; it must name a file beside the model");
  for (const fs::path& part : rel)
    if (part == "..") throw Error(where + " climbs out of the model's folder");
  std::error_code ec;
  const fs::path base = fs::canonical(folder, ec);
  if (ec) throw Error(what + ": the model's folder " + quoted_name(folder) + " cannot be resolved: " + ec.message());
  const fs::path file = fs::canonical(base / rel, ec);
  if (ec) throw Error(where + " cannot be opened: " + ec.message());
  // A link inside the folder may still point out of it: compare the resolved paths.
  const auto [b, f] = std::mismatch(base.begin(), base.end(), file.begin(), file.end());
  if (b != base.end()) throw Error(where + " resolves outside the model's folder");
  return file;
}

}  // namespace

std::string ExternalData::read(const onnx::TensorProto& t, uint64_t max_bytes, const std::string& what) const {
  if (folder_.empty())
    throw Error(what + " keeps its data in an external file, which trident reads only when the model is loaded "
                       "from its own file");
  std::string location;
  uint64_t offset = 0, length = 0;
  bool has_length = false;
  for (const auto& kv : t.external_data()) {
    if (kv.key() == "location") location = kv.value();
    else if (kv.key() == "offset") offset = parse_size(kv.value(), "offset", what);
    else if (kv.key() == "length") length = parse_size(kv.value(), "length", what), has_length = true;
    else if (kv.key() != "checksum")
      throw Error(what + ": external data key " + quoted_name(kv.key()) + " is not understood");
  }
  const fs::path path = confined_path(folder_, location, what);
  const InputFile file(path.string(), "ONNX external data file");
  if (offset > file.size())
    throw Error(what + ": external data offset " + std::to_string(offset) + " lies past the end of " +
                quoted_name(location) + " (" + std::to_string(file.size()) + " bytes)");
  if (!has_length) length = file.size() - offset;
  if (length > file.size() - offset)
    throw Error(what + ": external data of " + std::to_string(length) + " bytes at offset " + std::to_string(offset) +
                " runs past the end of " + quoted_name(location) + " (" + std::to_string(file.size()) + " bytes)");
  if (length > max_bytes)
    throw Error(what + ": external data of " + std::to_string(length) + " bytes is more than its " +
                std::to_string(max_bytes / 8) + " elements can hold");
  uint64_t& so_far = read_[path.string()];
  if (length > file.size() - std::min(so_far, file.size()))
    throw Error(what + ": its " + std::to_string(length) + " bytes of " + quoted_name(location) + " and the " +
                std::to_string(so_far) + " bytes other tensors read from it are more than the file's " +
                std::to_string(file.size()) + " bytes: tensors that share bytes are not read twice");
  so_far += length;
  if (budget_) budget_->claim(length, what + " (external data)", "use a smaller model or a larger --max-memory");
  std::string bytes(static_cast<size_t>(length), '\0');
  if (length) file.read_at(offset, static_cast<size_t>(length), bytes.data());
  return bytes;
}

}  // namespace trident::frontend::onnx_detail
