#pragma once
// A Dataset is a random-access collection of samples. `fill` gathers the samples named by
// `indices` into one Batch; it is const and must be safe to call from a background thread
// (the DataLoader does), so implementations keep all their data immutable after
// construction.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "data/batch.h"

namespace dpt {

// Which part of a dataset: `train`, or the held-out part (`test` for image sets, the
// validation tail for the text corpus).
enum class Split { train, test };

// Accepts "train", "test", "val", "valid", "validation"; throws std::invalid_argument
// otherwise.
Split parse_split(std::string_view s);
const char* split_name(Split s);

class Dataset {
 public:
  virtual ~Dataset();
  virtual size_t size() const = 0;
  // Overwrites `out` with the samples at `indices` (each < size()), in that order.
  virtual void fill(std::span<const size_t> indices, Batch& out) const = 0;
  // The same for epoch `epoch` of training: datasets with random augmentation decide it
  // from (their seed, epoch, sample index); the others ignore the epoch. The DataLoader
  // calls this with its sampler's epoch.
  virtual void fill_for_epoch(std::span<const size_t> indices, uint64_t epoch, Batch& out) const {
    fill(indices, out);
  }
  virtual std::string name() const = 0;
  // Whether batches may carry ignored targets (kIgnoreLabel, batch.h) in numbers that vary
  // from batch to batch (documents of different lengths): the loss is then a mean over
  // tokens, and a data-parallel trainer agrees the step's target count across ranks.
  virtual bool has_ignored_targets() const { return false; }
  // Classification data: how many classes its labels come from (labels are 0 .. n-1); 0
  // for other data. The trainers size a classifier's head from it (--num-classes).
  virtual size_t num_classes() const { return 0; }
};

// Throws std::out_of_range naming the dataset if any index is >= size. Implementations
// call it at the top of fill().
void check_indices(const Dataset& ds, std::span<const size_t> indices);

}  // namespace dpt
