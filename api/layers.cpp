// The public layer descriptions (dpt/nn.h) and the internal layers they build.
#include <stdexcept>

#include "api/custom_layer_adapter.h"
#include "api/layer_spec.h"
#include "models/nn/layers/activations.h"
#include "models/nn/layers/avg_pool.h"
#include "models/nn/layers/batch_norm.h"
#include "models/nn/layers/blocks.h"
#include "models/nn/layers/conv2d.h"
#include "models/nn/layers/dropout.h"
#include "models/nn/layers/linear.h"
#include "models/nn/layers/shape_layers.h"

namespace dpt::nn {
namespace {
using Builder = std::function<std::unique_ptr<::dpt::Layer>(::dpt::ParamStore&, const std::string&)>;
Layer make(std::string kind, Builder build) {
  return Layer(std::make_shared<const Layer::Spec>(Layer::Spec{std::move(kind), std::move(build)}));
}
void positive(const char* layer, const char* what, int64_t v) {
  if (v <= 0)
    throw std::invalid_argument(std::string("dpt::nn::") + layer + ": " + what + " " + std::to_string(v) +
                                " (must be positive)");
}
std::unique_ptr<::dpt::SequentialBlock> build_block(const Sequential& seq, ::dpt::ParamStore& store,
                                                    const std::string& name) {
  auto block = std::make_unique<::dpt::SequentialBlock>(name);
  for (const auto& [child, layer] : seq.layers()) block->add(layer.spec().build(store, ::dpt::join_name(name, child)));
  return block;
}
}  // namespace

Layer::Layer(const Sequential& block) {
  if (block.size() == 0) throw std::invalid_argument("dpt::nn::Sequential: an empty block used as a layer");
  Sequential copy = block;
  spec_ = std::make_shared<const Spec>(Spec{"Sequential", [copy](::dpt::ParamStore& store, const std::string& name) {
                                              return std::unique_ptr<::dpt::Layer>(build_block(copy, store, name));
                                            }});
}

Layer Linear(int64_t in, int64_t out, bool bias) {
  positive("Linear", "in_features", in);
  positive("Linear", "out_features", out);
  return make("Linear", [=](::dpt::ParamStore& s, const std::string& n) {
    return std::make_unique<::dpt::Linear>(s, n, in, out, bias);
  });
}

Layer Conv2d(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t padding, bool bias) {
  positive("Conv2d", "in_channels", in);
  positive("Conv2d", "out_channels", out);
  positive("Conv2d", "kernel", kernel);
  positive("Conv2d", "stride", stride);
  if (padding < 0) throw std::invalid_argument("dpt::nn::Conv2d: padding " + std::to_string(padding) + " (negative)");
  return make("Conv2d", [=](::dpt::ParamStore& s, const std::string& n) {
    return std::make_unique<::dpt::Conv2d>(s, n, in, out, kernel, stride, padding, bias);
  });
}

Layer BatchNorm2d(int64_t channels, float eps, float momentum) {
  positive("BatchNorm2d", "channels", channels);
  return make("BatchNorm2d", [=](::dpt::ParamStore& s, const std::string& n) {
    return std::make_unique<::dpt::BatchNorm>(s, n, channels, false, eps, momentum);
  });
}

Layer BatchNorm1d(int64_t features, float eps, float momentum) {
  positive("BatchNorm1d", "features", features);
  return make("BatchNorm1d", [=](::dpt::ParamStore& s, const std::string& n) {
    return std::make_unique<::dpt::BatchNorm>(s, n, features, false, eps, momentum);
  });
}

Layer ReLU() {
  return make("ReLU", [](::dpt::ParamStore&, const std::string& n) { return std::make_unique<::dpt::Relu>(n); });
}
Layer GELU() {
  return make("GELU", [](::dpt::ParamStore&, const std::string& n) { return std::make_unique<::dpt::Gelu>(n); });
}
Layer Flatten() {
  return make("Flatten", [](::dpt::ParamStore&, const std::string& n) { return std::make_unique<::dpt::Flatten>(n); });
}
Layer MaxPool2d(int64_t kernel, int64_t stride, int64_t padding) {
  positive("MaxPool2d", "kernel", kernel);
  return make("MaxPool2d", [=](::dpt::ParamStore&, const std::string& n) {
    return std::make_unique<::dpt::MaxPool2d>(n, kernel, stride, padding);
  });
}
Layer AdaptiveAvgPool2d(int64_t out_h, int64_t out_w) {
  positive("AdaptiveAvgPool2d", "output height", out_h);
  positive("AdaptiveAvgPool2d", "output width", out_w);
  return make("AdaptiveAvgPool2d", [=](::dpt::ParamStore&, const std::string& n) {
    return std::make_unique<::dpt::AdaptiveAvgPool2d>(n, out_h, out_w);
  });
}
Layer Dropout(float p) {
  if (!(p >= 0.0f && p < 1.0f)) throw std::invalid_argument("dpt::nn::Dropout: p " + std::to_string(p) + " (0 <= p < 1)");
  return make("Dropout", [=](::dpt::ParamStore&, const std::string& n) { return std::make_unique<::dpt::Dropout>(n, p); });
}

Layer Residual(const Sequential& body, const Sequential& shortcut) {
  if (body.size() == 0) throw std::invalid_argument("dpt::nn::Residual: an empty body");
  return make("Residual", [body, shortcut](::dpt::ParamStore& s, const std::string& n) {
    auto b = build_block(body, s, ::dpt::join_name(n, "body"));
    std::unique_ptr<::dpt::SequentialBlock> sc;
    if (shortcut.size() > 0) sc = build_block(shortcut, s, ::dpt::join_name(n, "shortcut"));
    return std::unique_ptr<::dpt::Layer>(std::make_unique<::dpt::ResidualBlock>(n, std::move(b), std::move(sc)));
  });
}
Layer Residual(const Sequential& body) { return Residual(body, Sequential{}); }

Layer Inputs(const std::vector<Input>& inputs) {
  if (inputs.empty()) throw std::invalid_argument("dpt::nn::Inputs: no inputs");
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Input& in = inputs[i];
    if (in.name.empty() || in.name.find('.') != std::string::npos)
      throw std::invalid_argument("dpt::nn::Inputs: input name '" + in.name + "' (non-empty, without dots)");
    for (size_t j = 0; j < i; ++j)
      if (inputs[j].name == in.name) throw std::invalid_argument("dpt::nn::Inputs: a second input named '" + in.name + "'");
    if (in.shape.empty()) throw std::invalid_argument("dpt::nn::Inputs: input '" + in.name + "' has no shape");
    for (int64_t d : in.shape) positive("Inputs", ("input '" + in.name + "' dimension").c_str(), d);
    if (in.layers.size() == 0) throw std::invalid_argument("dpt::nn::Inputs: input '" + in.name + "' has no layers");
  }
  return make("Inputs", [inputs](::dpt::ParamStore& s, const std::string& n) {
    std::vector<::dpt::InputsBlock::Branch> branches;
    for (const Input& in : inputs) branches.push_back({in.shape, build_block(in.layers, s, ::dpt::join_name(n, in.name))});
    return std::unique_ptr<::dpt::Layer>(std::make_unique<::dpt::InputsBlock>(n, std::move(branches)));
  });
}

Layer Custom(std::shared_ptr<CustomLayer> layer) {
  if (!layer) throw std::invalid_argument("dpt::nn::Custom: a null layer");
  return make("Custom", [layer](::dpt::ParamStore& s, const std::string& n) {
    return std::make_unique<::dpt::CustomLayerAdapter>(s, n, layer);
  });
}

Sequential::Sequential(std::initializer_list<std::pair<std::string, Layer>> layers) {
  for (const auto& [name, layer] : layers) add(name, layer);
}

Sequential& Sequential::add(const std::string& name, const Layer& layer) {
  if (name.empty() || name.find('.') != std::string::npos)
    throw std::invalid_argument("dpt::nn::Sequential::add: layer name '" + name + "' (non-empty, without dots)");
  for (const auto& [have, _] : layers_)
    if (have == name) throw std::invalid_argument("dpt::nn::Sequential::add: a second layer named '" + name + "'");
  layers_.emplace_back(name, layer);
  return *this;
}

}  // namespace dpt::nn
