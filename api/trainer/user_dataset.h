// A user's dpt::data::Dataset (dpt/trainer.h) as the trainer's Dataset: batches filled
// sample by sample through get(), labels or regression targets as the dataset says.
#pragma once

#include <memory>

#include "data/dataset.h"
#include "dpt/trainer.h"

namespace dpt {

class UserDataset : public Dataset {
 public:
  // Checks the dataset's shape and class count once (std::invalid_argument naming the dataset).
  explicit UserDataset(std::unique_ptr<data::Dataset> user);
  size_t size() const override { return size_; }
  void fill(std::span<const size_t> indices, Batch& out) const override;
  std::string name() const override { return user_->name(); }
  size_t num_classes() const override { return classes_; }

 private:
  std::unique_ptr<data::Dataset> user_;
  size_t size_, classes_, targets_, sample_numel_ = 1;
  std::vector<int64_t> shape_;
};

}  // namespace dpt
