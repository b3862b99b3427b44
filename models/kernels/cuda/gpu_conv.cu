// Convolutions on the GPU through cuDNN 9 (gpu_ops.h conv2d_*): NCHW fp32 tensors, OIHW
// weights, square kernels, symmetric padding, cross-correlation (what nn.Conv2d computes).
//
// Terms:
//   plan       descriptors and the chosen algorithms of forward, backward-data and
//              backward-filter for one shape, made on its first use and kept per thread
//              and device (a model has a dozen shapes; they repeat every step).
//   algorithm  cuDNN's heuristic list (the _v7 queries), first entry that succeeded, is
//              deterministic (the same bits every step; backward-filter's atomics-based
//              algorithms are not) and fits the workspace cap.
//   math       fp32 (ConvType::f32): CUDNN_FMA_MATH, fp32 arithmetic on the CUDA cores, no
//              TF32, so a model on the GPU matches the CPU to float32 rounding as the
//              cuBLAS products do. bf16 / f16: 16-bit tensors with fp32 compute
//              (cuDNN's pseudo-half configuration) and CUDNN_TENSOR_OP_MATH: tensor cores.
//   copies     16-bit: each operand rounded into a dense scratch copy (half_types.cuh),
//              the result computed in 16 bits and widened into the fp32 output (added
//              into dw, which cuDNN's beta would otherwise accumulate in 16 bits).
//   workspace  one grow-only device buffer per thread and device, at most kMaxWorkspace.
// cuDNN is opened with dlopen on first use, like cuBLAS (gpu_ops.cu): it is optional at
// build and at run time; without it the first convolution on a GPU raises DeviceError
// naming the library and the models that need it.
#include <cudnn.h>

#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "models/kernels/cuda/cuda_check.h"
#include "models/kernels/cuda/device_scratch.h"
#include "models/kernels/cuda/gpu_ops.h"
#include "models/kernels/cuda/half_types.cuh"
#include "models/kernels/cuda/runtime_library.h"

namespace dpt::gpu {

namespace {

constexpr size_t kMaxWorkspace = size_t(256) << 20;

struct Dnn {
  decltype(&cudnnCreate) create = nullptr;
  decltype(&cudnnGetErrorString) error_string = nullptr;
  decltype(&cudnnCreateTensorDescriptor) tensor_create = nullptr;
  decltype(&cudnnSetTensor4dDescriptor) tensor_set = nullptr;
  decltype(&cudnnCreateFilterDescriptor) filter_create = nullptr;
  decltype(&cudnnSetFilter4dDescriptor) filter_set = nullptr;
  decltype(&cudnnCreateConvolutionDescriptor) conv_create = nullptr;
  decltype(&cudnnSetConvolution2dDescriptor) conv_set = nullptr;
  decltype(&cudnnSetConvolutionMathType) conv_math = nullptr;
  decltype(&cudnnGetConvolutionForwardAlgorithm_v7) fwd_algos = nullptr;
  decltype(&cudnnGetConvolutionBackwardDataAlgorithm_v7) bwd_data_algos = nullptr;
  decltype(&cudnnGetConvolutionBackwardFilterAlgorithm_v7) bwd_filter_algos = nullptr;
  decltype(&cudnnConvolutionForward) forward = nullptr;
  decltype(&cudnnConvolutionBackwardData) backward_data = nullptr;
  decltype(&cudnnConvolutionBackwardFilter) backward_filter = nullptr;
};

const Dnn& dnn() {
  static const Dnn api = [] {
    const std::string name = "libcudnn.so." DPT_CUDNN_SOVERSION;
    void* lib = open_runtime_library(name, "; convolutions on a GPU (the cnn and resnet18 models) need cuDNN "
                                           DPT_CUDNN_SOVERSION " (LD_LIBRARY_PATH, or --device cpu)");
    auto sym = [&](auto& f, const char* fname) { load_symbol(lib, name, f, fname); };
    Dnn d;
    sym(d.create, "cudnnCreate");
    sym(d.error_string, "cudnnGetErrorString");
    sym(d.tensor_create, "cudnnCreateTensorDescriptor");
    sym(d.tensor_set, "cudnnSetTensor4dDescriptor");
    sym(d.filter_create, "cudnnCreateFilterDescriptor");
    sym(d.filter_set, "cudnnSetFilter4dDescriptor");
    sym(d.conv_create, "cudnnCreateConvolutionDescriptor");
    sym(d.conv_set, "cudnnSetConvolution2dDescriptor");
    sym(d.conv_math, "cudnnSetConvolutionMathType");
    sym(d.fwd_algos, "cudnnGetConvolutionForwardAlgorithm_v7");
    sym(d.bwd_data_algos, "cudnnGetConvolutionBackwardDataAlgorithm_v7");
    sym(d.bwd_filter_algos, "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
    sym(d.forward, "cudnnConvolutionForward");
    sym(d.backward_data, "cudnnConvolutionBackwardData");
    sym(d.backward_filter, "cudnnConvolutionBackwardFilter");
    return d;
  }();
  return api;
}

void check_dnn(cudnnStatus_t s, const char* what) {
  if (s != CUDNN_STATUS_SUCCESS) throw device::DeviceError(std::string(what) + ": " + dnn().error_string(s));
}

using PlanKey = std::tuple<int, int, int, int, int, int, int, int, int>;  // n c h w oc k stride pad type

struct Plan {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnConvolutionFwdAlgo_t fwd{};
  cudnnConvolutionBwdDataAlgo_t bwd_data{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter{};
  size_t fwd_ws = 0, bwd_data_ws = 0, bwd_filter_ws = 0;
};

struct ThreadState {
  cudnnHandle_t handle = nullptr;
  DeviceScratch workspace;
  DeviceScratch in_a, in_b, out;  // 16-bit copies: the two operands and the result
  std::map<PlanKey, Plan> plans;
  void* reserve(size_t bytes) { return workspace.reserve(bytes); }
};

ThreadState& state() {
  thread_local std::map<int, std::unique_ptr<ThreadState>> states;
  int dev = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  auto& s = states[dev];
  if (!s) {
    s = std::make_unique<ThreadState>();
    check_dnn(dnn().create(&s->handle), "cudnnCreate");  // on the default stream, as the kernels
  }
  return *s;
}

// The first usable entry of a _v7 list: succeeded, deterministic, within the cap.
template <typename Perf>
const Perf& pick(const Perf* perf, int count, const char* pass, const ConvShape& s) {
  for (int i = 0; i < count; ++i)
    if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].determinism == CUDNN_DETERMINISTIC &&
        perf[i].memory <= kMaxWorkspace)
      return perf[i];
  const char* type = s.type == ConvType::bf16 ? "bf16 " : s.type == ConvType::f16 ? "fp16 " : "fp32 ";
  throw device::DeviceError(std::string("cuDNN offers no deterministic ") + type + pass + " algorithm for input [" +
                            std::to_string(s.n) + ", " + std::to_string(s.c) + ", " + std::to_string(s.h) + ", " +
                            std::to_string(s.w) + "], " + std::to_string(s.oc) + " filters " + std::to_string(s.k) +
                            "x" + std::to_string(s.k));
}

Plan& plan_for(ThreadState& st, const ConvShape& s) {
  const PlanKey key{s.n, s.c, s.h, s.w, s.oc, s.k, s.stride, s.pad, int(s.type)};
  auto it = st.plans.find(key);
  if (it != st.plans.end()) return it->second;
  const Dnn& d = dnn();
  Plan p;
  check_dnn(d.tensor_create(&p.x), "cudnnCreateTensorDescriptor");
  check_dnn(d.tensor_create(&p.y), "cudnnCreateTensorDescriptor");
  check_dnn(d.filter_create(&p.w), "cudnnCreateFilterDescriptor");
  check_dnn(d.conv_create(&p.conv), "cudnnCreateConvolutionDescriptor");
  const cudnnDataType_t dt = s.type == ConvType::bf16 ? CUDNN_DATA_BFLOAT16
                             : s.type == ConvType::f16  ? CUDNN_DATA_HALF
                                                        : CUDNN_DATA_FLOAT;
  check_dnn(d.tensor_set(p.x, CUDNN_TENSOR_NCHW, dt, s.n, s.c, s.h, s.w), "input descriptor");
  check_dnn(d.tensor_set(p.y, CUDNN_TENSOR_NCHW, dt, s.n, s.oc, s.oh, s.ow), "output descriptor");
  check_dnn(d.filter_set(p.w, dt, CUDNN_TENSOR_NCHW, s.oc, s.c, s.k, s.k), "filter descriptor");
  // fp32 compute at every operand type (cuDNN's pseudo-half configuration for 16 bits).
  check_dnn(d.conv_set(p.conv, s.pad, s.pad, s.stride, s.stride, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
            "convolution descriptor");
  check_dnn(d.conv_math(p.conv, s.type == ConvType::f32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH),
            "cudnnSetConvolutionMathType");
  constexpr int kAlgos = 16;
  int count = 0;
  cudnnConvolutionFwdAlgoPerf_t fwd[kAlgos];
  check_dnn(d.fwd_algos(st.handle, p.x, p.w, p.conv, p.y, kAlgos, &count, fwd), "forward algorithms");
  const auto& f = pick(fwd, count, "forward", s);
  p.fwd = f.algo;
  p.fwd_ws = f.memory;
  cudnnConvolutionBwdDataAlgoPerf_t bd[kAlgos];
  check_dnn(d.bwd_data_algos(st.handle, p.w, p.y, p.conv, p.x, kAlgos, &count, bd), "backward-data algorithms");
  const auto& b = pick(bd, count, "backward-data", s);
  p.bwd_data = b.algo;
  p.bwd_data_ws = b.memory;
  cudnnConvolutionBwdFilterAlgoPerf_t bf[kAlgos];
  check_dnn(d.bwd_filter_algos(st.handle, p.x, p.y, p.conv, p.w, kAlgos, &count, bf), "backward-filter algorithms");
  const auto& w = pick(bf, count, "backward-filter", s);
  p.bwd_filter = w.algo;
  p.bwd_filter_ws = w.memory;
  return st.plans.emplace(key, p).first->second;
}

constexpr int kThreads = 256;
unsigned blocks_for(size_t n) { return unsigned((n + kThreads - 1) / kThreads); }

size_t input_count(const ConvShape& s) { return size_t(s.n) * s.c * s.h * s.w; }
size_t output_count(const ConvShape& s) { return size_t(s.n) * s.oc * s.oh * s.ow; }
size_t filter_count(const ConvShape& s) { return size_t(s.oc) * s.c * s.k * s.k; }

// A dense 16-bit copy of n fp32 values in `into`.
template <typename Half>
const Half* rounded(DeviceScratch& into, const float* src, size_t n) {
  auto* dst = static_cast<Half*>(into.reserve(n * sizeof(Half)));
  to_half_k<Half><<<blocks_for(n), kThreads>>>(src, dst, n);
  check_launch("convolution (operand to 16 bits)");
  return dst;
}

template <typename Half>
void widen_into(const void* src, float* dst, size_t n, bool accumulate) {
  from_half_k<Half><<<blocks_for(n), kThreads>>>(static_cast<const Half*>(src), dst, n, accumulate);
  check_launch("convolution (result to fp32)");
}

// The three passes at 16 bits: round the operands, run cuDNN into a 16-bit result, widen it.
template <typename Half>
void forward_16(ThreadState& st, Plan& p, const ConvShape& s, const float* x, const float* w, float* y) {
  const Half* x16 = rounded<Half>(st.in_a, x, input_count(s));
  const Half* w16 = rounded<Half>(st.in_b, w, filter_count(s));
  void* y16 = st.out.reserve(output_count(s) * sizeof(Half));
  const float one = 1.0f, zero = 0.0f;
  check_dnn(dnn().forward(st.handle, &one, p.x, x16, p.w, w16, p.conv, p.fwd, st.reserve(p.fwd_ws), p.fwd_ws, &zero,
                          p.y, y16),
            "cudnnConvolutionForward");
  widen_into<Half>(y16, y, output_count(s), false);
}

template <typename Half>
void backward_data_16(ThreadState& st, Plan& p, const ConvShape& s, const float* w, const float* dy, float* dx) {
  const Half* w16 = rounded<Half>(st.in_a, w, filter_count(s));
  const Half* dy16 = rounded<Half>(st.in_b, dy, output_count(s));
  void* dx16 = st.out.reserve(input_count(s) * sizeof(Half));
  const float one = 1.0f, zero = 0.0f;
  check_dnn(dnn().backward_data(st.handle, &one, p.w, w16, p.y, dy16, p.conv, p.bwd_data, st.reserve(p.bwd_data_ws),
                                p.bwd_data_ws, &zero, p.x, dx16),
            "cudnnConvolutionBackwardData");
  widen_into<Half>(dx16, dx, input_count(s), false);
}

template <typename Half>
void backward_filter_16(ThreadState& st, Plan& p, const ConvShape& s, const float* x, const float* dy, float* dw) {
  const Half* x16 = rounded<Half>(st.in_a, x, input_count(s));
  const Half* dy16 = rounded<Half>(st.in_b, dy, output_count(s));
  void* dw16 = st.out.reserve(filter_count(s) * sizeof(Half));
  const float one = 1.0f, zero = 0.0f;
  check_dnn(dnn().backward_filter(st.handle, &one, p.x, x16, p.y, dy16, p.conv, p.bwd_filter,
                                  st.reserve(p.bwd_filter_ws), p.bwd_filter_ws, &zero, p.w, dw16),
            "cudnnConvolutionBackwardFilter");
  widen_into<Half>(dw16, dw, filter_count(s), true);  // adds onto the gradient, as the host path does
}

}  // namespace

void conv2d_forward(const ConvShape& s, const float* x, const float* w, float* y) {
  ThreadState& st = state();
  Plan& p = plan_for(st, s);
  if (s.type == ConvType::bf16) return forward_16<__nv_bfloat16>(st, p, s, x, w, y);
  if (s.type == ConvType::f16) return forward_16<__half>(st, p, s, x, w, y);
  const float one = 1.0f, zero = 0.0f;
  check_dnn(dnn().forward(st.handle, &one, p.x, x, p.w, w, p.conv, p.fwd, st.reserve(p.fwd_ws), p.fwd_ws, &zero, p.y,
                          y),
            "cudnnConvolutionForward");
}

void conv2d_backward_data(const ConvShape& s, const float* w, const float* dy, float* dx) {
  ThreadState& st = state();
  Plan& p = plan_for(st, s);
  if (s.type == ConvType::bf16) return backward_data_16<__nv_bfloat16>(st, p, s, w, dy, dx);
  if (s.type == ConvType::f16) return backward_data_16<__half>(st, p, s, w, dy, dx);
  const float one = 1.0f, zero = 0.0f;
  check_dnn(dnn().backward_data(st.handle, &one, p.w, w, p.y, dy, p.conv, p.bwd_data, st.reserve(p.bwd_data_ws),
                                p.bwd_data_ws, &zero, p.x, dx),
            "cudnnConvolutionBackwardData");
}

void conv2d_backward_filter(const ConvShape& s, const float* x, const float* dy, float* dw) {
  ThreadState& st = state();
  Plan& p = plan_for(st, s);
  if (s.type == ConvType::bf16) return backward_filter_16<__nv_bfloat16>(st, p, s, x, dy, dw);
  if (s.type == ConvType::f16) return backward_filter_16<__half>(st, p, s, x, dy, dw);
  const float one = 1.0f;  // beta 1: adds onto the gradient, as the host path does
  check_dnn(dnn().backward_filter(st.handle, &one, p.x, x, p.y, dy, p.conv, p.bwd_filter,
                                  st.reserve(p.bwd_filter_ws), p.bwd_filter_ws, &one, p.w, dw),
            "cudnnConvolutionBackwardFilter");
}

}  // namespace dpt::gpu
