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
  // Files that are no JPEG or PNG image (by extension), passed over as torchvision's ImageFolder
  // passes them over, and the first of them for the report.
  int64_t skipped_files = 0;
  std::string first_skipped;

  int64_t count() const { return static_cast<int64_t>(files.size()); }
};

// True when DIR has a train/ or a val/ folder: the layout is then an image folder's, and what
// is missing from it an error of its own.
bool is_image_folder_dir(const std::string& dir);

// Lists split `split` ("train" or "val") of the image folder `dir`. With `max_samples` (0: all)
// it keeps that many files drawn at random from every class (a sample seeded by `sample_seed`, in
// listing order), so a limited run still sees every class. Subfolders of a class folder belong to
// it; hidden entries (names starting with '.') are passed over, and so are files that are no
// .jpg, .jpeg or .png (counted in skipped_files). A missing split folder, a split without class
// folders, a class folder without images, or (with `expected_classes`) class names that differ
// from those is an Error naming it.
ImageFolderSplit scan_image_folder(const std::string& dir, const std::string& split, int64_t max_samples = 0,
                                   const std::vector<std::string>* expected_classes = nullptr,
                                   uint64_t sample_seed = 0);

}  // namespace trident::data
