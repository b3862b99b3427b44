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
//   math       CUDNN_FMA_MATH: fp32 arithmetic on the CUDA cores, no TF32, so a model on
//              the GPU matches the CPU to float32 rounding as the cuBLAS products do.
//   workspace  one grow-only device buffer per thread and device, at most kMaxWorkspace.
// cuDNN is opened with dlopen on first use, like cuBLAS (gpu_ops.cu): it is optional at
// build and at run time; without it the first convolution on a GPU raises DeviceError
// naming the library and the models that need it.
#include <cudnn.h>

#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "models/cuda/cuda_check.h"
#include "models/cuda/gpu_ops.h"
#include "models/cuda/runtime_library.h"

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

using PlanKey = std::tuple<int, int, int, int, int, int, int, int>;  // n c h w oc k stride pad

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
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  Device device{};
  std::map<PlanKey, Plan> plans;
  ~ThreadState() {
    if (workspace) device::release(device, workspace);
  }
  void* reserve(size_t bytes) {
    if (bytes > workspace_bytes) {
      if (workspace) device::release(device, workspace);
      workspace = nullptr;
      device = device::current();
      workspace = device::alloc(device, bytes);
      workspace_bytes = bytes;
    }
    return workspace;
  }
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
  throw device::DeviceError(std::string("cuDNN offers no deterministic fp32 ") + pass + " algorithm for input [" +
                            std::to_string(s.n) + ", " + std::to_string(s.c) + ", " + std::to_string(s.h) + ", " +
                            std::to_string(s.w) + "], " + std::to_string(s.oc) + " filters " + std::to_string(s.k) +
                            "x" + std::to_string(s.k));
}

Plan& plan_for(ThreadState& st, const ConvShape& s) {
  const PlanKey key{s.n, s.c, s.h, s.w, s.oc, s.k, s.stride, s.pad};
  auto it = st.plans.find(key);
  if (it != st.plans.end()) return it->second;
  const Dnn& d = dnn();
  Plan p;
  check_dnn(d.tensor_create(&p.x), "cudnnCreateTensorDescriptor");
  check_dnn(d.tensor_create(&p.y), "cudnnCreateTensorDescriptor");
  check_dnn(d.filter_create(&p.w), "cudnnCreateFilterDescriptor");
  check_dnn(d.conv_create(&p.conv), "cudnnCreateConvolutionDescriptor");
  check_dnn(d.tensor_set(p.x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s.n, s.c, s.h, s.w), "input descriptor");
  check_dnn(d.tensor_set(p.y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s.n, s.oc, s.oh, s.ow), "output descriptor");
  check_dnn(d.filter_set(p.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, s.oc, s.c, s.k, s.k), "filter descriptor");
  check_dnn(d.conv_set(p.conv, s.pad, s.pad, s.stride, s.stride, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
            "convolution descriptor");
  check_dnn(d.conv_math(p.conv, CUDNN_FMA_MATH), "cudnnSetConvolutionMathType");
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

}  // namespace

void conv2d_forward(const ConvShape& s, const float* x, const float* w, float* y) {
  ThreadState& st = state();
  Plan& p = plan_for(st, s);
  const float one = 1.0f, zero = 0.0f;
  check_dnn(dnn().forward(st.handle, &one, p.x, x, p.w, w, p.conv, p.fwd, st.reserve(p.fwd_ws), p.fwd_ws, &zero, p.y,
                          y),
            "cudnnConvolutionForward");
}

void conv2d_backward_data(const ConvShape& s, const float* w, const float* dy, float* dx) {
  ThreadState& st = state();
  Plan& p = plan_for(st, s);
  const float one = 1.0f, zero = 0.0f;
  check_dnn(dnn().backward_data(st.handle, &one, p.w, w, p.y, dy, p.conv, p.bwd_data, st.reserve(p.bwd_data_ws),
                                p.bwd_data_ws, &zero, p.x, dx),
            "cudnnConvolutionBackwardData");
}

void conv2d_backward_filter(const ConvShape& s, const float* x, const float* dy, float* dw) {
  ThreadState& st = state();
  Plan& p = plan_for(st, s);
  const float one = 1.0f;  // beta 1: adds onto the gradient, as the host path does
  check_dnn(dnn().backward_filter(st.handle, &one, p.x, x, p.y, dy, p.conv, p.bwd_filter,
                                  st.reserve(p.bwd_filter_ws), p.bwd_filter_ws, &one, p.w, dw),
            "cudnnConvolutionBackwardFilter");
}

}  // namespace dpt::gpu
