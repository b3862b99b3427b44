#include "optim/optimizer.h"

#include <stdexcept>

#include "device/runtime.h"

namespace dpt {

Optimizer::~Optimizer() = default;

std::vector<std::pair<std::string, std::span<float>>> Optimizer::host_state() { return {}; }

void Optimizer::device_step(float*, const float*, float, const std::vector<float*>&) {
  throw std::logic_error(name() + " has no device step");
}

std::vector<std::pair<std::string, std::span<float>>> Optimizer::state_buffers() {
  auto host = host_state();
  if (on_device_) {
    if (!host_state_written_)
      for (size_t i = 0; i < host.size(); ++i)
        device::copy(host[i].second.data(), device_state_[i].data(), host[i].second.size() * sizeof(float));
    host_state_written_ = true;  // the caller may write through the views (a restore)
  }
  return host;
}

void Optimizer::to_device() {
  if (on_device_) return;
  if (!has_device_step()) throw std::logic_error(name() + " has no device step: it cannot move to the device");
  auto host = host_state();
  device_state_.resize(host.size());
  for (size_t i = 0; i < host.size(); ++i) device_state_[i].reserve(host[i].second.size());
  on_device_ = true;
  upload_state();
}

void Optimizer::upload_state() {
  auto host = host_state();
  for (size_t i = 0; i < host.size(); ++i)
    device::copy(device_state_[i].data(), host[i].second.data(), host[i].second.size() * sizeof(float));
  host_state_written_ = false;
}

void Optimizer::step_on_device(float* params, const float* grads, float lr) {
  if (!on_device_) throw std::logic_error(name() + ".step_on_device before to_device()");
  if (host_state_written_) upload_state();
  std::vector<float*> state;
  for (auto& d : device_state_) state.push_back(d.data());
  device_step(params, grads, lr, state);
}

void Optimizer::check_sizes(std::span<const float> params, std::span<const float> grads) const {
  if (params.size() != numel_ || grads.size() != numel_) {
    throw std::invalid_argument(name() + ".step: optimizer owns " + std::to_string(numel_) +
                                " elements but got " + std::to_string(params.size()) +
                                " parameters and " + std::to_string(grads.size()) + " gradients");
  }
}

}  // namespace dpt
