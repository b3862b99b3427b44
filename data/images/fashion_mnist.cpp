#include "data/images/fashion_mnist.h"


#include "data/data_error.h"
#include "data/images/idx_file.h"

namespace dpt {

std::vector<std::string> FashionMnist::file_names(Split split) {
  const std::string prefix = split == Split::train ? "train" : "t10k";
  return {prefix + "-images-idx3-ubyte.gz", prefix + "-labels-idx1-ubyte.gz"};
}

FashionMnist::FashionMnist(const std::string& dir_in, Split split, const ImageOptions& options)
    : ImageDataset(1, kRows, kCols, {kMean}, {kStd}, options), split_(split) {
  const std::string dir = dir_in.empty() ? kFashionMnistDefaultDir : dir_in;
  const std::vector<std::string> names = file_names(split);
  const std::string images_path = dir + "/" + names[0];
  const std::string labels_path = dir + "/" + names[1];

  IdxArray images = read_idx_file(images_path);
  if (images.dims.size() != 3 || images.dims[1] != kRows || images.dims[2] != kCols) {
    throw_data_error(images_path, "expected images of shape [n, 28, 28] (magic 0x00000803), got " +
                                      idx_dims_text(images.dims));
  }
  IdxArray labels = read_idx_file(labels_path);
  if (labels.dims.size() != 1) {
    throw_data_error(labels_path, "expected labels of shape [n] (magic 0x00000801), got " +
                                      idx_dims_text(labels.dims));
  }
  if (labels.dims[0] != images.dims[0]) {
    throw_data_error(labels_path, std::to_string(labels.dims[0]) + " labels but " + images_path +
                                      " has " + std::to_string(images.dims[0]) + " images");
  }
  for (size_t i = 0; i < labels.data.size(); ++i) {
    if (labels.data[i] >= kClasses) {
      throw_data_error(labels_path, "label " + std::to_string(labels.data[i]) + " at index " +
                                        std::to_string(i) + " is not in 0..9");
    }
  }
  pixels_ = std::move(images.data);
  labels_ = std::move(labels.data);
}

std::string FashionMnist::name() const {
  return std::string("fashion-mnist/") + split_name(split_);
}

}  // namespace dpt
