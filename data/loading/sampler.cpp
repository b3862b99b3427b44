#include "data/loading/sampler.h"

#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>

#include "data/rng.h"

namespace dpt {

std::vector<size_t> shuffled_range(size_t n, uint64_t seed) {
  std::vector<size_t> v(n);
  std::iota(v.begin(), v.end(), size_t(0));
  Rng rng(seed);
  for (size_t i = n; i > 1; --i) {  // Fisher-Yates: swap slot i-1 with a uniform j <= i-1
    const size_t j = size_t(uniform_below(rng, i));
    std::swap(v[i - 1], v[j]);
  }
  return v;
}

DistributedSampler::DistributedSampler(size_t dataset_size, int num_replicas, int rank,
                                       bool shuffle, uint64_t seed, bool drop_last)
    : dataset_size_(dataset_size),
      num_replicas_(num_replicas),
      rank_(rank),
      shuffle_(shuffle),
      seed_(seed),
      drop_last_(drop_last) {
  if (num_replicas < 1) {
    throw std::invalid_argument("DistributedSampler: num_replicas must be >= 1, got " +
                                std::to_string(num_replicas));
  }
  if (rank < 0 || rank >= num_replicas) {
    throw std::invalid_argument("DistributedSampler: invalid rank " + std::to_string(rank) +
                                ", rank should be in the interval [0, " +
                                std::to_string(num_replicas - 1) + "]");
  }
  const size_t r = size_t(num_replicas);
  num_samples_ = drop_last ? dataset_size / r : (dataset_size + r - 1) / r;
}

void DistributedSampler::set_start(size_t position) {
  if (position > dataset_size_)
    throw std::invalid_argument("DistributedSampler: start position " + std::to_string(position) +
                                " is past the dataset's " + std::to_string(dataset_size_) + " samples");
  start_ = position;
  const size_t left = dataset_size_ - start_, r = size_t(num_replicas_);
  num_samples_ = drop_last_ ? left / r : (left + r - 1) / r;
}

std::vector<size_t> DistributedSampler::indices() const {
  const size_t r = size_t(num_replicas_);
  const size_t total = total_size();
  std::vector<size_t> order;
  if (shuffle_) {
    order = shuffled_range(dataset_size_, seed_ + epoch_);  // unsigned wrap-around is well defined
  } else {
    order.resize(dataset_size_);
    std::iota(order.begin(), order.end(), size_t(0));
  }
  // The pass covers order[start_, N). Padding (total > N - start_) repeats the order
  // from its start: position p of the pass maps to order[(start_ + p) % N]. Trimming
  // (drop_last) just never reads past total. N == start_ implies total == 0.
  const size_t n = dataset_size_;
  std::vector<size_t> mine;
  mine.reserve(num_samples_);
  for (size_t p = size_t(rank_); p < total; p += r) mine.push_back(order[(start_ + p) % n]);
  return mine;
}

}  // namespace dpt
