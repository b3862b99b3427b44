#include "models/nn/param_store.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "device/runtime.h"
#include "models/kernels/cpu/crc32.h"
#include "models/kernels/cpu/page_memory.h"
#include "models/kernels/cpu/parallel_for.h"
#include "models/nn/tensor.h"

namespace dpt {

namespace {
// Appends a named view of `shape` at the end of a flat buffer of `total` elements.
template <class Info>
size_t append_view(std::vector<Info>& infos, size_t& total, const std::string& name, std::vector<int64_t> shape) {
  Info info;
  info.name = name;
  info.numel = shape_numel(shape);
  info.shape = std::move(shape);
  info.offset = total;
  info.index = infos.size();
  total += info.numel;
  infos.push_back(std::move(info));
  return infos.back().index;
}
}  // namespace

void ParamStore::check_new_name(const std::string& name, const char* what) const {
  if (finalized_) throw std::logic_error(std::string("ParamStore: ") + what + " " + name + " added after finalize()");
  if (find(name) != infos_.size() || find_buffer(name) != buffer_infos_.size())
    throw std::logic_error(std::string("duplicate ") + what + " name " + name);
}

size_t ParamStore::add(const std::string& name, std::vector<int64_t> shape) {
  check_new_name(name, "parameter");
  return append_view(infos_, total_, name, std::move(shape));
}

size_t ParamStore::add_buffer(const std::string& name, std::vector<int64_t> shape, bool is_count) {
  check_new_name(name, "buffer");
  const size_t index = append_view(buffer_infos_, buffer_total_, name, std::move(shape));
  buffer_infos_[index].is_count = is_count;
  return index;
}

size_t ParamStore::find_buffer(const std::string& name) const {
  for (const auto& info : buffer_infos_)
    if (info.name == name) return info.index;
  return buffer_infos_.size();
}

void ParamStore::set_resident_shard(int rank, int world) {
  if (finalized_) throw std::logic_error("ParamStore::set_resident_shard() after finalize()");
  if (world < 1 || rank < 0 || rank >= world)
    throw std::invalid_argument("ParamStore: resident shard of rank " + std::to_string(rank) + " of " +
                                std::to_string(world));
  shard_rank_ = rank;
  shard_world_ = world;
}

void ParamStore::finalize() {
  if (finalized_) return;
  buffers_.assign(buffer_total_, 0.0f);
  params_ = LazyFloats(total_ + kShardSlack);
  grads_ = LazyFloats(total_ + kShardSlack);
  keep_begin_ = 0;
  keep_end_ = total_;
  if (sharded()) {
    // ZeRO's cut (parallel/shard_layout.h), clipped to the real elements.
    const size_t s = (total_ + size_t(shard_world_) - 1) / size_t(shard_world_);
    keep_begin_ = std::min(total_, size_t(shard_rank_) * s);
    keep_end_ = std::min(total_, keep_begin_ + s);
    crcs_.assign(infos_.size(), 0);
    // The unowned ranges are released parameter by parameter (seal) and never used again.
    float* base = params_.data();
    keep_small_pages(base, base + keep_begin_);
    keep_small_pages(base + keep_end_, base + total_);
  }
  finalized_ = true;
}

void ParamStore::seal(size_t index) {
  if (!sharded()) return;
  const ParamInfo& p = infos_.at(index);
  float* base = params_.data();
  crcs_[index] = crc32(base + p.offset, p.numel * sizeof(float));
  const size_t b = p.offset, e = p.offset + p.numel;
  if (b < keep_begin_) release_slice(base + b, base + std::min(e, keep_begin_));
  if (e > keep_end_) release_slice(base + std::max(b, keep_end_), base + e);
}

void ParamStore::seal_all() {
  for (size_t i = 0; i < infos_.size(); ++i) seal(i);
}

uint64_t ParamStore::fingerprint() const {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the CRCs' bytes
  for (uint32_t c : crcs_)
    for (int k = 0; k < 4; ++k) h = (h ^ ((c >> (8 * k)) & 0xFF)) * 1099511628211ull;
  return sharded() ? h : 0;
}

static std::span<float> padded(LazyFloats& v, size_t n, const char* what) {
  if (n > v.size())
    throw std::length_error(std::string("ParamStore: ") + what + " padded to " + std::to_string(n) +
                            " elements, more than the " + std::to_string(v.size()) + " allocated");
  return {v.data(), n};
}

std::span<float> ParamStore::padded_params(size_t n) {
  host_params_for_write();
  return padded(params_, n, "parameters");
}
std::span<float> ParamStore::padded_grads(size_t n) {
  host_grads_for_read();
  settle_bulk();
  return padded(grads_, n, "gradients");
}

void ParamStore::mark_grads_zero() {
  if (!finalized_) throw std::logic_error("ParamStore::mark_grads_zero() before finalize()");
  pending_.assign(infos_.size(), 1);
  pending_count_ = infos_.size();
}

float* ParamStore::claim_grad(size_t index, bool& was_zero) {
  was_zero = pending_count_ > 0 && pending_[index];
  if (was_zero) {
    pending_[index] = 0;
    --pending_count_;
  }
  return grads_.data() + infos_[index].offset;
}

void ParamStore::settle_grad(size_t index) const {
  if (pending_count_ == 0 || !pending_[index]) return;
  const ParamInfo& p = infos_[index];
  // Logically const (see pending_): the values were zero already.
  float* g = const_cast<float*>(grads_.data()) + p.offset;
  std::fill(g, g + p.numel, 0.0f);
  pending_[index] = 0;
  --pending_count_;
}

void ParamStore::settle_grads() const {
  if (pending_count_ == 0) return;
  float* g = const_cast<float*>(grads_.data());
  // Runs of consecutive pending parameters are one contiguous range: cleared in parallel.
  for (size_t i = 0; i < infos_.size();) {
    if (!pending_[i]) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < infos_.size() && pending_[j]) pending_[j++] = 0;
    const size_t begin = infos_[i].offset, end = infos_[j - 1].offset + infos_[j - 1].numel;
    parallel_for(static_cast<int64_t>(end - begin), 1 << 18, [&](int64_t first, int64_t last) {
      std::fill(g + begin + first, g + begin + last, 0.0f);
    });
    i = j;
  }
  pending_count_ = 0;
}

void ParamStore::attach_device() {
  if (!finalized_) throw std::logic_error("ParamStore::attach_device() before finalize()");
  device_params_.reserve(params_.size());
  device_grads_.reserve(grads_.size());
  device::zero_on_kernel_stream(device_params_.data(), params_.size() * sizeof(float));
  device::zero_on_kernel_stream(device_grads_.data(), grads_.size() * sizeof(float));
  if (!buffers_.empty()) {
    device_buffers_.reserve(buffers_.size());
    device_buffers_stale_ = true;  // the host values go up at the first device_buffer()
  }
}

float* ParamStore::device_buffer(size_t index) {
  if (!on_device()) throw std::logic_error("ParamStore::device_buffer: the store has no device mirror");
  if (device_buffers_stale_) {
    device::copy(device_buffers_.data(), buffers_.data(), buffers_.size() * sizeof(float));
    uploaded_ += buffers_.size() * sizeof(float);
    device_buffers_stale_ = false;
  }
  return device_buffers_.data() + buffer_infos_[index].offset;
}

void ParamStore::download_buffers() const {
  device::copy(buffers_.data(), device_buffers_.data(), buffers_.size() * sizeof(float));
  resident_downloaded_ += buffers_.size() * sizeof(float);
  host_buffers_stale_ = false;
}

void ParamStore::upload_params(size_t begin, size_t end) {
  device::copy(device_params_.data() + begin, params_.data() + begin, (end - begin) * sizeof(float));
  uploaded_ += (end - begin) * sizeof(float);
}

void ParamStore::download_grads(size_t begin, size_t end) {
  settle_grads();  // a pending gradient in the range must not be zeroed after the copy
  device::copy(grads_.data() + begin, device_grads_.data() + begin, (end - begin) * sizeof(float));
  downloaded_ += (end - begin) * sizeof(float);
}

void ParamStore::set_device_resident(bool on) {
  if (on == resident_) return;
  if (on && !on_device()) throw std::logic_error("ParamStore::set_device_resident: the store has no device mirror");
  if (on) {
    upload_params(0, total_);
    resident_ = true;
    return;
  }
  host_params_for_read();
  host_grads_for_read();
  resident_ = false;
  device_params_stale_ = false;
}

void ParamStore::sync_device_params() {
  if (!device_params_stale_) return;
  upload_params(0, total_);
  device_params_stale_ = false;
}

void ParamStore::download_params() const {
  device::copy(params_.data(), device_params_.data(), total_ * sizeof(float));
  resident_downloaded_ += total_ * sizeof(float);
  host_params_stale_ = false;
}

void ParamStore::download_all_grads() const {
  device::copy(grads_.data(), device_grads_.data(), total_ * sizeof(float));
  resident_downloaded_ += total_ * sizeof(float);
  host_grads_stale_ = false;
}

void ParamStore::zero_device_grads() {
  if (on_device()) device::zero_on_kernel_stream(device_grads_.data(), grads_.size() * sizeof(float));
}

size_t ParamStore::find(const std::string& name) const {
  for (const auto& info : infos_)
    if (info.name == name) return info.index;
  return infos_.size();
}

}  // namespace dpt
