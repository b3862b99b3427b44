#pragma once
// DataLoader: cuts this rank's sampler indices into batches and fills them on a background
// thread, `prefetch` batches ahead, so the training step never waits for data it could
// have had. Terms: an *epoch* is one pass over sampler.indices(); the *queue* holds filled
// batches (at most `prefetch`), and the end of the epoch or an error travel through it in
// order, so the caller sees every batch before it sees the end, and an exception thrown
// while filling is rethrown by next() instead of being lost on the worker thread.
// Batches come out in sampler order, so a run is deterministic for a sampler seed.
// Samples are filled with Dataset::fill_for_epoch(indices, sampler epoch), so random
// augmentation follows the epoch.
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "data/batch.h"
#include "data/dataset.h"
#include "data/loading/sampler.h"

namespace dpt {

class DataLoader {
 public:
  // prefetch 0 fills each batch on the caller's thread inside next() (no thread at all).
  // The dataset and sampler must outlive the loader.
  DataLoader(const Dataset& dataset, DistributedSampler& sampler, size_t batch_size,
             bool drop_last_batch = false, size_t prefetch = 2);
  ~DataLoader();  // stops and joins the worker
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // Starts epoch `epoch` from its first batch: calls sampler.set_epoch(epoch), abandons
  // whatever was left of the previous epoch.
  void reset(uint64_t epoch);
  // Overwrites `out` with the next batch and returns true, or returns false at the end of
  // the epoch. Rethrows an exception raised while filling a batch (again on every call,
  // until reset). Starts the sampler's current epoch if reset() was never called.
  bool next(Batch& out);

  size_t num_batches() const;  // batches per epoch
  size_t batch_size() const { return batch_size_; }

 private:
  struct Item {
    Batch batch;
    std::exception_ptr error;  // set: filling failed
    bool end = false;          // set: no more batches this epoch
  };

  size_t batches_for(size_t num_indices) const;
  void start_epoch();
  void stop_worker();
  void run_worker(std::vector<size_t> indices);
  void fill_batch(const std::vector<size_t>& indices, size_t b, Batch& out) const;

  const Dataset& dataset_;
  DistributedSampler& sampler_;
  size_t batch_size_;
  bool drop_last_batch_;
  size_t prefetch_;

  // Caller-thread state.
  bool started_ = false;
  bool finished_ = false;
  std::exception_ptr error_;     // sticky until reset
  std::vector<size_t> indices_;  // current epoch (used when prefetch_ == 0)
  uint64_t epoch_ = 0;           // the sampler's epoch when it started (augmentation)
  size_t next_batch_ = 0;        // used when prefetch_ == 0

  // Shared with the worker, guarded by mu_.
  std::mutex mu_;
  std::condition_variable not_full_, not_empty_;
  std::deque<Item> queue_;
  std::vector<Batch> spare_;  // buffers handed back by next(), reused to avoid reallocation
  bool stop_ = false;
  std::thread worker_;
};

}  // namespace dpt
