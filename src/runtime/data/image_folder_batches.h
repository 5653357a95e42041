// Batches of an image folder decoded and augmented while the model trains: a pool of worker
// threads fills a ring of `depth` whole batches ahead of the consumer and then sleeps on a
// condition variable, so memory is depth batches whatever the dataset's size and no thread spins.
// Workers share out single samples, and each sample is a function of (seed, epoch, index) alone,
// so the batches are bitwise the same for any number of workers.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/data/batch_source.h"
#include "runtime/data/image_folder.h"
#include "runtime/data/image_transform.h"

namespace trident::data {

struct ImageStreamOptions {
  int image_size = 224;
  int64_t batch = 64;
  // Training: shuffled by (seed, epoch), RandomResizedCrop + flip, the last partial batch dropped.
  // Evaluation: in order, resize + centre crop, the last batch padded (BatchSource).
  bool train = true;
  uint64_t seed = 1;
  int workers = 1;
  int depth = 3;  // batches ready or in the making at most
  Normalisation norm = kImageNetNormalisation;
  // What one worker's decode may hold at once (the file and its pixels, DecodeLimits): an image
  // that needs more is skipped and counted, so a stream never holds more than its ring and
  // image_worker_bytes(), whatever its files hold.
  uint64_t decode_bytes = kDefaultDecodeBytes;
  static constexpr uint64_t kDefaultDecodeBytes = uint64_t{128} << 20;  // a 40-megapixel photo
};

// Bytes of the batch ring a stream with these options holds, whatever the dataset's size.
uint64_t image_ring_bytes(const ImageStreamOptions& options);
// What a stream's workers hold at most while they decode and resample, besides the ring.
uint64_t image_worker_bytes(const ImageStreamOptions& options);

// The worker count `--workers` defaults to: the cores beside the one that runs the training
// loop (std::thread::hardware_concurrency() - 1), at least 1.
int default_image_workers();

class ImageFolderBatches final : public BatchSource {
 public:
  // Throws trident::Error for an image size, batch, worker count or depth below 1, an empty
  // split, or a training batch larger than the split. Nothing is allocated and no
  // worker runs until start_epoch.
  ImageFolderBatches(ImageFolderSplit split, const ImageStreamOptions& options);
  ~ImageFolderBatches() override;
  ImageFolderBatches(const ImageFolderBatches&) = delete;
  ImageFolderBatches& operator=(const ImageFolderBatches&) = delete;

  int64_t batch() const override { return rows_; }
  int64_t batches_per_epoch() const override;
  // Discards what was made for the previous epoch and sets the workers on this one.
  void start_epoch(int64_t epoch) override;
  // Blocks until the next batch is complete. A training sample that cannot be decoded is replaced
  // by the next readable one in the epoch's order; an evaluation sample that cannot is left out
  // (its row zero, its label -1, which scoring passes over). Both are counted in skipped(); an
  // Error when no image of the split can be read, or when a worker failed otherwise.
  bool next(float* images_out, int32_t* labels_out, int64_t* filled = nullptr) override;
  // The batch from its slot of the ring, which no worker rewrites until `take` has returned.
  bool hands_out_in_place() const override { return true; }
  bool next_in_place(const std::function<void(const float* images)>& take, int32_t* labels_out,
                     int64_t* filled = nullptr) override;
  // Image requests for a device that decodes JPEGs (BatchSource::next_images): a training or
  // evaluation row whose file is a plain JPEG (image_codec.h's JpegHeader) no larger than the
  // row's floats goes out as the file's bytes in the row's place in the ring and the crop drawn
  // from its header; any other file is decoded and transformed on the host as before. The ring
  // holds the same bytes either way.
  bool can_hand_out_images() const override { return true; }
  void hand_out_images(bool on) override;
  bool next_images(const std::function<void(const ImageBatchRequest&, const HostRowMaker&)>& take, int32_t* labels_out,
                   int64_t* filled = nullptr) override;
  // Pixels for a device that normalises them (BatchSource::next_pixels): each row made as for
  // next() up to the normalisation, rounded to uint8 (image_transform.h's resample_pixels), in
  // the first quarter of the row's place in the ring.
  bool can_hand_out_pixels() const override { return true; }
  void hand_out_pixels(bool on) override;
  bool next_pixels(const std::function<void(const PixelBatch&)>& take, int32_t* labels_out,
                   int64_t* filled = nullptr) override;
  // Decodes and augments only rows [first, first + count) of each batch of options.batch; the
  // others are never read. An Error for a range outside the batch or after start_epoch.
  bool keep_rows(int64_t first, int64_t count) override;

  const ImageFolderSplit& split() const { return split_; }
  // Floats per sample: image_size² · 3.
  int64_t sample_size() const { return int64_t{options_.image_size} * options_.image_size * 3; }
  uint64_t ring_bytes() const { return image_ring_bytes(options_); }

  // Images found unreadable so far, and the reason of the first of them in file order.
  int64_t skipped() const;
  std::string first_skip_reason() const;

  // Blocks until the workers have nothing left they may make (the ring is full, or the epoch is
  // all made), then returns how many samples are made and not yet handed out: at most
  // depth * batch(), which is the bound on memory.
  int64_t wait_until_idle();

 private:
  struct Slot {
    std::vector<float> images;
    std::vector<int32_t> labels;
    int64_t rows_done = 0;
    // Handing out images: each row's request (its bytes in the row's place in `images`) and its
    // position in the epoch, from which the host makes it again if the device cannot.
    std::vector<ImageRowRequest> requests;
    std::vector<int64_t> positions;
  };

  void work();
  bool can_claim() const;  // caller holds mutex_
  // What a batch is handed out as: floats (next, next_in_place), image requests (next_images)
  // or pixels (next_pixels).
  enum class Form { floats, images, pixels };
  // Where a row made on the host goes: floats, or pixels when `pixels` is set.
  struct RowOut {
    float* floats = nullptr;
    uint8_t* pixels = nullptr;
  };
  // `form` from the next epoch on; off, floats again if `form` was chosen (the last word wins).
  void choose_next_form(Form form, bool on);
  void make_row(int64_t batch_index, int64_t row, Slot& slot, int64_t epoch);
  // Row `row`'s place in the slot, as the epoch's form writes it.
  RowOut row_out(Slot& slot, int64_t row) const;
  // The row made on the host, from the sample at epoch `position`.
  void make_host_row(int64_t position, int64_t row, Slot& slot, int64_t epoch, RowOut out);
  // The row as a request: the file's bytes when a device can decode it, else made on the host.
  void make_image_request(int64_t position, int64_t row, Slot& slot, int64_t epoch);
  // Writes row `row`'s request from the file at `path` (its sample seed `seed`): a plain JPEG
  // that fits goes as bytes, anything else is decoded and transformed here.
  void request_from_file(const std::string& path, uint64_t seed, int64_t row, Slot& slot);
  // A file's bytes decoded and transformed here (training's crop from `seed`, or evaluation's),
  // the one host transform both ways out use.
  void transform_on_host(const std::vector<uint8_t>& bytes, const std::string& what, uint64_t seed, RowOut out) const;
  // Waits for the next batch's slot, calls take on it, copies its labels out and frees it.
  bool hand_out(const std::function<void(Slot&)>& take, int32_t* labels_out, int64_t* filled);
  // Calls decode(file, index) on the image at epoch position `position`, or, while it throws an
  // Error (the image is unreadable), on the next one after it; returns the index it succeeded on.
  int64_t decode_readable(int64_t position, const std::function<void(const std::string&, int64_t)>& decode);
  int64_t real_rows(int64_t batch_index) const;

  const ImageFolderSplit split_;
  const ImageStreamOptions options_;

  mutable std::mutex mutex_;
  std::condition_variable work_cv_;   // workers wait for something to claim
  std::condition_variable ready_cv_;  // the consumer waits for a batch, start_epoch for idleness
  std::vector<Slot> ring_;
  std::vector<int64_t> order_;        // written only while no worker is busy
  int64_t epoch_ = 0, generation_ = 0;
  bool started_ = false, stop_ = false;
  Form form_ = Form::floats, form_next_ = Form::floats;  // this epoch's; from the next
  int64_t first_row_ = 0, rows_ = 0;  // the rows of each batch made (keep_rows; all of them)
  int64_t next_item_ = 0;             // batch * rows_ + row of the next sample to claim
  int64_t handed_out_ = 0;            // batches next() has returned this epoch
  int busy_ = 0;                      // workers making a sample now
  std::exception_ptr failure_;
  std::map<int64_t, std::string> unreadable_;  // image index -> why it was skipped
  std::vector<std::thread> workers_;
};

}  // namespace trident::data
