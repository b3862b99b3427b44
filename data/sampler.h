#pragma once
// DistributedSampler with the semantics of torch.utils.data.DistributedSampler. Terms:
// N = dataset size, R = num_replicas (world size), r = this rank.
//   num_samples  per rank: ceil(N / R), or floor(N / R) with drop_last (PyTorch writes
//                ceil((N - R) / R) when N % R != 0, which is the same number).
//   total_size = num_samples * R.
//   order        0..N-1, or with shuffle a permutation seeded by seed + epoch.
//   padding      without drop_last the order is extended to total_size by repeating it
//                from its start (as many times over as needed when N < total_size - N);
//                with drop_last its tail beyond total_size is cut.
//   rank r takes order[r], order[r + R], order[r + 2R], ...
// The permutation is Fisher-Yates driven by std::mt19937_64(seed + epoch) with unbiased
// rejection sampling (data/rng.h): deterministic on every platform, but not the same
// permutation as torch.randperm, whose generator is different.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace dpt {

class DistributedSampler {
 public:
  // Throws std::invalid_argument unless num_replicas >= 1 and 0 <= rank < num_replicas.
  DistributedSampler(size_t dataset_size, int num_replicas, int rank, bool shuffle = true,
                     uint64_t seed = 0, bool drop_last = false);

  // Like PyTorch: call before each epoch, or every epoch reuses epoch 0's order.
  void set_epoch(uint64_t epoch) { epoch_ = epoch; }
  uint64_t epoch() const { return epoch_; }

  // This rank's indices for the current epoch, num_samples() of them.
  std::vector<size_t> indices() const;
  size_t num_samples() const { return num_samples_; }
  size_t total_size() const { return num_samples_ * size_t(num_replicas_); }
  size_t dataset_size() const { return dataset_size_; }
  int num_replicas() const { return num_replicas_; }
  int rank() const { return rank_; }
  bool shuffle() const { return shuffle_; }
  bool drop_last() const { return drop_last_; }
  uint64_t seed() const { return seed_; }

 private:
  size_t dataset_size_;
  int num_replicas_, rank_;
  bool shuffle_;
  uint64_t seed_;
  bool drop_last_;
  uint64_t epoch_ = 0;
  size_t num_samples_;
};

// The permutation of 0..n-1 the sampler uses for `seed` (already including the epoch).
std::vector<size_t> shuffled_range(size_t n, uint64_t seed);

}  // namespace dpt
