#include "models/param_store.h"

#include <stdexcept>
#include <string>

#include "models/tensor.h"

namespace dpt {

size_t ParamStore::add(const std::string& name, std::vector<int64_t> shape) {
  if (finalized_) throw std::logic_error("ParamStore::add(" + name + ") after finalize()");
  if (find(name) != infos_.size()) throw std::logic_error("duplicate parameter name " + name);
  ParamInfo info;
  info.name = name;
  info.numel = shape_numel(shape);
  info.shape = std::move(shape);
  info.offset = total_;
  info.index = infos_.size();
  total_ += info.numel;
  infos_.push_back(std::move(info));
  return infos_.back().index;
}

void ParamStore::finalize() {
  if (finalized_) return;
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
