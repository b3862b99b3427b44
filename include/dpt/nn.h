// dpt::nn: models as a user writes them. A model is a tree of named layers; its
// parameters get dotted names ("block1.body.conv.weight") as in PyTorch's state_dict.
//
//   dpt::nn::Sequential net;
//   net.add("net1", dpt::nn::Linear(10, 10));
//   net.add("relu", dpt::nn::ReLU());
//   net.add("net2", dpt::nn::Linear(10, 5));
//   dpt::nn::Model model(net, {.seed = 0});
//   const dpt::nn::Tensor& y = model.forward(x);       // x: [batch, 10]
//   dpt::nn::Loss loss = dpt::nn::mse_loss(y, target);  // free-standing
//   model.backward(loss);                              // gradients accumulate (+=)
//
// Layers (each a description; the model builds its own copy):
//   Linear(in, out, bias)         y = x W^T + b over the last dimension, W [out, in]
//   Conv2d(in, out, k, s, p, bias) on [N, C, H, W]
//   BatchNorm2d(c) / BatchNorm1d(c)  running statistics are buffers (saved, broadcast)
//   ReLU(), GELU(), Flatten(), MaxPool2d(k, s, p), AdaptiveAvgPool2d(h, w), Dropout(p)
//   Residual(body, shortcut)      y = body(x) + shortcut(x) (identity without shortcut)
//   Inputs({{name, shape, layers}, ...})  several inputs, each through its own layers
//   Custom(layer)                 your own forward and backward (CustomLayer below)
// Parameters start as PyTorch's defaults do (Linear/Conv2d: U(-1/sqrt(fan_in), +1/..),
// BatchNorm: weight 1, bias 0), drawn from the model's seed: the same seed gives the same
// model on every rank and every run.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "dpt/parameters.h"
#include "dpt/tensor.h"

namespace dpt::nn {

class Sequential;
class CustomLayer;

// A layer description. Copies share the description; each model builds its own layer.
class Layer {
 public:
  struct Spec;  // the library's side
  explicit Layer(std::shared_ptr<const Spec> spec) : spec_(std::move(spec)) {}
  Layer(const Sequential& block);  // a nested block is a layer (implicit, as in PyTorch)
  const Spec& spec() const { return *spec_; }

 private:
  std::shared_ptr<const Spec> spec_;
};

Layer Linear(int64_t in_features, int64_t out_features, bool bias = true);
Layer Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel, int64_t stride = 1, int64_t padding = 0,
             bool bias = true);
Layer BatchNorm2d(int64_t channels, float eps = 1e-5f, float momentum = 0.1f);
Layer BatchNorm1d(int64_t features, float eps = 1e-5f, float momentum = 0.1f);
Layer ReLU();
Layer GELU();
Layer Flatten();
Layer MaxPool2d(int64_t kernel, int64_t stride = 0, int64_t padding = 0);
Layer AdaptiveAvgPool2d(int64_t out_h, int64_t out_w);
Layer Dropout(float p);
// y = body(x) + shortcut(x); an empty shortcut is the identity. CPU only.
Layer Residual(const Sequential& body, const Sequential& shortcut);
Layer Residual(const Sequential& body);
// `layer` is used at this one place of the model (share no instance between places).
Layer Custom(std::shared_ptr<CustomLayer> layer);

// Named layers run in the order added. Names must be unique within the block, non-empty,
// without dots (std::invalid_argument naming the block and the name).
class Sequential {
 public:
  Sequential() = default;
  Sequential(std::initializer_list<std::pair<std::string, Layer>> layers);
  Sequential& add(const std::string& name, const Layer& layer);
  size_t size() const { return layers_.size(); }
  const std::vector<std::pair<std::string, Layer>>& layers() const { return layers_; }

 private:
  std::vector<std::pair<std::string, Layer>> layers_;
};

// One input of a model with several (Inputs): its name, the shape of one sample, and the
// layers it runs through before the inputs meet.
struct Input {
  std::string name;
  std::vector<int64_t> shape;
  Sequential layers;
};
// Several inputs: input i ([batch, shape_i...]) runs through its own layers; their outputs,
// flattened per sample, are concatenated ([batch, total]) for the layers that follow (a
// two-tower model: an image and a feature vector). Feed it forward({x0, x1, ...}), or one
// tensor holding each sample's inputs back to back (Tensor::concat_samples). CPU only.
Layer Inputs(const std::vector<Input>& inputs);

// A layer with your own arithmetic: declare the parameters, compute forward, and in
// backward add (+=) each parameter's gradient and return the input's gradient. Check the
// backward with dpt::nn::gradcheck (dpt/gradcheck.h) before training with it.
struct ParameterSpec {
  std::string name;            // without dots; the model prefixes the layer's name
  std::vector<int64_t> shape;
};
class CustomLayer {
 public:
  virtual ~CustomLayer() = default;
  virtual std::vector<ParameterSpec> parameters() const { return {}; }
  // Initial values (called once when the model is built; `seed` is the model's, mixed
  // with the layer's name). Default: every parameter 0.
  virtual void reset_parameters(const std::vector<std::span<float>>& /*params*/, uint64_t /*seed*/) {}
  virtual Tensor forward(const Tensor& x, const std::vector<std::span<const float>>& params) = 0;
  // x and y: this forward's input and output; dy: the gradient of the loss w.r.t. y.
  // Adds into grads (one span per parameter, in parameters()' order); returns dL/dx.
  virtual Tensor backward(const Tensor& x, const Tensor& y, const Tensor& dy,
                          const std::vector<std::span<const float>>& params,
                          const std::vector<std::span<float>>& grads) = 0;
};

// A loss value and its gradient w.r.t. the output it was computed from: what backward
// starts from.
class Loss {
 public:
  Loss(float value, Tensor grad) : value_(value), grad_(std::move(grad)) {}
  float item() const { return value_; }
  const Tensor& grad() const { return grad_; }
  // The loss divided by d (value and gradient): PyTorch's `loss / accumulation_steps`.
  Loss operator/(float d) const;

 private:
  float value_;
  Tensor grad_;
};
// Mean squared error over every element (PyTorch's MSELoss, reduction "mean").
Loss mse_loss(const Tensor& output, const Tensor& target);
// Softmax cross-entropy of logits [rows, classes] against one label per row (PyTorch's
// CrossEntropyLoss, reduction "mean"; label -100 is ignored).
Loss cross_entropy(const Tensor& logits, std::span<const int32_t> labels);

struct ModelOptions {
  uint64_t seed = 0;           // of every initial parameter
  std::string name = "model";  // in error messages and checkpoints
  // The loss a dpt::Trainer computes for this model: "cross_entropy" (labels) or "mse"
  // (float targets). The training loops you write call a loss function themselves.
  std::string loss = "cross_entropy";
};

class Model {
 public:
  explicit Model(const Sequential& net, const ModelOptions& options = {});
  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;
  ~Model();

  // Training mode (default): BatchNorm uses batch statistics, Dropout drops, and a forward
  // must be followed by backward. Evaluation mode: neither; no backward.
  void train(bool on = true);
  void eval() { train(false); }
  bool training() const;

  // x: [batch, sample...]; the first forward fixes the sample shape. The result stays
  // valid until the next forward.
  const Tensor& forward(const Tensor& x);
  // A model with several inputs (Inputs as its first layer): each [batch, shape_i...].
  const Tensor& forward(const std::vector<Tensor>& inputs) { return forward(Tensor::concat_samples(inputs)); }
  // Accumulates (+=) every parameter's gradient from `loss` (of the last forward's output).
  void backward(const Loss& loss);
  void zero_grad();

  size_t num_parameters() const;  // elements
  std::vector<std::string> parameter_names() const;
  std::vector<int64_t> parameter_shape(const std::string& name) const;
  // One parameter's values / gradient (std::invalid_argument for an unknown name, listing a few).
  std::span<float> parameter(const std::string& name);
  std::span<const float> gradient(const std::string& name) const;
  // Every parameter back to back, in parameter_names()' order.
  std::span<float> flat_parameters();
  std::span<const float> flat_gradients() const;

  // Parameters and buffers (BatchNorm's running statistics) as a safetensors file, one
  // tensor per name (PyTorch's state_dict names). load() is strict: the file must hold
  // exactly this model's tensors with its shapes; the model is untouched otherwise.
  void save(const std::string& path) const;
  void load(const std::string& path);

  // For an optimizer stepping this model in one process.
  ParameterSet parameters();

  struct Impl;
  Impl& impl() { return *impl_; }
  const Impl& impl() const { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace dpt::nn
