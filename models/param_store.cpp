#include "models/param_store.h"

#include <stdexcept>
#include <string>

#include "models/tensor.h"

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

void ParamStore::finalize() {
  if (finalized_) return;
  buffers_.assign(buffer_total_, 0.0f);
  params_.assign(total_ + kShardSlack, 0.0f);
  grads_.assign(total_ + kShardSlack, 0.0f);
  finalized_ = true;
}

static std::span<float> padded(HostFloats& v, size_t n, const char* what) {
  if (n > v.size())
    throw std::length_error(std::string("ParamStore: ") + what + " padded to " + std::to_string(n) +
                            " elements, more than the " + std::to_string(v.size()) + " allocated");
  return {v.data(), n};
}

std::span<float> ParamStore::padded_params(size_t n) { return padded(params_, n, "parameters"); }
std::span<float> ParamStore::padded_grads(size_t n) { return padded(grads_, n, "gradients"); }

void ParamStore::attach_device() {
  if (!finalized_) throw std::logic_error("ParamStore::attach_device() before finalize()");
  device_params_.reserve(params_.size());
  device_grads_.reserve(grads_.size());
  gpu::zero(device_params_.data(), params_.size() * sizeof(float));
  gpu::zero(device_grads_.data(), grads_.size() * sizeof(float));
}

void ParamStore::upload_params(size_t begin, size_t end) {
  gpu::upload(device_params_.data() + begin, params_.data() + begin, (end - begin) * sizeof(float));
  uploaded_ += (end - begin) * sizeof(float);
}

void ParamStore::download_grads(size_t begin, size_t end) {
  gpu::download(grads_.data() + begin, device_grads_.data() + begin, (end - begin) * sizeof(float));
  downloaded_ += (end - begin) * sizeof(float);
}

void ParamStore::zero_device_grads() {
  if (on_device()) gpu::zero(device_grads_.data(), grads_.size() * sizeof(float));
}

size_t ParamStore::find(const std::string& name) const {
  for (const auto& info : infos_)
    if (info.name == name) return info.index;
  return infos_.size();
}

}  // namespace dpt
