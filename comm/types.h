#pragma once
// Element types, reduce operations and the non-owning buffer view that every
// Communicator call takes.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "device/device.h"  // Device, DeviceKind

namespace dpt {

enum class DType : uint8_t { f32, f64, f16, bf16, i8, u8, i32, i64 };
enum class ReduceOp : uint8_t { sum, prod, min, max, avg };

inline constexpr DType kAllDTypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16,
                                       DType::i8,  DType::u8,  DType::i32, DType::i64};
inline constexpr ReduceOp kAllReduceOps[] = {ReduceOp::sum, ReduceOp::prod, ReduceOp::min,
                                             ReduceOp::max, ReduceOp::avg};

size_t dtype_size(DType t);
const char* dtype_name(DType t);       // "f32", "bf16", ...
const char* reduce_op_name(ReduceOp op);  // "sum", ...
bool is_floating(DType t);
// Accepts our names (f32, bf16) and the nccl-tests / PyTorch spellings (float, bfloat16,
// half, int8, uint8, int32, int64, double); throws std::invalid_argument listing them.
DType parse_dtype(std::string_view s);
ReduceOp parse_reduce_op(std::string_view s);

// A non-owning view of `count` elements of `dtype` at `data` on `device`.
struct Buffer {
  void* data = nullptr;
  size_t count = 0;
  DType dtype = DType::f32;
  Device device{};

  size_t bytes() const { return count * dtype_size(dtype); }
  // Sub-view of elements [offset, offset + n).
  Buffer slice(size_t offset, size_t n) const {
    return Buffer{static_cast<char*>(data) + offset * dtype_size(dtype), n, dtype, device};
  }
};

template <typename T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<double>() { return DType::f64; }
template <> constexpr DType dtype_of<int8_t>() { return DType::i8; }
template <> constexpr DType dtype_of<uint8_t>() { return DType::u8; }
template <> constexpr DType dtype_of<int32_t>() { return DType::i32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::i64; }

template <typename T> Buffer make_buffer(T* p, size_t n) {
  return Buffer{const_cast<std::remove_const_t<T>*>(p), n, dtype_of<std::remove_const_t<T>>(), {}};
}

}  // namespace dpt
