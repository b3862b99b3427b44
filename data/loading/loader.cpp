#include "data/loading/loader.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

namespace dpt {

DataLoader::DataLoader(const Dataset& dataset, DistributedSampler& sampler, size_t batch_size,
                       bool drop_last_batch, size_t prefetch)
    : dataset_(dataset),
      sampler_(sampler),
      batch_size_(batch_size),
      drop_last_batch_(drop_last_batch),
      prefetch_(prefetch) {
  if (batch_size == 0) throw std::invalid_argument("DataLoader: batch_size must be positive");
  if (sampler.dataset_size() != dataset.size()) {
    throw std::invalid_argument("DataLoader: sampler built for " +
                                std::to_string(sampler.dataset_size()) + " samples but " +
                                dataset.name() + " has " + std::to_string(dataset.size()));
  }
}

DataLoader::~DataLoader() { stop_worker(); }

size_t DataLoader::num_batches() const { return batches_for(sampler_.num_samples()); }

size_t DataLoader::batches_for(size_t num_indices) const {
  const size_t n = num_indices;
  return drop_last_batch_ ? n / batch_size_ : (n + batch_size_ - 1) / batch_size_;
}

void DataLoader::reset(uint64_t epoch) {
  sampler_.set_epoch(epoch);
  start_epoch();
}

void DataLoader::stop_worker() {
  if (!worker_.joinable()) return;
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  not_full_.notify_all();
  worker_.join();
}

void DataLoader::start_epoch() {
  stop_worker();
  started_ = true;
  finished_ = false;
  error_ = nullptr;
  indices_ = sampler_.indices();
  epoch_ = sampler_.epoch();
  next_batch_ = 0;
  {
    std::lock_guard lock(mu_);
    for (auto& item : queue_) spare_.push_back(std::move(item.batch));
    queue_.clear();
    stop_ = false;
  }
  if (prefetch_ > 0) worker_ = std::thread(&DataLoader::run_worker, this, indices_);
}

void DataLoader::fill_batch(const std::vector<size_t>& indices, size_t b, Batch& out) const {
  const size_t begin = b * batch_size_;
  const size_t end = std::min(begin + batch_size_, indices.size());
  dataset_.fill_for_epoch(std::span<const size_t>(indices.data() + begin, end - begin), epoch_, out);
}

void DataLoader::run_worker(std::vector<size_t> indices) {
  // Counted from our own copy: the worker touches neither the sampler nor caller state.
  const size_t batches = batches_for(indices.size());
  Item item;
  try {
    for (size_t b = 0; b < batches; ++b) {
      {
        std::lock_guard lock(mu_);
        if (stop_) return;
        if (!spare_.empty()) {
          item.batch = std::move(spare_.back());
          spare_.pop_back();
        }
      }
      fill_batch(indices, b, item.batch);  // the slow part, outside the lock
      std::unique_lock lock(mu_);
      not_full_.wait(lock, [&] { return stop_ || queue_.size() < prefetch_; });
      if (stop_) return;
      queue_.push_back(std::move(item));
      item = Item{};
      lock.unlock();
      not_empty_.notify_one();
    }
    item.end = true;
  } catch (...) {
    item = Item{};
    item.error = std::current_exception();
  }
  // The end marker or the error: pushed even when the queue is full, so it can never be
  // dropped; next() consumes batches in order before reaching it.
  {
    std::lock_guard lock(mu_);
    if (stop_) return;
    queue_.push_back(std::move(item));
  }
  not_empty_.notify_one();
}

bool DataLoader::next(Batch& out) {
  if (!started_) start_epoch();
  if (error_) std::rethrow_exception(error_);
  if (finished_) return false;

  if (prefetch_ == 0) {
    if (next_batch_ >= batches_for(indices_.size())) {
      finished_ = true;
      return false;
    }
    try {
      fill_batch(indices_, next_batch_, out);
    } catch (...) {
      error_ = std::current_exception();
      throw;
    }
    ++next_batch_;
    return true;
  }

  std::unique_lock lock(mu_);
  not_empty_.wait(lock, [&] { return !queue_.empty(); });
  Item item = std::move(queue_.front());
  queue_.pop_front();
  if (item.error || item.end) {
    lock.unlock();
    finished_ = true;
    stop_worker();  // it has returned or is about to; join it now
    if (item.error) {
      error_ = item.error;
      std::rethrow_exception(error_);
    }
    return false;
  }
  std::swap(out, item.batch);
  spare_.push_back(std::move(item.batch));  // the caller's old buffers, for reuse
  lock.unlock();
  not_full_.notify_one();
  return true;
}

}  // namespace dpt
