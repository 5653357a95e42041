// An image classification dataset laid out as torchvision's ImageFolder reads it:
// DIR/train/<class>/…/*.jpg|jpeg|png and DIR/val/<class>/…, the label of a class being its
// position among the sorted folder names. Only the listing lives here; images are decoded later,
// a batch at a time (image_folder_batches.h), so a dataset of any size costs only its file names.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace trident::data {

struct ImageFolderSplit {
  std::string dir;                   // DIR/train or DIR/val
  std::vector<std::string> classes;  // sorted folder names; a label indexes this
  std::vector<std::string> files;    // every image path, sorted by class, then path
  std::vector<int32_t> labels;       // one per file
  std::string name;                  // how messages and checkpoints call it: "DIR/train"

  int64_t count() const { return static_cast<int64_t>(files.size()); }
};

// True when DIR has a train/ or a val/ folder: the layout is then an image folder's, and what
// is missing from it an error of its own.
bool is_image_folder_dir(const std::string& dir);

// Lists split `split` ("train" or "val") of the image folder `dir`, keeping the first
// `max_samples` files in that order (0: all). Subfolders of a class folder belong to it, and
// hidden entries (names starting with '.') are passed over. A missing split folder, a split
// without class folders, a class folder without images, a file of another kind, or (with
// `expected_classes`) class names that differ from those is an Error naming it.
ImageFolderSplit scan_image_folder(const std::string& dir, const std::string& split, int64_t max_samples = 0,
                                   const std::vector<std::string>* expected_classes = nullptr);

}  // namespace trident::data
