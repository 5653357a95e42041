// Listing an image folder (see image_folder.h). Every filesystem call takes an error_code, so a
// folder that cannot be read is one sentence naming it, never a std::filesystem exception.
#include "runtime/data/image_folder.h"

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "core/printable.h"
#include "core/random.h"
#include "runtime/data/dataset.h"
#include "runtime/data/image_codec.h"

namespace trident::data {

namespace {

namespace fs = std::filesystem;

constexpr const char* kLayout = "an image folder holds DIR/train/<class>/ and DIR/val/<class>/ with .jpg, .jpeg or .png images";

bool is_hidden(const fs::path& p) { return p.filename().string().starts_with("."); }

bool is_folder(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}

// The images under one class folder, sorted by path; other files are counted in `s`.
std::vector<std::string> class_images(const fs::path& class_dir, ImageFolderSplit& s) {
  std::vector<std::string> files;
  std::error_code ec;
  fs::recursive_directory_iterator it(class_dir, fs::directory_options::follow_directory_symlink, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    if (is_hidden(p)) {
      if (it->is_directory(ec)) it.disable_recursion_pending();
      continue;
    }
    if (it->is_directory(ec)) continue;
    if (!has_image_extension(p.filename().string())) {
      if (s.skipped_files++ == 0) s.first_skipped = p.string();
      continue;
    }
    files.push_back(p.string());
  }
  if (ec) throw Error("cannot list the class folder " + quoted_name(class_dir.string()) + ": " + ec.message());
  if (files.empty()) throw Error("the class folder " + quoted_name(class_dir.string()) + " holds no images; " + kLayout);
  std::sort(files.begin(), files.end());
  return files;
}

std::string class_difference(const std::vector<std::string>& mine, const std::vector<std::string>& theirs) {
  for (const std::string& c : theirs)
    if (!std::binary_search(mine.begin(), mine.end(), c)) return quoted_name(c) + " is missing";
  for (const std::string& c : mine)
    if (!std::binary_search(theirs.begin(), theirs.end(), c)) return quoted_name(c) + " is extra";
  return "";
}

}  // namespace

bool is_image_folder_dir(const std::string& dir) {
  return is_folder(fs::path(dir) / "train") || is_folder(fs::path(dir) / "val");
}

ImageFolderSplit scan_image_folder(const std::string& dir, const std::string& split, int64_t max_samples,
                                   const std::vector<std::string>* expected_classes, uint64_t sample_seed) {
  ImageFolderSplit s;
  const fs::path root = fs::path(dir) / split;
  s.dir = root.string();
  s.name = s.dir;
  if (!is_folder(root))
    throw Error("the image folder " + quoted_name(dir) + " has no " + split + "/ folder; " + kLayout);
  std::error_code ec;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    if (is_hidden(it->path())) continue;
    if (!it->is_directory(ec)) {  // a file beside the class folders (a README): no class
      if (s.skipped_files++ == 0) s.first_skipped = it->path().string();
      continue;
    }
    s.classes.push_back(it->path().filename().string());
  }
  if (ec) throw Error("cannot list " + quoted_name(s.dir) + ": " + ec.message());
  if (s.classes.empty()) throw Error(quoted_name(s.dir) + " has no class folders; " + kLayout);
  std::sort(s.classes.begin(), s.classes.end());
  if (expected_classes != nullptr && s.classes != *expected_classes)
    throw Error("the classes of " + quoted_name(s.dir) + " differ from the training classes (" +
                class_difference(s.classes, *expected_classes) + "); both splits need the same class folders");
  for (size_t label = 0; label < s.classes.size(); ++label) {
    for (std::string& f : class_images(root / s.classes[label], s)) {
      s.files.push_back(std::move(f));
      s.labels.push_back(static_cast<int32_t>(label));
    }
  }
  if (max_samples > 0 && max_samples < s.count()) {
    // A seeded sample without replacement (the first steps of a Fisher–Yates shuffle), kept in
    // listing order: the first N files would be the first classes only.
    std::vector<int64_t> index(static_cast<size_t>(s.count()));
    for (size_t i = 0; i < index.size(); ++i) index[i] = static_cast<int64_t>(i);
    Rng rng(sample_seed ^ hash_name(split) ^ 0x5A4D504C45ull);
    for (int64_t i = 0; i < max_samples; ++i) {
      const int64_t j = i + static_cast<int64_t>(rng.next() % static_cast<uint64_t>(s.count() - i));
      std::swap(index[static_cast<size_t>(i)], index[static_cast<size_t>(j)]);
    }
    index.resize(static_cast<size_t>(max_samples));
    std::sort(index.begin(), index.end());
    ImageFolderSplit kept = s;
    kept.files.clear();
    kept.labels.clear();
    for (int64_t i : index) {
      kept.files.push_back(std::move(s.files[static_cast<size_t>(i)]));
      kept.labels.push_back(s.labels[static_cast<size_t>(i)]);
    }
    kept.name = s.dir + "[" + std::to_string(max_samples) + " of " + std::to_string(s.count()) + ", seed " +
                std::to_string(sample_seed) + "]";
    return kept;
  }
  return s;
}

}  // namespace trident::data
