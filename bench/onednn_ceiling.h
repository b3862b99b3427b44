// What oneDNN's matmul primitive does on one product when nothing of ours is in the way:
// operands already in the primitive's data type (f32, or bf16 converted beforehand), B
// either in its plain row-major layout or pre-packed once into the layout the primitive
// asks for (as a framework that keeps its weights packed would). gemm_engines reports
// it beside our engines as the library's ceiling on the training step's products: the
// best this build's oneDNN reaches on them, whatever we did around the call.
//
// Terms:
//   f32 / bf16   the operands' data type; C is f32 either way (bf16: fp32 accumulation).
//   packed       B given as dnnl_format_tag_any and reordered once, outside the timing.
//   threads      oneDNN's OpenMP team: `threads`, or 1 for products of at most 64^3
//                multiply-adds (the rule models/kernels/cpu/gemm_engine.cpp applies in the step).
#pragma once

#include <string>

namespace dpt::bench {

struct CeilingShape {
  bool trans_a = false, trans_b = false;
  int m = 0, n = 0, k = 0;
  int lda = 0, ldb = 0, ldc = 0;
  bool accumulate = false;  // C += op(A) op(B) (a sum post-op), else C = op(A) op(B)
};

struct CeilingResult {
  double seconds = 0;  // best seconds per call; 0 where the primitive could not be made
  std::string impl;    // oneDNN's implementation ("brg:avx512_core_amx_bf16", ...) or why none
};

// True in builds with oneDNN.
bool onednn_ceiling_available();

// Best seconds per call over rounds of ~10 ms for at least `seconds`.
CeilingResult onednn_matmul_ceiling(const CeilingShape& s, bool bf16, bool packed, int threads, double seconds);

}  // namespace dpt::bench
