#include "models/nn/module.h"

#include "device/runtime.h"
#include "models/kernels/cpu/parallel_for.h"

#include <algorithm>
#include <stdexcept>

namespace dpt {

Module::Module(std::string name, const ModelConfig& cfg, std::vector<int64_t> sample_shape,
               bool takes_tokens)
    : name_(std::move(name)), seed_(cfg.seed), sample_shape_(std::move(sample_shape)),
      takes_tokens_(takes_tokens) {
  if (cfg.resident_world > 0) store_.set_resident_shard(cfg.resident_rank, cfg.resident_world);
}

void Module::finalize(std::unique_ptr<Loss> loss) {
  loss_ = std::move(loss);
  store_.finalize();
  use_counts_.assign(store_.infos().size(), 0);
  layer_infos_.clear();
  need_input_grad_.clear();
  bool params_before = false;
  for (auto& layer : layers_) {
    // A layer's input gradient is only worth computing if some parameter lies below it
    // (MLP: Flatten then fc1 -> fc1 skips its dx product).
    need_input_grad_.push_back(params_before);
    params_before = params_before || !layer->used_params().empty();
    layer->init_params(store_, seed_);
    // Sharded build: each parameter is sealed right after the first layer that uses it
    // wrote it, so at most one layer's parameters are whole at a time.
    for (size_t p : layer->used_params())
      if (use_counts_.at(p) == 0) store_.seal(p);
    LayerInfo info;
    info.name = layer->name();
    info.params = layer->used_params();
    std::vector<std::pair<size_t, size_t>> spans;
    for (size_t p : info.params) {
      ++use_counts_.at(p);
      const auto& pi = store_.infos()[p];
      spans.emplace_back(pi.offset, pi.offset + pi.numel);
    }
    std::sort(spans.begin(), spans.end());
    for (const auto& s : spans) {
      if (!info.ranges.empty() && info.ranges.back().second == s.first)
        info.ranges.back().second = s.second;
      else
        info.ranges.push_back(s);
    }
    layer_infos_.push_back(std::move(info));
  }
  for (size_t i = 0; i < use_counts_.size(); ++i)
    if (use_counts_[i] == 0)
      throw std::logic_error(name_ + ": parameter " + store_.infos()[i].name + " is used by no layer");
}

void Module::to_cuda(int device_index) {
  for (const auto& layer : layers_)
    if (!layer->supports_cuda())
      throw std::invalid_argument(name_ + ": layer " + layer->name() + " has no CUDA kernels (models on CUDA: " +
                                  "every built-in model: toy, mlp, cnn, gpt, gpt2, resnet18)");
  // The emulated device is host memory: the kernels would be handed host pointers.
  if (device::emulated())
    throw device::DeviceError(name_ + ": " + device::kEmulateDeviceVar +
                              "=1 emulates a device for comm/'s staging paths only; it runs no model kernels");
  std::string why;
  if (device::kernel_device_count(&why) <= device_index)
    throw device::DeviceError(name_ + ": no CUDA device " + std::to_string(device_index) + " here (" + why + ")");
  device::set_current(Device{DeviceKind::cuda, device_index});
  store_.attach_device();
  cuda_ = true;
}

void Module::adopt_sample_shape(std::vector<int64_t> shape) {
  if (!learns_sample_shape()) throw std::logic_error(name_ + ": adopt_sample_shape on a model whose shape is fixed");
  if (shape.empty()) throw std::invalid_argument(name_ + ": an empty sample shape");
  sample_shape_ = std::move(shape);
}

void Module::set_compute_precision(ComputePrecision p) { ctx_.precision = p; }

void Module::zero_grad() {
  if (!cuda_) return store_.mark_grads_zero();  // written as zeros or stored over when touched
  if (store_.device_resident()) {  // the host copy is refreshed from the device when read
    store_.zero_device_grads();
    store_.device_grads_updated();
    return;
  }
  // On CUDA the host gradients are overwritten by downloads, not by layers: zero them now.
  float* g = store_.flat_grads().data();
  parallel_for(static_cast<int64_t>(store_.total_numel()), 1 << 18,
               [&](int64_t first, int64_t last) { std::fill(g + first, g + last, 0.0f); });
  store_.zero_device_grads();
}

namespace {
const char* const kOutputSpent =
    ": the loss wrote its gradient over the output (read the output before the loss, or call set_keep_output(true) "
    "first)";
}  // namespace

const Tensor& Module::output() const {
  if (!output_) throw std::logic_error(name_ + ": output() before forward()");
  if (output_spent_) throw std::logic_error(name_ + ": output() after loss()" + kOutputSpent);
  return *output_;
}

const Tensor& Module::host_output() {
  if (!output_) throw std::logic_error(name_ + ": host_output() before forward()");
  if (output_spent_) throw std::logic_error(name_ + ": host_output() after loss()" + kOutputSpent);
  if (!output_->on_cuda()) return *output_;
  host_output_ = output_->to_host();
  return host_output_;
}

const Tensor& Module::forward(const ModelInput& in, bool training) {
  if (learn_sample_shape_ && sample_shape_.empty() && !takes_tokens_) {
    if (in.sample_shape.empty()) throw std::invalid_argument(name_ + ": input without a sample shape");
    sample_shape_ = in.sample_shape;
  }
  if (in.sample_shape != sample_shape_ && !takes_tokens_)
    throw std::invalid_argument(name_ + ": input sample shape " + shape_to_string(in.sample_shape) +
                                " but the model expects " + shape_to_string(sample_shape_));
  if (takes_tokens_ ? in.tokens == nullptr : in.x == nullptr)
    throw std::invalid_argument(name_ + (takes_tokens_ ? ": needs token input" : ": needs float input"));
  const GemmPrecisionScope gemm_scope(gemm_precision_);
  ctx_.input = &in;
  ctx_.training = training;
  ctx_.cuda = cuda_;
  ctx_.rng_step = rng_step_;
  if (training) ++rng_step_;
  if (!takes_tokens_) {
    std::vector<int64_t> shape{in.n};
    shape.insert(shape.end(), in.sample_shape.begin(), in.sample_shape.end());
    input_.set_device(cuda_ ? TensorDevice::kCuda : TensorDevice::kCpu);
    input_.resize(std::move(shape));
    if (cuda_) device::copy(input_.data(), in.x, input_.numel() * sizeof(float));
    else std::copy(in.x, in.x + input_.numel(), input_.data());
    if (fp16()) round_produced_to_f16(input_);
  } else {
    input_.resize({0});
  }
  const Tensor* cur = &input_;
  // Device-resident parameters go up only after a host view may have changed them.
  const bool upload_per_layer = cuda_ && !store_.device_resident();
  if (cuda_ && !upload_per_layer) store_.sync_device_params();
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (hooks_.on_layer_forward) hooks_.on_layer_forward(i);
    if (upload_per_layer)
      for (const auto& [begin, end] : layer_infos_[i].ranges) store_.upload_params(begin, end);
    cur = &layers_[i]->forward(*cur, ctx_);
    if (fp16()) round_produced_to_f16(*cur);
    if (hooks_.on_layer_forward_done) hooks_.on_layer_forward_done(i);
  }
  ctx_.input = nullptr;  // the caller's buffers are not ours to keep
  backward_due_ = training;
  output_ = cur;
  output_spent_ = false;
  have_loss_grad_ = false;
  return *cur;
}

Tensor* Module::output_for_loss(const char* what) const {
  if (!output_) throw std::logic_error(name_ + ": " + what + " before forward()");
  if (output_spent_) throw std::logic_error(name_ + ": " + what + " twice after one forward" + kOutputSpent);
  // The last layer hands out a tensor it owns and overwrites at its next forward; when its
  // backward does not read it, the loss may put the gradient there.
  const bool over = !keep_output_ && !layers_.empty() && !layers_.back()->backward_reads_output();
  return over ? const_cast<Tensor*>(output_) : nullptr;
}

// The output counts as spent only once the loss has run: a refused label leaves it as it was.
float Module::loss(const ModelTarget& target, float grad_scale) {
  Tensor* over = output_for_loss("loss()");
  const float value = over ? loss_->forward_over(*over, target, grad_scale) : loss_->forward(*output_, target, grad_scale);
  output_spent_ = over != nullptr;
  have_loss_grad_ = true;
  return value;
}

LossSum Module::loss_sum(const ModelTarget& target, float grad_scale) {
  Tensor* over = output_for_loss("loss_sum()");
  const LossSum value =
      over ? loss_->forward_sum_over(*over, target, grad_scale) : loss_->forward_sum(*output_, target, grad_scale);
  output_spent_ = over != nullptr;
  have_loss_grad_ = true;
  return value;
}

void Module::backward() {
  if (!have_loss_grad_) throw std::logic_error(name_ + ": backward() without forward() and loss()");
  have_loss_grad_ = false;
  backward_due_ = false;
  run_backward(output_spent_ ? output_ : &loss_->grad());
}

void Module::backward_from(const Tensor& dout) {
  if (!backward_due_)
    throw std::logic_error(name_ + ": backward without a training forward since the last backward");
  if (output_spent_ || have_loss_grad_) throw std::logic_error(name_ + ": backward_from() after loss()");
  if (dout.shape() != output_->shape())
    throw std::invalid_argument(name_ + ": the output gradient has shape " + shape_to_string(dout.shape()) +
                                ", the output " + shape_to_string(output_->shape()));
  if (dout.on_cuda() != output_->on_cuda())
    throw std::invalid_argument(name_ + ": the output gradient is not where the output is");
  backward_due_ = false;
  run_backward(&dout);
}

void Module::run_backward(const Tensor* g) {
  const GemmPrecisionScope gemm_scope(gemm_precision_);
  const ParamStore::BackwardScope in_backward(store_);
  store_.device_grads_updated();  // device-resident: host gradients stale from here on
  sink_.begin(use_counts_, [this](size_t p) {
    store_.settle_grad(p);  // final: a layer that announced it without writing it leaves zeros
    const ParamInfo& info = store_.infos()[p];
    if (fp16() && cuda_) gpu::round_to_f16(store_.device_grad(p), info.numel);  // before it comes down
    if (cuda_ && grad_download_) store_.download_grads(info.offset, info.offset + info.numel);
    if (fp16() && !cuda_) round_to_f16(store_.grad_span(p));
    if (hooks_.on_grad_ready) hooks_.on_grad_ready(info);
  });
  for (size_t i = layers_.size(); i-- > 0;) {
    if (hooks_.on_layer_backward) hooks_.on_layer_backward(i);
    if (fp16()) round_produced_to_f16(*g);
    g = &layers_[i]->backward(*g, sink_, need_input_grad_[i]);
    if (hooks_.on_layer_backward_done) hooks_.on_layer_backward_done(i);
  }
  if (!sink_.all_final())
    throw std::logic_error(name_ + ": a layer did not announce all of its gradients");
}

float Module::train_step(const ModelInput& in, const ModelTarget& target, float grad_scale) {
  forward(in, true);
  float l = loss(target, grad_scale);
  backward();
  return l;
}

}  // namespace dpt
