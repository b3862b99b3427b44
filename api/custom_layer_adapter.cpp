#include "api/custom_layer_adapter.h"
#include "api/tensor_convert.h"

#include <algorithm>
#include <functional>
#include <stdexcept>

namespace dpt {

CustomLayerAdapter::CustomLayerAdapter(ParamStore& store, const std::string& name,
                                       std::shared_ptr<nn::CustomLayer> user)
    : Layer(name), store_(store), user_(std::move(user)) {
  if (!user_) throw std::invalid_argument("dpt::nn::Custom: " + name + ": a null layer");
  for (const nn::ParameterSpec& p : user_->parameters()) {
    if (p.name.empty() || p.name.find('.') != std::string::npos)
      throw std::invalid_argument("dpt::nn::Custom: " + name + ": parameter name '" + p.name +
                                  "' (non-empty, without dots)");
    params_.push_back(store.add(join_name(name, p.name), p.shape));
  }
}

void CustomLayerAdapter::init_params(ParamStore& store, uint64_t seed) {
  std::vector<std::span<float>> views;
  for (size_t p : params_) {
    std::span<float> v = store.param_span(p);
    std::fill(v.begin(), v.end(), 0.0f);
    views.push_back(v);
  }
  user_->reset_parameters(views, seed ^ std::hash<std::string>{}(name()));
}

std::vector<std::span<const float>> CustomLayerAdapter::param_views() const {
  std::vector<std::span<const float>> out;
  for (size_t p : params_) out.push_back(const_cast<ParamStore&>(store_).param_span(p));
  return out;
}

const Tensor& CustomLayerAdapter::forward(const Tensor& in, const ForwardContext&) {
  x_ = to_public(in);
  y_ = user_->forward(x_, param_views());
  copy_into(y_, out_);
  return out_;
}

const Tensor& CustomLayerAdapter::backward(const Tensor& dout, GradSink& sink, bool need_input_grad) {
  const nn::Tensor dy = to_public(dout);
  std::vector<std::span<float>> grads;
  for (size_t p : params_) grads.push_back(store_.grad_span(p));
  const nn::Tensor dx = user_->backward(x_, y_, dy, param_views(), grads);
  for (size_t p : params_) sink.ready(p);
  if (!need_input_grad) {
    dx_.resize({0});
    return dx_;
  }
  if (dx.shape() != x_.shape())
    throw std::logic_error("custom layer " + name() + ": backward returned a gradient of shape " + dx.shape_text() +
                           " for an input of shape " + x_.shape_text());
  copy_into(dx, dx_);
  return dx_;
}

}  // namespace dpt
