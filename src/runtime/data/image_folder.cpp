// Listing an image folder (see image_folder.h). Every filesystem call takes an error_code, so a
// folder that cannot be read is one sentence naming it, never a std::filesystem exception.
#include "runtime/data/image_folder.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <set>

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

// Folders within a class folder, and images in one: a listing bounded whatever the tree holds.
constexpr int kMaxFolderDepth = 32;
constexpr size_t kMaxFolderFiles = size_t{1} << 26;

bool is_folder(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}

// A folder's identity (device, inode), through links: a linked folder met again is the same folder.
struct FolderId {
  dev_t dev;
  ino_t ino;
  bool operator<(const FolderId& o) const { return dev != o.dev ? dev < o.dev : ino < o.ino; }
};

// The images under one class folder, sorted by path; other files are counted in `s`. Linked
// folders are followed, each folder at most once (a link to '.' or to a parent would list the
// class again and again, or for ever), and no deeper than kMaxFolderDepth.
std::vector<std::string> class_images(const fs::path& class_dir, ImageFolderSplit& s) {
  std::vector<std::string> files;
  std::set<FolderId> seen;
  std::vector<std::pair<fs::path, int>> pending{{class_dir, 0}};
  while (!pending.empty()) {
    const auto [dir, depth] = pending.back();
    pending.pop_back();
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0 || !seen.insert({st.st_dev, st.st_ino}).second) continue;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      const fs::path& p = it->path();
      if (is_hidden(p)) continue;
      std::error_code kind;
      if (it->is_directory(kind)) {  // through a link too
        if (depth + 1 > kMaxFolderDepth)
          throw Error(quoted_name(p.string()) + " lies more than " + std::to_string(kMaxFolderDepth) +
                      " folders deep in its class folder; " + kLayout);
        pending.emplace_back(p, depth + 1);
        continue;
      }
      if (!has_image_extension(p.filename().string())) {
        if (s.skipped_files++ == 0) s.first_skipped = p.string();
        continue;
      }
      files.push_back(p.string());
      if (files.size() > kMaxFolderFiles)
        throw Error("the class folder " + quoted_name(class_dir.string()) + " holds more than " +
                    std::to_string(kMaxFolderFiles) + " images");
    }
    if (ec) throw Error("cannot list the class folder " + quoted_name(dir.string()) + ": " + ec.message());
  }
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
