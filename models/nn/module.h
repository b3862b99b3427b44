// Module: a model as an ordered list of layers over one ParamStore, plus a loss.
//
// Terms:
//   layer index  position in layer_infos(); forward runs 0..L-1, backward L-1..0.
//   LayerInfo    a layer's name, the parameters it reads, and those parameters as
//                merged [begin, end) element ranges of the flat buffer. ZeRO-3 gathers
//                exactly these ranges in on_layer_forward / on_layer_backward.
//   grad ready   on_grad_ready(info) fires once per parameter per backward, the
//                moment no later layer of that backward will write its gradient. The
//                order is exactly reverse of param_infos() (parameters are registered
//                in order of first use), and the gradient is not touched afterwards
//                in that pass. DDP and ZeRO start communication from it.
//
// Gradients accumulate (+=) over backward calls until zero_grad().
//
// Buffers (flat_buffers(), buffer_infos()): state such as BatchNorm's running
// statistics, updated by forward in training, never by the optimizer; checkpoints hold
// them beside the parameters.
//
// Compute precision kF16 (set_compute_precision): the model's input, every layer's
// output and the gradient flowing into every layer are rounded to fp16 in place, and
// each parameter gradient when it is final (before on_grad_ready), so fp16's overflow
// and underflow happen where they would on a GPU running in half precision. Weights
// are whatever the caller put in flat_params() (fp16-rounded working weights are the
// optimizer side's job); buffers and the loss's own arithmetic stay fp32.
//
// On CUDA (to_cuda): activations, the loss and every layer's arithmetic run on the
// device; the flat host buffers stay the ones that optimizers, DDP, ZeRO and
// checkpoints use (ParamStore's device mirror). forward uploads each layer's parameter
// ranges right after on_layer_forward (so ZeRO-3's per-layer gather lands first), and
// each gradient is downloaded into the host buffer when it is final, just before
// on_grad_ready fires: hooks see the same host buffers as on the CPU.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "models/kernels/cpu/gemm.h"
#include "models/nn/layer.h"
#include "models/nn/loss.h"
#include "models/nn/model_config.h"
#include "models/nn/param_store.h"

namespace dpt {

struct LayerInfo {
  std::string name;
  std::vector<size_t> params;                        // indices into param_infos()
  std::vector<std::pair<size_t, size_t>> ranges;     // merged flat [begin, end)
};

struct ModuleHooks {
  std::function<void(size_t layer)> on_layer_forward;        // just before layer's forward
  std::function<void(size_t layer)> on_layer_forward_done;   // just after it
  std::function<void(size_t layer)> on_layer_backward;       // just before layer's backward
  std::function<void(size_t layer)> on_layer_backward_done;  // just after it
  std::function<void(const ParamInfo&)> on_grad_ready;
};

class Module {
 public:
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  const std::string& name() const { return name_; }
  std::span<float> flat_params() { return store_.flat_params(); }
  std::span<const float> flat_params() const { return store_.flat_params(); }
  std::span<float> flat_grads() { return store_.flat_grads(); }
  std::span<const float> flat_grads() const { return store_.flat_grads(); }
  const std::vector<ParamInfo>& param_infos() const { return store_.infos(); }
  const std::vector<LayerInfo>& layer_infos() const { return layer_infos_; }
  size_t num_params() const { return store_.total_numel(); }
  ParamStore& store() { return store_; }
  std::span<float> flat_buffers() { return store_.flat_buffers(); }
  std::span<const float> flat_buffers() const { return store_.flat_buffers(); }
  const std::vector<BufferInfo>& buffer_infos() const { return store_.buffer_infos(); }

  // SyncBatchNorm: BatchNorm layers normalise over the batches of every replica that
  // `reducer` reaches (null: this process's batch). The reducer must outlive its use.
  void set_batch_stats_reducer(BatchStatsReducer* reducer) { ctx_.batch_stats = reducer; }
  BatchStatsReducer* batch_stats_reducer() const { return ctx_.batch_stats; }
  // kF16 on CUDA rounds with a kernel (gpu::round_to_f16): the same values as on the CPU.
  // The products stay fp32 on rounded values (exact operands; no fp16 tensor cores yet).
  void set_compute_precision(ComputePrecision p);
  ComputePrecision compute_precision() const { return ctx_.precision; }
  // The precision of every matrix product in forward and backward (models/kernels/cpu/gemm.h,
  // GemmPrecisionScope): bf16 runs them with bf16 operands and fp32 accumulation on CUDA
  // (cuBLASLt) and on CPUs where bf16_gemm_native(); other CPUs stay fp32. Parameters, activations, gradients and
  // every other operation stay fp32. The trainer sets bf16 for --precision bf16.
  void set_gemm_precision(GemmPrecision p) { gemm_precision_ = p; }
  GemmPrecision gemm_precision() const { return gemm_precision_; }

  void set_hooks(ModuleHooks hooks) { hooks_ = std::move(hooks); }
  const ModuleHooks& hooks() const { return hooks_; }

  // Moves the model to CUDA device `device_index` for good (activations, kernels, the
  // parameter/gradient mirror). Throws naming the first layer without a CUDA path.
  void to_cuda(int device_index);
  bool on_cuda() const { return cuda_; }
  // On CUDA: whether a final gradient is downloaded before on_grad_ready (default). A
  // consumer that reduces the device gradients itself (DDP's device buckets) turns it
  // off and downloads the reduced values.
  void set_grad_download(bool on) { grad_download_ = on; }

  // Every gradient zero. On the host lazily (models/nn/param_store.h): no pass over the
  // gradients; the next backward stores where it would have added onto zeros.
  void zero_grad();
  // Zeroes only the device gradients (ZeRO-2/3 keep the host buffer zero themselves).
  void zero_device_grad() { store_.zero_device_grads(); }
  // Runs every layer; returns the output (logits or predictions).
  const Tensor& forward(const ModelInput& in, bool training = true);
  // Mean loss of the last forward's output; stores d(grad_scale * loss)/d output. When
  // the last layer's backward does not read its output (all the built-in classifiers and
  // GPT's tied head), the gradient is written over the output itself (loss.h, "over
  // output"; training and evaluation alike, so an evaluation pass does not allocate the
  // buffer either): output() and host_output() then refuse, and so does a second loss()
  // before the next forward. Read the output before the loss, or keep it (below).
  float loss(const ModelTarget& target, float grad_scale = 1.0f);
  // The loss summed over the counted targets, and their count (labels equal to
  // kIgnoreLabel are not targets); stores d(grad_scale * sum)/d output. A trainer that
  // normalises by a global target count passes grad_scale = 1 / that count.
  LossSum loss_sum(const ModelTarget& target, float grad_scale);
  // Accumulates parameter gradients from the last loss() and fires the hooks.
  void backward();
  // The same from a gradient of the last forward's output that the caller computed
  // (a free-standing loss, dpt/nn.h): `dout` has the output's shape, in host memory.
  // Refused without a training forward since the last backward, or after loss().
  void backward_from(const Tensor& dout);
  // forward + loss + backward.
  float train_step(const ModelInput& in, const ModelTarget& target, float grad_scale = 1.0f);
  const Tensor& output() const;
  // A caller that reads the output after the loss (training accuracy, logged logits)
  // keeps it: the loss then writes its gradient into a buffer of its own (default off).
  void set_keep_output(bool keep) { keep_output_ = keep; }
  // The last forward's output in host memory (downloaded on CUDA).
  const Tensor& host_output();

  // Shape of one input sample: [C, H, W], [features] or [T] (token ids).
  const std::vector<int64_t>& sample_shape() const { return sample_shape_; }
  // A model that learns its sample shape (learn_sample_shape below) and has not yet:
  // take `shape` now (a trainer, from its data).
  bool learns_sample_shape() const { return learn_sample_shape_ && sample_shape_.empty(); }
  void adopt_sample_shape(std::vector<int64_t> shape);
  bool takes_tokens() const { return takes_tokens_; }
  const Loss& loss_fn() const { return *loss_; }

  // Dropout's draws (models/nn/layers/dropout.h): rng_step counts training forwards and
  // picks each one's masks, so a checkpoint that stores it resumes the same masks;
  // rng_stream (default 0) gives otherwise identical replicas different masks.
  uint64_t rng_step() const { return rng_step_; }
  void set_rng_step(uint64_t step) { rng_step_ = step; }
  void set_rng_stream(uint64_t stream) { ctx_.rng_stream = stream; }

 protected:
  // Takes the seed and the sharded build (ModelConfig::resident_world) from cfg.
  Module(std::string name, const ModelConfig& cfg, std::vector<int64_t> sample_shape, bool takes_tokens);

  template <class L, class... Args>
  L& add_layer(Args&&... args) {
    auto layer = std::make_unique<L>(std::forward<Args>(args)...);
    L& ref = *layer;
    layers_.push_back(std::move(layer));
    return ref;
  }
  // A layer built elsewhere (the public API's layer descriptions, api/).
  Layer& add_built_layer(std::unique_ptr<Layer> layer) {
    layers_.push_back(std::move(layer));
    return *layers_.back();
  }
  // A model whose sample shape is learned from its first forward (the public API's
  // models: their layers know their sizes, so the shape is not given twice); later
  // forwards must match it.
  void learn_sample_shape() { learn_sample_shape_ = true; }
  // Call once at the end of a model's constructor: allocates and initialises the
  // flat buffers and derives the layer infos and per-parameter use counts.
  void finalize(std::unique_ptr<Loss> loss);
  bool fp16() const { return ctx_.precision == ComputePrecision::kF16; }

  ParamStore store_;

 private:
  std::string name_;
  uint64_t seed_;
  std::vector<int64_t> sample_shape_;
  bool takes_tokens_;
  bool learn_sample_shape_ = false;
  bool backward_due_ = false;  // a training forward since the last backward
  // The backward loop from gradient g of the output.
  void run_backward(const Tensor* g);
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<LayerInfo> layer_infos_;
  std::vector<int> use_counts_;
  std::vector<bool> need_input_grad_;  // false while no earlier layer has parameters
  std::unique_ptr<Loss> loss_;
  // The output the loss is to write its gradient over, or nullptr when the loss keeps
  // its own gradient buffer; refuses a loss before any forward, or after the output was
  // spent.
  Tensor* output_for_loss(const char* what) const;
  ModuleHooks hooks_;
  GradSink sink_;
  ForwardContext ctx_;
  GemmPrecision gemm_precision_ = GemmPrecision::f32;
  Tensor input_;
  const Tensor* output_ = nullptr;
  bool keep_output_ = false;
  bool output_spent_ = false;  // the loss wrote its gradient over output_
  bool have_loss_grad_ = false;
  bool cuda_ = false;
  bool grad_download_ = true;
  uint64_t rng_step_ = 0;
  Tensor host_output_;
};

}  // namespace dpt
