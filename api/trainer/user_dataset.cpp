#include "api/trainer/user_dataset.h"

#include <stdexcept>

namespace dpt {

UserDataset::UserDataset(std::unique_ptr<data::Dataset> user)
    : user_(std::move(user)),
      size_(user_ ? user_->size() : 0),
      classes_(user_ ? user_->num_classes() : 0),
      targets_(user_ ? user_->target_size() : 0),
      shape_(user_ ? user_->sample_shape() : std::vector<int64_t>{}) {
  if (!user_) throw std::invalid_argument("dpt::TrainerSetup::dataset returned no dataset");
  const std::string who = "dataset '" + user_->name() + "'";
  if (shape_.empty()) throw std::invalid_argument(who + ": an empty sample_shape()");
  for (int64_t d : shape_) {
    if (d <= 0) throw std::invalid_argument(who + ": sample_shape() has a dimension " + std::to_string(d));
    sample_numel_ *= size_t(d);
  }
  if ((classes_ == 0) == (targets_ == 0))
    throw std::invalid_argument(who + ": either num_classes() (classification) or target_size() (regression) must be "
                                "positive, not " + std::string(classes_ ? "both" : "neither"));
  if (size_ == 0) throw std::invalid_argument(who + ": no samples");
}

void UserDataset::fill(std::span<const size_t> indices, Batch& out) const {
  check_indices(*this, indices);
  out.n = indices.size();
  out.sample_shape = shape_;
  out.x.resize(out.n * sample_numel_);
  out.tokens.clear();
  out.labels.assign(classes_ ? out.n : 0, 0);
  out.targets.assign(out.n * targets_, 0.0f);
  for (size_t i = 0; i < out.n; ++i) {
    int32_t label = 0;
    user_->get(indices[i], std::span<float>(out.x).subspan(i * sample_numel_, sample_numel_), label,
               std::span<float>(out.targets).subspan(i * targets_, targets_));
    if (classes_) {
      if (label < 0 || size_t(label) >= classes_)
        throw std::out_of_range("dataset '" + user_->name() + "': sample " + std::to_string(indices[i]) +
                                " has label " + std::to_string(label) + " (classes 0.." +
                                std::to_string(classes_ - 1) + ")");
      out.labels[i] = label;
    }
  }
}

}  // namespace dpt
