#include "dpt/tensor.h"

#include "models/nn/tensor.h"

#include <cmath>
#include <random>
#include <stdexcept>

namespace dpt::nn {
namespace {
// The internal tensor's helpers (models/nn/tensor.h): the same words in every message.
size_t count(const std::vector<int64_t>& shape) { return ::dpt::shape_numel(shape); }
std::string text(const std::vector<int64_t>& shape) { return ::dpt::shape_to_string(shape); }
}  // namespace

Tensor::Tensor(std::vector<int64_t> shape, float fill) : shape_(std::move(shape)), values_(count(shape_), fill) {}

Tensor::Tensor(std::vector<int64_t> shape, std::vector<float> values)
    : shape_(std::move(shape)), values_(std::move(values)) {
  if (values_.size() != count(shape_))
    throw std::invalid_argument("dpt::nn::Tensor: " + std::to_string(values_.size()) + " values for shape " +
                                text(shape_) + " (" + std::to_string(count(shape_)) + " elements)");
}

Tensor Tensor::randn(std::vector<int64_t> shape, uint64_t seed) {
  Tensor t(std::move(shape));
  // Box-Muller over the engine's own bits: std::normal_distribution's algorithm differs
  // between standard libraries, the engine's sequence does not.
  std::mt19937_64 rng(seed);
  const double two_pi = 6.283185307179586;
  auto uniform = [&] { return (double(rng() >> 11) + 0.5) * 0x1.0p-53; };  // (0, 1)
  for (size_t i = 0; i < t.numel(); i += 2) {
    const double r = std::sqrt(-2.0 * std::log(uniform())), a = two_pi * uniform();
    t.values_[i] = float(r * std::cos(a));
    if (i + 1 < t.numel()) t.values_[i + 1] = float(r * std::sin(a));
  }
  return t;
}

float Tensor::item() const {
  if (values_.size() != 1)
    throw std::logic_error("dpt::nn::Tensor::item(): the tensor has " + std::to_string(values_.size()) +
                           " elements, not 1");
  return values_[0];
}

Tensor Tensor::reshape(std::vector<int64_t> shape) const {
  if (count(shape) != values_.size())
    throw std::invalid_argument("dpt::nn::Tensor::reshape: " + text(shape_) + " to " + text(shape) +
                                ": the element counts differ");
  return Tensor(std::move(shape), values_);
}

Tensor Tensor::rows(int64_t begin, int64_t end) const {
  if (shape_.empty() || begin < 0 || end < begin || end > shape_[0])
    throw std::out_of_range("dpt::nn::Tensor::rows(" + std::to_string(begin) + ", " + std::to_string(end) +
                            ") of a tensor of shape " + text(shape_));
  std::vector<int64_t> shape = shape_;
  shape[0] = end - begin;
  const size_t row = shape_[0] > 0 ? values_.size() / size_t(shape_[0]) : 0;
  return Tensor(std::move(shape), std::vector<float>(values_.begin() + long(size_t(begin) * row),
                                                     values_.begin() + long(size_t(end) * row)));
}

std::string Tensor::shape_text() const { return text(shape_); }

Tensor Tensor::concat_samples(const std::vector<Tensor>& parts) {
  if (parts.empty()) throw std::invalid_argument("dpt::nn::Tensor::concat_samples: no tensors");
  const int64_t n = parts[0].shape_.empty() ? -1 : parts[0].shape_[0];
  size_t per = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i].shape_.empty() || parts[i].shape_[0] != n)
      throw std::invalid_argument("dpt::nn::Tensor::concat_samples: tensor " + std::to_string(i) + " has shape " +
                                  parts[i].shape_text() + ", tensor 0 " + parts[0].shape_text() +
                                  " (the same batch size first)");
    per += n > 0 ? parts[i].numel() / size_t(n) : 0;
  }
  Tensor out({n, int64_t(per)});
  size_t at = 0;
  for (const Tensor& p : parts) {
    const size_t k = n > 0 ? p.numel() / size_t(n) : 0;
    for (int64_t s = 0; s < n; ++s)
      std::copy(p.data() + size_t(s) * k, p.data() + size_t(s + 1) * k, out.data() + size_t(s) * per + at);
    at += k;
  }
  return out;
}

}  // namespace dpt::nn
