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
//   start        a position in the epoch's order where this pass begins (0: the whole
//                epoch, exactly PyTorch's sampler). The pass covers order[start, N):
//                num_samples = ceil((N - start) / R) (floor with drop_last), and rank r
//                takes positions start + r, start + r + R, ... of the order repeated
//                from its start (so padding repeats order[0, ...) as without a start).
//                After k steps of B samples per rank, R ranks have consumed exactly
//                order[0, k*R*B), so a pass that starts there at another world size R'
//                sees every sample not yet consumed this epoch, once (the elastic
//                trainer's re-sharding; a checkpoint's resume at another world size);
//                at the same world size it is the rest of the uninterrupted pass.
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
  // Begins the pass at `position` of the epoch's order (<= dataset_size, else
  // std::invalid_argument); 0 by default.
  void set_start(size_t position);
  size_t start() const { return start_; }

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
  size_t start_ = 0;
  size_t num_samples_;
};

// The permutation of 0..n-1 the sampler uses for `seed` (already including the epoch).
std::vector<size_t> shuffled_range(size_t n, uint64_t seed);

}  // namespace dpt
