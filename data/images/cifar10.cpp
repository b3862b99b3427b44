#include "data/images/cifar10.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "data/data_error.h"
#include "data/files/read_file.h"

namespace dpt {

namespace {

constexpr size_t kPixels = 3 * 32 * 32;

}  // namespace

std::vector<std::string> Cifar10::file_names(Split split) {
  if (split == Split::test) return {"test_batch.bin"};
  return {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin",
          "data_batch_5.bin"};
}

Cifar10::Cifar10(const std::string& dir, Split split, const ImageOptions& options)
    : ImageDataset(3, 32, 32, {kMean[0], kMean[1], kMean[2]}, {kStd[0], kStd[1], kStd[2]}, options),
      name_(std::string("cifar10/") + split_name(split)) {
  const std::string root = dir.empty() ? kCifar10DefaultDir : dir;
  std::vector<std::string> files;
  for (const auto& f : file_names(split)) files.push_back(root + "/" + f);
  load(files);
}

Cifar10::Cifar10(const std::vector<std::string>& files, std::string name, const ImageOptions& options)
    : ImageDataset(3, 32, 32, {kMean[0], kMean[1], kMean[2]}, {kStd[0], kStd[1], kStd[2]}, options),
      name_(std::move(name)) {
  load(files);
}

void Cifar10::load(const std::vector<std::string>& files) {
  for (const auto& path : files) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) throw_data_error(path, "file not found");
    // Read whole (a pipe or FIFO too: process substitution of a decompressor works).
    std::vector<uint8_t> buf;
    append_file(path, buf);
    const size_t bytes = buf.size();
    if (bytes == 0 || bytes % kRecordBytes != 0) {
      throw_data_error(path, "size " + std::to_string(bytes) +
                                 " bytes is not a positive multiple of the 3073-byte CIFAR-10 "
                                 "record (truncated or not a CIFAR-10 binary file?)");
    }
    const size_t records = bytes / kRecordBytes;
    const size_t base = labels_.size();
    labels_.resize(base + records);
    pixels_.resize((base + records) * kPixels);
    for (size_t r = 0; r < records; ++r) {
      const uint8_t* rec = buf.data() + r * kRecordBytes;
      if (rec[0] >= kClasses) {
        throw_data_error(path, "record " + std::to_string(r) + " has label " +
                                   std::to_string(rec[0]) + ", not in 0..9");
      }
      labels_[base + r] = rec[0];
      std::copy(rec + 1, rec + kRecordBytes,
                pixels_.begin() + std::ptrdiff_t((base + r) * kPixels));
    }
  }
}

void write_cifar10_file(const std::string& path, const std::vector<uint8_t>& labels,
                        const std::vector<uint8_t>& pixels) {
  if (pixels.size() != labels.size() * kPixels) {
    throw std::invalid_argument("write_cifar10_file: " + std::to_string(labels.size()) +
                                " labels need " + std::to_string(labels.size() * kPixels) +
                                " pixel bytes, got " + std::to_string(pixels.size()));
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw_data_error(path, "cannot open for writing");
  for (size_t r = 0; r < labels.size(); ++r) {
    out.put(char(labels[r]));
    out.write(reinterpret_cast<const char*>(pixels.data() + r * kPixels), std::streamsize(kPixels));
  }
  if (!out.flush()) throw_data_error(path, "write failed");
}

}  // namespace dpt
