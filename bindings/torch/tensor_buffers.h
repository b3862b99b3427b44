#pragma once
// From PyTorch tensors to our Buffers, and the checks on the way. Included by
// process_group_dpt.cpp only (one translation unit with torch headers fewer).
//
// Terms:
//   dense view  - the memory an operation reads or writes: the tensor itself when it is
//                 contiguous, else a contiguous copy. An output's copy is written back
//                 into the tensor when the operation succeeds (OpState::on_success), so
//                 non-contiguous tensors work and are never silently half-written.
//   bool        - travels as uint8 (PyTorch stores 0/1 bytes); reductions keep the
//                 result 0/1: sum and max are "or", product and min are "and".
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <string>

#include "bindings/torch/dpt_work.h"
#include "comm/error.h"
#include "comm/types.h"

namespace dpt::torch_plugin {

inline const char* kSupportedDtypes = "float32, float64, float16, bfloat16, int8, uint8, int32, int64, bool";

[[noreturn]] inline void refuse(const ErrorContext& ctx, const std::string& why) { throw UsageError(ctx, why); }

inline DType dtype_for(const ErrorContext& ctx, const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat: return DType::f32;
    case at::kDouble: return DType::f64;
    case at::kHalf: return DType::f16;
    case at::kBFloat16: return DType::bf16;
    case at::kChar: return DType::i8;
    case at::kByte: case at::kBool: return DType::u8;
    case at::kInt: return DType::i32;
    case at::kLong: return DType::i64;
    default:
      refuse(ctx, std::string("tensor of dtype ") + c10::toString(t.scalar_type()) +
                      " is not supported by the dpt backend (supported: " + kSupportedDtypes + ")");
  }
}

inline void check_tensor(const ErrorContext& ctx, const at::Tensor& t) {
  if (!t.defined()) refuse(ctx, "undefined tensor");
  if (t.layout() != at::kStrided)
    refuse(ctx, "only dense (strided) tensors are supported, not " + c10::str(t.layout()) + " ones");
  if (!t.is_cpu() && !t.is_cuda())
    refuse(ctx, "tensor on device " + t.device().str() + ": the dpt backend takes cpu and cuda tensors");
  dtype_for(ctx, t);
}

inline Buffer buffer_of(const ErrorContext& ctx, const at::Tensor& dense) {
  Buffer b;
  b.data = dense.data_ptr();
  b.count = static_cast<size_t>(dense.numel());
  b.dtype = dtype_for(ctx, dense);
  if (dense.is_cuda()) b.device = Device{DeviceKind::cuda, dense.device().index()};
  return b;
}

inline ReduceOp reduce_op_for(const ErrorContext& ctx, const c10d::ReduceOp& op, const at::Tensor& t) {
  const bool is_bool = t.scalar_type() == at::kBool;
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return is_bool ? ReduceOp::max : ReduceOp::sum;
    case c10d::ReduceOp::PRODUCT: return is_bool ? ReduceOp::min : ReduceOp::prod;
    case c10d::ReduceOp::MIN: return ReduceOp::min;
    case c10d::ReduceOp::MAX: return ReduceOp::max;
    case c10d::ReduceOp::AVG:
      if (is_bool) refuse(ctx, "ReduceOp.AVG of a bool tensor has no meaning");
      return ReduceOp::avg;
    case c10d::ReduceOp::BAND:
      if (is_bool) return ReduceOp::min;
      break;
    case c10d::ReduceOp::BOR:
      if (is_bool) return ReduceOp::max;
      break;
    default: break;
  }
  refuse(ctx, "reduce op " + std::to_string(int(op.op_)) +
                  " (BAND/BOR/BXOR/PREMUL_SUM) is not supported for this dtype; the dpt backend reduces with SUM, "
                  "AVG, PRODUCT, MIN, MAX (and BAND/BOR on bool)");
}

// The dense memory an op reads `t` from; kept alive by the op.
inline at::Tensor input_view(OpState& op, const at::Tensor& t) {
  if (t.is_contiguous()) {
    op.keep_alive.push_back(t);
    return t;
  }
  at::Tensor d = t.contiguous();
  op.keep_alive.push_back(d);
  return d;
}

// The dense memory an op writes `t` through; `keep_values` when the op also reads it
// (in-place reductions, broadcast's root).
inline at::Tensor output_view(OpState& op, const at::Tensor& t, bool keep_values) {
  op.keep_alive.push_back(t);
  if (t.is_contiguous()) return t;
  at::Tensor d = keep_values ? t.contiguous() : at::empty(t.sizes(), t.options().memory_format(at::MemoryFormat::Contiguous));
  op.keep_alive.push_back(d);
  at::Tensor user = t;
  op.on_success.push_back([user, d]() mutable { user.copy_(d); });
  return d;
}

inline void check_single(const ErrorContext& ctx, size_t n, const char* what) {
  if (n != 1)
    refuse(ctx, std::string("takes exactly one ") + what + " per process, got " + std::to_string(n) +
                    " (the *_multigpu forms are not supported by the dpt backend)");
}

inline void check_like(const ErrorContext& ctx, const at::Tensor& t, const at::Tensor& ref, const std::string& which) {
  check_tensor(ctx, t);
  if (t.scalar_type() != ref.scalar_type())
    refuse(ctx, which + " has dtype " + c10::toString(t.scalar_type()) + ", the input " + c10::toString(ref.scalar_type()));
  if (t.numel() != ref.numel())
    refuse(ctx, which + " has " + std::to_string(t.numel()) + " elements, the input " + std::to_string(ref.numel()));
  if (t.device() != ref.device()) refuse(ctx, which + " is on " + t.device().str() + ", the input on " + ref.device().str());
}

}  // namespace dpt::torch_plugin
