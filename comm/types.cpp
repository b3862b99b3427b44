#include "comm/types.h"

#include <stdexcept>

namespace dpt {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::f16: return 2;
    case DType::bf16: return 2;
    case DType::i8: return 1;
    case DType::u8: return 1;
    case DType::i32: return 4;
    case DType::i64: return 8;
  }
  throw std::invalid_argument("invalid DType value " + std::to_string(int(t)));
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::i8: return "i8";
    case DType::u8: return "u8";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
  }
  return "invalid";
}

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::prod: return "prod";
    case ReduceOp::min: return "min";
    case ReduceOp::max: return "max";
    case ReduceOp::avg: return "avg";
  }
  return "invalid";
}

bool is_floating(DType t) {
  return t == DType::f32 || t == DType::f64 || t == DType::f16 || t == DType::bf16;
}

DType parse_dtype(std::string_view s) {
  struct Name { std::string_view name; DType type; };
  static constexpr Name kNames[] = {
      {"f32", DType::f32},   {"float", DType::f32},    {"float32", DType::f32},
      {"f64", DType::f64},   {"double", DType::f64},   {"float64", DType::f64},
      {"f16", DType::f16},   {"half", DType::f16},     {"float16", DType::f16},
      {"bf16", DType::bf16}, {"bfloat16", DType::bf16}, {"i8", DType::i8},
      {"int8", DType::i8},   {"u8", DType::u8},        {"uint8", DType::u8},
      {"i32", DType::i32},   {"int32", DType::i32},    {"int", DType::i32},
      {"i64", DType::i64},   {"int64", DType::i64}};
  for (const auto& n : kNames)
    if (n.name == s) return n.type;
  throw std::invalid_argument("unknown dtype '" + std::string(s) +
                              "'; valid: f32|float, f64|double, f16|half, bf16|bfloat16, "
                              "i8|int8, u8|uint8, i32|int32, i64|int64");
}

ReduceOp parse_reduce_op(std::string_view s) {
  for (ReduceOp op : kAllReduceOps)
    if (s == reduce_op_name(op)) return op;
  throw std::invalid_argument("unknown reduce op '" + std::string(s) +
                              "'; valid: sum, prod, min, max, avg");
}

}  // namespace dpt
