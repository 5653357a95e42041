// The streaming image-folder loader (see image_folder_batches.h). Work is claimed one sample at
// a time under one mutex; a sample of batch b may be claimed only while b is within `depth` of
// the next batch to hand out, which is what bounds the ring. Slot b % depth is rewritten only
// after batch b has been copied out (or taken in place), so that happens without the lock.
#include "runtime/data/image_folder_batches.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "core/error.h"
#include "core/printable.h"
#include "runtime/data/parallel_copy.h"
#include "runtime/data/random.h"

namespace trident::data {

int default_image_workers() {
  const unsigned cores = std::thread::hardware_concurrency();
  return cores > 1 ? static_cast<int>(cores) - 1 : 1;
}

ImageFolderBatches::ImageFolderBatches(ImageFolderSplit split, const ImageStreamOptions& options)
    : split_(std::move(split)), options_(options), rows_(options.batch) {
  const auto& o = options_;
  if (o.image_size < 1 || o.batch < 1 || o.workers < 1 || o.depth < 1)
    throw Error("an image stream needs an image size, batch, worker count and depth of at least 1, not " +
                std::to_string(o.image_size) + ", " + std::to_string(o.batch) + ", " + std::to_string(o.workers) +
                " and " + std::to_string(o.depth));
  if (split_.count() == 0) throw Error("the image folder split " + quoted_name(split_.name) + " has no images");
  if (o.train && o.batch > split_.count())
    throw Error("batch size " + std::to_string(o.batch) + " exceeds the " + std::to_string(split_.count()) +
                " images of " + quoted_name(split_.name) + ", so dropping the last partial batch leaves no batch at all");
  if (o.decode_bytes < 1) throw Error("an image stream needs a decode budget of at least 1 byte");
  ring_.resize(static_cast<size_t>(o.depth));  // allocated by the first start_epoch
}

ImageFolderBatches::~ImageFolderBatches() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

int64_t ImageFolderBatches::batches_per_epoch() const {
  const int64_t n = split_.count(), b = options_.batch;
  return options_.train ? n / b : (n + b - 1) / b;
}

uint64_t image_ring_bytes(const ImageStreamOptions& o) {
  const uint64_t sample = static_cast<uint64_t>(o.image_size) * o.image_size * 3;
  return static_cast<uint64_t>(o.depth) * o.batch * (sample * sizeof(float) + sizeof(int32_t));
}

uint64_t image_worker_bytes(const ImageStreamOptions& o) {
  // Each worker's decode, and its resampling's horizontal pass: floats for the source rows the
  // output reads at the output's width, well under half the decode's bytes.
  return static_cast<uint64_t>(std::max(o.workers, 0)) * (o.decode_bytes + o.decode_bytes / 2);
}

int64_t ImageFolderBatches::real_rows(int64_t batch_index) const {
  return std::min(options_.batch, split_.count() - batch_index * options_.batch);
}

bool ImageFolderBatches::can_claim() const {
  return started_ && next_item_ < batches_per_epoch() * rows_ && next_item_ / rows_ < handed_out_ + options_.depth &&
         !failure_;
}

bool ImageFolderBatches::keep_rows(int64_t first, int64_t count) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (started_) throw Error("ImageFolderBatches::keep_rows over " + quoted_name(split_.name) + " was called after start_epoch");
  if (first < 0 || count < 1 || first + count > options_.batch)
    throw Error("rows [" + std::to_string(first) + ", " + std::to_string(first + count) + ") are not within a batch of " +
                std::to_string(options_.batch));
  first_row_ = first;
  rows_ = count;
  return true;
}

void ImageFolderBatches::start_epoch(int64_t epoch) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (workers_.empty()) {  // the first epoch: the ring and the workers, now that they are needed
    for (Slot& s : ring_) {
      s.images.assign(static_cast<size_t>(rows_ * sample_size()), 0.0f);
      s.labels.assign(static_cast<size_t>(rows_), 0);
      s.requests.assign(static_cast<size_t>(rows_), ImageRowRequest{});
      s.positions.assign(static_cast<size_t>(rows_), 0);
    }
    workers_.reserve(static_cast<size_t>(options_.workers));
    for (int i = 0; i < options_.workers; ++i) workers_.emplace_back([this] { work(); });
  }
  ++generation_;  // what busy workers finish now is not counted
  ready_cv_.wait(lock, [this] { return busy_ == 0; });
  order_ = epoch_order(split_.count(), options_.train, options_.seed, epoch);
  epoch_ = epoch;
  form_ = form_next_;
  next_item_ = 0;
  handed_out_ = 0;
  for (Slot& s : ring_) s.rows_done = 0;
  started_ = true;
  lock.unlock();
  work_cv_.notify_all();
}

bool ImageFolderBatches::next(float* images_out, int32_t* labels_out, int64_t* filled) {
  if (images_out == nullptr) throw Error("ImageFolderBatches::next over " + quoted_name(split_.name) + " was given a null image buffer");
  return next_in_place(
      [&](const float* images) { parallel_copy(images_out, images, static_cast<size_t>(rows_ * sample_size()) * sizeof(float)); },
      labels_out, filled);
}

bool ImageFolderBatches::next_in_place(const std::function<void(const float* images)>& take, int32_t* labels_out,
                                       int64_t* filled) {
  if (form_ != Form::floats)
    throw Error("ImageFolderBatches over " + quoted_name(split_.name) + " hands out " +
                (form_ == Form::images ? "image files this epoch; use next_images()" : "pixels this epoch; use next_pixels()"));
  return hand_out([&](Slot& slot) { take(slot.images.data()); }, labels_out, filled);
}

bool ImageFolderBatches::hand_out(const std::function<void(Slot&)>& take, int32_t* labels_out, int64_t* filled) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!started_) throw Error("ImageFolderBatches::next over " + quoted_name(split_.name) + " was called before start_epoch");
  if (handed_out_ >= batches_per_epoch()) return false;
  const int64_t b = handed_out_;
  Slot& slot = ring_[static_cast<size_t>(b % options_.depth)];
  ready_cv_.wait(lock, [&] { return slot.rows_done == rows_ || failure_; });
  if (failure_) std::rethrow_exception(failure_);
  lock.unlock();
  // No worker writes this slot until handed_out_ moves past b, below.
  take(slot);
  if (labels_out != nullptr) std::memcpy(labels_out, slot.labels.data(), slot.labels.size() * sizeof(int32_t));
  if (filled != nullptr) *filled = std::clamp<int64_t>(real_rows(b) - first_row_, 0, rows_);
  lock.lock();
  slot.rows_done = 0;
  ++handed_out_;
  lock.unlock();
  work_cv_.notify_all();
  return true;
}

int64_t ImageFolderBatches::wait_until_idle() {
  std::unique_lock<std::mutex> lock(mutex_);
  ready_cv_.wait(lock, [this] { return busy_ == 0 && !can_claim(); });
  return next_item_ - handed_out_ * rows_;
}

int64_t ImageFolderBatches::skipped() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int64_t>(unreadable_.size());
}

std::string ImageFolderBatches::first_skip_reason() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return unreadable_.empty() ? "" : unreadable_.begin()->second;
}

void ImageFolderBatches::work() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    work_cv_.wait(lock, [this] { return stop_ || can_claim(); });
    if (stop_) return;
    const int64_t item = next_item_++;
    const int64_t b = item / rows_, row = item % rows_, generation = generation_,
                  epoch = epoch_;
    Slot& slot = ring_[static_cast<size_t>(b % options_.depth)];
    ++busy_;
    lock.unlock();
    std::exception_ptr failure;
    try {
      make_row(b, row, slot, epoch);
    } catch (...) {
      failure = std::current_exception();
    }
    lock.lock();
    --busy_;
    if (failure && !failure_) failure_ = failure;
    if (generation == generation_ && !failure) ++slot.rows_done;
    // The consumer waits for a whole batch, start_epoch and wait_until_idle for idleness.
    if (slot.rows_done == rows_ || busy_ == 0 || failure) ready_cv_.notify_all();
  }
}

void ImageFolderBatches::make_row(int64_t batch_index, int64_t row, Slot& slot, int64_t epoch) {
  // `row` of the slot is row first_row_ + row of the batch; rows past a padded batch's real
  // ones repeat its real samples cyclically.
  const int64_t position = batch_index * options_.batch + (first_row_ + row) % real_rows(batch_index);
  if (form_ == Form::images)
    make_image_request(position, row, slot, epoch);
  else
    make_host_row(position, row, slot, epoch, row_out(slot, row));
}

ImageFolderBatches::RowOut ImageFolderBatches::row_out(Slot& slot, int64_t row) const {
  if (form_ == Form::pixels) return {nullptr, reinterpret_cast<uint8_t*>(slot.images.data()) + row * sample_size()};
  return {slot.images.data() + row * sample_size(), nullptr};
}

void ImageFolderBatches::make_host_row(int64_t position, int64_t row, Slot& slot, int64_t epoch, RowOut out) {
  const DecodeLimits limits{options_.decode_bytes};
  if (options_.train) {
    // The crop is drawn from the header's size, and only the crop is decoded. A file that fails
    // anywhere — reading, decoding, resampling — is replaced by the next readable one.
    const int64_t index = decode_readable(position, [&](const std::string& file, int64_t i) {
      transform_on_host(read_image_bytes(file, limits), quoted_name(file), augmentation_seed(options_.seed, epoch, i), out);
    });
    slot.labels[static_cast<size_t>(row)] = split_.labels[static_cast<size_t>(index)];
    return;
  }
  // Evaluation scores the images it can read and only those: an unreadable one is left out of the
  // accuracy (label -1), not replaced by another image, which would count that one twice.
  const int64_t index = order_[static_cast<size_t>(position)];
  try {
    const std::string& file = split_.files[static_cast<size_t>(index)];
    transform_on_host(read_image_bytes(file, limits), quoted_name(file), 0, out);
    slot.labels[static_cast<size_t>(row)] = split_.labels[static_cast<size_t>(index)];
  } catch (const Error& e) {
    if (out.pixels)
      std::fill(out.pixels, out.pixels + sample_size(), uint8_t{0});
    else
      std::fill(out.floats, out.floats + sample_size(), 0.0f);
    slot.labels[static_cast<size_t>(row)] = -1;
    std::lock_guard<std::mutex> lock(mutex_);
    unreadable_.emplace(index, e.what());
  }
}

void ImageFolderBatches::make_image_request(int64_t position, int64_t row, Slot& slot, int64_t epoch) {
  slot.positions[static_cast<size_t>(row)] = position;
  if (options_.train) {
    const int64_t index = decode_readable(position, [&](const std::string& file, int64_t i) {
      request_from_file(file, augmentation_seed(options_.seed, epoch, i), row, slot);
    });
    slot.labels[static_cast<size_t>(row)] = split_.labels[static_cast<size_t>(index)];
    return;
  }
  const int64_t index = order_[static_cast<size_t>(position)];
  try {
    request_from_file(split_.files[static_cast<size_t>(index)], 0, row, slot);
    slot.labels[static_cast<size_t>(row)] = split_.labels[static_cast<size_t>(index)];
  } catch (const Error&) {
    make_host_row(position, row, slot, epoch, row_out(slot, row));  // counts it, label -1
    slot.requests[static_cast<size_t>(row)] = {reinterpret_cast<const uint8_t*>(slot.images.data() + row * sample_size()),
                                               static_cast<size_t>(sample_size()) * sizeof(float), false};
  }
}

void ImageFolderBatches::request_from_file(const std::string& path, uint64_t seed, int64_t row, Slot& slot) {
  const DecodeLimits limits{options_.decode_bytes};
  float* out = slot.images.data() + row * sample_size();
  const size_t room = static_cast<size_t>(sample_size()) * sizeof(float);
  ImageRowRequest& q = slot.requests[static_cast<size_t>(row)];
  q = ImageRowRequest{};
  q.bytes = reinterpret_cast<const uint8_t*>(out);
  const std::vector<uint8_t> bytes = read_image_bytes(path, limits);
  const std::string what = quoted_name(path);
  const std::optional<JpegHeader> header = read_jpeg_header(bytes.data(), bytes.size(), what, limits);
  const int size = options_.image_size;
  if (header && header->plain && bytes.size() <= room) {
    std::memcpy(out, bytes.data(), bytes.size());
    q.size = bytes.size();
    q.jpeg = true;
    q.height = header->height;
    q.width = header->width;
    CropBox box{0, 0, header->height, header->width}, window{0, 0, size, size};
    q.resize_height = q.resize_width = size;
    if (options_.train) {
      const TrainCrop crop = train_crop(header->height, header->width, seed);
      box = crop.box;
      q.flip = crop.flip;
    } else {
      const EvalGeometry g = eval_geometry(header->height, header->width, size);
      q.resize_height = g.resize_height;
      q.resize_width = g.resize_width;
      window = g.window;
    }
    q.box_top = box.top, q.box_left = box.left, q.box_height = box.height, q.box_width = box.width;
    q.window_top = window.top, q.window_left = window.left;
    return;
  }
  // Made here, from the bytes already read, as the host path makes it.
  q.size = room;
  q.jpeg = false;
  transform_on_host(bytes, what, seed, {out, nullptr});
}

void ImageFolderBatches::transform_on_host(const std::vector<uint8_t>& bytes, const std::string& what, uint64_t seed,
                                           RowOut out) const {
  const DecodeLimits limits{options_.decode_bytes};
  if (!options_.train) {
    const RgbImage image = decode_image(bytes.data(), bytes.size(), what, limits);
    if (out.pixels)
      eval_pixels(image, options_.image_size, out.pixels);
    else
      eval_transform(image, options_.image_size, options_.norm, out.floats);
    return;
  }
  // The crop is drawn from the header's size, and only the crop is decoded.
  TrainCrop crop;
  const RgbRegion region = decode_image_region(
      bytes.data(), bytes.size(), what,
      [&](int height, int width) {
        crop = train_crop(height, width, seed);
        return crop.box;
      },
      limits);
  if (out.pixels)
    train_pixels_region(region, crop, options_.image_size, out.pixels);
  else
    train_transform_region(region, crop, options_.image_size, options_.norm, out.floats);
}

void ImageFolderBatches::hand_out_images(bool on) { choose_next_form(Form::images, on); }

void ImageFolderBatches::hand_out_pixels(bool on) { choose_next_form(Form::pixels, on); }

void ImageFolderBatches::choose_next_form(Form form, bool on) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (on)
    form_next_ = form;
  else if (form_next_ == form)
    form_next_ = Form::floats;
}

bool ImageFolderBatches::next_pixels(const std::function<void(const PixelBatch&)>& take, int32_t* labels_out,
                                     int64_t* filled) {
  if (form_ != Form::pixels)
    throw Error("ImageFolderBatches::next_pixels over " + quoted_name(split_.name) +
                " was called without hand_out_pixels(true) before its epoch");
  return hand_out(
      [&](Slot& slot) {
        PixelBatch batch;
        batch.pixels = reinterpret_cast<const uint8_t*>(slot.images.data());
        batch.rows = rows_;
        batch.image_size = options_.image_size;
        normalisation_affine(options_.norm, batch.scale, batch.shift);
        take(batch);
      },
      labels_out, filled);
}

bool ImageFolderBatches::next_images(const std::function<void(const ImageBatchRequest&, const HostRowMaker&)>& take,
                                     int32_t* labels_out, int64_t* filled) {
  if (form_ != Form::images) throw Error("ImageFolderBatches::next_images over " + quoted_name(split_.name) + " was called without hand_out_images(true) before its epoch");
  return hand_out(
      [&](Slot& slot) {
        ImageBatchRequest batch;
        batch.image_size = options_.image_size;
        normalisation_affine(options_.norm, batch.scale, batch.shift);
        batch.rows = slot.requests;
        batch.memory = slot.images.data();
        batch.memory_bytes = slot.images.size() * sizeof(float);
        const HostRowMaker on_host = [&](int row, float* out) {
          make_host_row(slot.positions[static_cast<size_t>(row)], row, slot, epoch_, {out, nullptr});
        };
        take(batch, on_host);
      },
      labels_out, filled);
}

int64_t ImageFolderBatches::decode_readable(int64_t position, const std::function<void(const std::string&, int64_t)>& decode) {
  const int64_t n = split_.count();
  for (int64_t step = 0; step < n; ++step) {
    const int64_t index = order_[static_cast<size_t>((position + step) % n)];
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (unreadable_.count(index)) continue;
    }
    try {
      decode(split_.files[static_cast<size_t>(index)], index);
      return index;
    } catch (const Error& e) {
      std::lock_guard<std::mutex> lock(mutex_);
      unreadable_.emplace(index, e.what());
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  throw Error("no image of " + quoted_name(split_.name) + " can be read (the first: " + unreadable_.begin()->second + ")");
}

}  // namespace trident::data
