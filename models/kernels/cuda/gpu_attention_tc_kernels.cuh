// Fused causal attention on tensor cores (gpu_ops.h attention_forward / attention_backward
// with AttentionMath::bf16 or f16): the scheme of gpu_attention_kernels.cuh (running
// maximum and sum per query row, log-sum-exp kept, two backward kernels without
// atomics) with every product on tensor cores through WMMA 16x16x16 fragments: 16-bit
// operands, fp32 accumulation, as flash attention runs under autocast.
//
// Terms:
//   width    heads up to kHd = 64 columns (GPT-2's width at every size); narrower heads are
//            zero-padded when staged, which adds nothing to any product.
//   warp     4 warps per block, each owning 16 rows of the block's 64 (query rows in
//            forward and dQ, key rows in dK/dV); all its products are 16-row fragments.
//   tile     32 rows of the other operand staged at a time, rounded to 16 bits.
//   rounding Q, K, V and dout are rounded to the 16-bit type when staged; the
//            probabilities P and dS are rounded before they multiply (P V, dS K, dS^T Q,
//            P^T dout); the scores, the softmax statistics, D_i and every accumulator
//            are fp32, and l sums the unrounded probabilities.
//   row math two lanes per row, 16 of the tile's 32 columns each: the per-row maximum and
//            sum are one shuffle between the pair.
// Shared memory stays under the 48 KB a block has without opting in (about 44 KB).
// The includer provides WMMA (<mma.h>, or the emulation of tests/support/cuda_emulation.h)
// and half_types.cuh's round_into and widen for the 16-bit type.
#pragma once

namespace dpt::gpu::attention_tc_kernels {

using namespace nvcuda;

constexpr int kHd = 64;                // columns every staged row holds
constexpr int kWarps = 4;
constexpr int kRows = 16 * kWarps;     // rows a block owns
constexpr int kTile = 32;              // rows of the other operand per stage
constexpr int kThreads = 32 * kWarps;

template <typename Half>
using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, Half, wmma::row_major>;
template <typename Half>
using FragBRow = wmma::fragment<wmma::matrix_b, 16, 16, 16, Half, wmma::row_major>;
template <typename Half>
using FragBCol = wmma::fragment<wmma::matrix_b, 16, 16, 16, Half, wmma::col_major>;
using Acc = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

// dst[rr][c] = 16-bit src row (r0 + rr), column c: zero past the head's width or the
// sequence's end. src points at row 0, column 0 of this (sample, head); rows ld apart.
template <typename Half>
__device__ void stage_rows(Half* dst, const float* src, size_t ld, int r0, int rows, int t, int hd) {
  for (int x = threadIdx.x; x < rows * kHd; x += blockDim.x) {
    const int rr = x / kHd, c = x % kHd, row = r0 + rr;
    round_into(row < t && c < hd ? src[size_t(row) * ld + c] : 0.0f, dst + x);
  }
}

// out = a (16 x kHd, four fragments along k) times the 16 x kTile product with b, whose
// column n block is the kHd x 16 slice at b_tile + n * 16 * kHd read column-major (rows of
// the staged tile as columns): the scores Q K^T (and dout V^T, K Q^T, V dout^T) of one warp.
template <typename Half>
__device__ void rows_times_tile_t(const FragA<Half> (&a)[kHd / 16], const Half* b_tile, float* out) {
#pragma unroll
  for (int n = 0; n < kTile / 16; ++n) {
    Acc acc;
    wmma::fill_fragment(acc, 0.0f);
#pragma unroll
    for (int kk = 0; kk < kHd / 16; ++kk) {
      FragBCol<Half> b;
      wmma::load_matrix_sync(b, b_tile + n * 16 * kHd + kk * 16, kHd);
      wmma::mma_sync(acc, a[kk], b, acc);
    }
    wmma::store_matrix_sync(out + n * 16, acc, kTile, wmma::mem_row_major);
  }
}

// acc[n] += p (16 x kTile, 16-bit, row-major) times the staged tile (kTile x kHd): the
// products P V, dS K, P^T dout and dS^T Q of one warp.
template <typename Half>
__device__ void accumulate_p_tile(Acc (&acc)[kHd / 16], const Half* p, const Half* tile) {
#pragma unroll
  for (int kk = 0; kk < kTile / 16; ++kk) {
    FragA<Half> a;
    wmma::load_matrix_sync(a, p + kk * 16, kTile);
#pragma unroll
    for (int n = 0; n < kHd / 16; ++n) {
      FragBRow<Half> b;
      wmma::load_matrix_sync(b, tile + kk * 16 * kHd + n * 16, kHd);
      wmma::mma_sync(acc[n], a, b, acc[n]);
    }
  }
}

// Four accumulators (16 x kHd) through the warp's scratch (kHd floats per row) into
// rows of global memory: dst_row(r) for the warp's 16 rows, times scale, columns < hd.
template <typename RowPtr>
__device__ void store_rows(Acc (&acc)[kHd / 16], float* scratch, RowPtr dst_row, int hd, float scale) {
#pragma unroll
  for (int n = 0; n < kHd / 16; ++n) wmma::store_matrix_sync(scratch + n * 16, acc[n], kHd, wmma::mem_row_major);
  __syncwarp();
  const int lane = threadIdx.x % 32, r = lane / 2, c0 = (lane % 2) * (kHd / 2);
  float* dst = dst_row(r);
  if (dst)
    for (int c = c0; c < c0 + kHd / 2 && c < hd; ++c) dst[c] = scratch[r * kHd + c] * scale;
  __syncwarp();
}

// Forward: block (query tile, b * H + h), tiles last-first (the most keys start first).
template <typename Half>
__global__ void __launch_bounds__(kThreads) attention_tc_fwd_k(const float* qkv, float* out, float* lse, int t,
                                                               int heads, int hd, float scale) {
  __shared__ __align__(32) Half qs[kRows * kHd];
  __shared__ __align__(32) Half ks[kTile * kHd], vs[kTile * kHd];
  __shared__ __align__(32) float ss[kWarps][16 * kTile];  // the warp's scores
  __shared__ __align__(32) Half ps[kWarps][16 * kTile];   // its probabilities, rounded
  __shared__ __align__(32) float os[kWarps][16 * kHd];    // its output rows, rescaled as the maximum moves
  const int bi = int(blockIdx.y) / heads, head = int(blockIdx.y) % heads, d = heads * hd;
  const int row0 = int(gridDim.x - 1 - blockIdx.x) * kRows;
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  const int r = lane / 2, side = lane % 2;  // this lane's row of the warp's 16, and which 16 columns
  const int i = row0 + warp * 16 + r;
  const float* base = qkv + size_t(bi) * t * 3 * d + size_t(head) * hd;
  stage_rows(qs, base, 3 * size_t(d), row0, kRows, t, hd);
  for (int x = lane; x < 16 * kHd; x += 32) os[warp][x] = 0.0f;
  __syncthreads();
  FragA<Half> qf[kHd / 16];
#pragma unroll
  for (int kk = 0; kk < kHd / 16; ++kk) wmma::load_matrix_sync(qf[kk], qs + warp * 16 * kHd + kk * 16, kHd);
  float m = -INFINITY, l = 0.0f;
  const int last = min(t, row0 + kRows) - 1;
  for (int j0 = 0; j0 <= last; j0 += kTile) {
    __syncthreads();  // the previous tile is consumed
    stage_rows(ks, base + d, 3 * size_t(d), j0, kTile, t, hd);
    stage_rows(vs, base + 2 * size_t(d), 3 * size_t(d), j0, kTile, t, hd);
    __syncthreads();
    if (j0 > row0 + warp * 16 + 15) continue;  // every key of the tile is after this warp's rows
    rows_times_tile_t(qf, ks, ss[warp]);
    __syncwarp();
    float* srow = ss[warp] + r * kTile + side * 16;
    float tile_max = -INFINITY;
    for (int c = 0; c < 16; ++c) {
      const int j = j0 + side * 16 + c;
      const float s = i < t && j <= i ? srow[c] * scale : -INFINITY;
      srow[c] = s;
      tile_max = fmaxf(tile_max, s);
    }
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    const float m_new = fmaxf(m, tile_max);
    const bool seen = m_new != -INFINITY;   // false for a row with no key yet (or none at all)
    const float keep = seen ? expf(m - m_new) : 1.0f;
    float sum = 0.0f;
    Half* prow = ps[warp] + r * kTile + side * 16;
    for (int c = 0; c < 16; ++c) {
      const float p = seen ? expf(srow[c] - m_new) : 0.0f;  // 0 past the diagonal
      sum += p;
      round_into(p, prow + c);
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    l = l * keep + sum;
    m = m_new;
    float* orow = os[warp] + r * kHd + side * (kHd / 2);
    for (int c = 0; c < kHd / 2; ++c) orow[c] *= keep;
    __syncwarp();
    Acc acc[kHd / 16];
#pragma unroll
    for (int n = 0; n < kHd / 16; ++n) wmma::load_matrix_sync(acc[n], os[warp] + n * 16, kHd, wmma::mem_row_major);
    accumulate_p_tile(acc, ps[warp], vs);
#pragma unroll
    for (int n = 0; n < kHd / 16; ++n) wmma::store_matrix_sync(os[warp] + n * 16, acc[n], kHd, wmma::mem_row_major);
    __syncwarp();
  }
  if (i >= t) return;
  const float inv = 1.0f / l;
  float* dst = out + (size_t(bi) * t + i) * d + size_t(head) * hd;
  for (int c = side * (kHd / 2); c < (side + 1) * (kHd / 2) && c < hd; ++c) dst[c] = os[warp][r * kHd + c] * inv;
  if (side == 0) lse[size_t(blockIdx.y) * t + i] = m + logf(l);
}

// dQ: block (query tile, b * H + h) as forward; keys and values staged 32 at a time.
template <typename Half>
__global__ void __launch_bounds__(kThreads)
    attention_tc_dq_k(const float* qkv, const float* dout, const float* lse, const float* delta, float* dqkv, int t,
                      int heads, int hd, float scale) {
  __shared__ __align__(32) Half qs[kRows * kHd], dys[kRows * kHd];
  __shared__ __align__(32) Half ks[kTile * kHd], vs[kTile * kHd];
  __shared__ __align__(32) float scratch[kWarps][2 * 16 * kTile];  // S, then dP; at the end dQ's 16 x kHd
  __shared__ __align__(32) Half dss[kWarps][16 * kTile];
  const int bi = int(blockIdx.y) / heads, head = int(blockIdx.y) % heads, d = heads * hd;
  const int row0 = int(gridDim.x - 1 - blockIdx.x) * kRows;
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  const int r = lane / 2, side = lane % 2;
  const int i = row0 + warp * 16 + r;
  const float* base = qkv + size_t(bi) * t * 3 * d + size_t(head) * hd;
  stage_rows(qs, base, 3 * size_t(d), row0, kRows, t, hd);
  stage_rows(dys, dout + size_t(bi) * t * d + size_t(head) * hd, size_t(d), row0, kRows, t, hd);
  __syncthreads();
  FragA<Half> qf[kHd / 16], dyf[kHd / 16];
#pragma unroll
  for (int kk = 0; kk < kHd / 16; ++kk) {
    wmma::load_matrix_sync(qf[kk], qs + warp * 16 * kHd + kk * 16, kHd);
    wmma::load_matrix_sync(dyf[kk], dys + warp * 16 * kHd + kk * 16, kHd);
  }
  Acc dq[kHd / 16];
#pragma unroll
  for (int n = 0; n < kHd / 16; ++n) wmma::fill_fragment(dq[n], 0.0f);
  const float row_lse = i < t ? lse[size_t(blockIdx.y) * t + i] : 0.0f;
  const float row_delta = i < t ? delta[size_t(blockIdx.y) * t + i] : 0.0f;
  float* s_w = scratch[warp];
  float* dp_w = scratch[warp] + 16 * kTile;
  const int last = min(t, row0 + kRows) - 1;
  for (int j0 = 0; j0 <= last; j0 += kTile) {
    __syncthreads();
    stage_rows(ks, base + d, 3 * size_t(d), j0, kTile, t, hd);
    stage_rows(vs, base + 2 * size_t(d), 3 * size_t(d), j0, kTile, t, hd);
    __syncthreads();
    if (j0 > row0 + warp * 16 + 15) continue;
    rows_times_tile_t(qf, ks, s_w);    // S = Q K^T
    rows_times_tile_t(dyf, vs, dp_w);  // dP = dout V^T
    __syncwarp();
    for (int c = side * 16; c < side * 16 + 16; ++c) {
      const int j = j0 + c;
      const float p = i < t && j <= i ? expf(s_w[r * kTile + c] * scale - row_lse) : 0.0f;
      round_into(p * (dp_w[r * kTile + c] - row_delta), dss[warp] + r * kTile + c);
    }
    __syncwarp();
    accumulate_p_tile(dq, dss[warp], ks);  // dQ += dS K
  }
  store_rows(dq, scratch[warp], [&](int rr) {
    const int row = row0 + warp * 16 + rr;
    return row < t ? dqkv + (size_t(bi) * t + row) * 3 * d + size_t(head) * hd : nullptr;
  }, hd, scale);
}

// dK and dV: block (key tile, b * H + h); the queries from the tile's first key on are
// staged 32 at a time with their dout rows, log-sum-exps and deltas.
template <typename Half>
__global__ void __launch_bounds__(kThreads)
    attention_tc_dkv_k(const float* qkv, const float* dout, const float* lse, const float* delta, float* dqkv, int t,
                       int heads, int hd, float scale) {
  __shared__ __align__(32) Half stage[kRows * kHd];            // K rows, then V rows, on their way to fragments
  __shared__ __align__(32) Half qs[kTile * kHd], dys[kTile * kHd];
  __shared__ __align__(32) float lses[kTile], deltas[kTile];
  __shared__ __align__(32) float scratch[kWarps][2 * 16 * kTile];  // S^T, then dP^T; at the end dK's and dV's rows
  __shared__ __align__(32) Half pts[kWarps][16 * kTile], dsts[kWarps][16 * kTile];
  const int bi = int(blockIdx.y) / heads, head = int(blockIdx.y) % heads, d = heads * hd;
  const int row0 = int(blockIdx.x) * kRows;
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  const int r = lane / 2, side = lane % 2;
  const int j = row0 + warp * 16 + r;  // this lane's key row
  const float* base = qkv + size_t(bi) * t * 3 * d + size_t(head) * hd;
  const float* dbase = dout + size_t(bi) * t * d + size_t(head) * hd;
  FragA<Half> kf[kHd / 16], vf[kHd / 16];
  stage_rows(stage, base + d, 3 * size_t(d), row0, kRows, t, hd);
  __syncthreads();
#pragma unroll
  for (int kk = 0; kk < kHd / 16; ++kk) wmma::load_matrix_sync(kf[kk], stage + warp * 16 * kHd + kk * 16, kHd);
  __syncthreads();
  stage_rows(stage, base + 2 * size_t(d), 3 * size_t(d), row0, kRows, t, hd);
  __syncthreads();
#pragma unroll
  for (int kk = 0; kk < kHd / 16; ++kk) wmma::load_matrix_sync(vf[kk], stage + warp * 16 * kHd + kk * 16, kHd);
  Acc dk[kHd / 16], dv[kHd / 16];
#pragma unroll
  for (int n = 0; n < kHd / 16; ++n) {
    wmma::fill_fragment(dk[n], 0.0f);
    wmma::fill_fragment(dv[n], 0.0f);
  }
  float* st_w = scratch[warp];
  float* dpt_w = scratch[warp] + 16 * kTile;
  for (int i0 = row0; i0 < t; i0 += kTile) {
    __syncthreads();
    stage_rows(qs, base, 3 * size_t(d), i0, kTile, t, hd);
    stage_rows(dys, dbase, size_t(d), i0, kTile, t, hd);
    if (threadIdx.x < kTile) {
      const int q = i0 + int(threadIdx.x);
      lses[threadIdx.x] = q < t ? lse[size_t(blockIdx.y) * t + q] : 0.0f;
      deltas[threadIdx.x] = q < t ? delta[size_t(blockIdx.y) * t + q] : 0.0f;
    }
    __syncthreads();
    if (i0 + kTile - 1 < row0 + warp * 16) continue;  // every query of the tile is before this warp's keys
    rows_times_tile_t(kf, qs, st_w);    // S^T = K Q^T
    rows_times_tile_t(vf, dys, dpt_w);  // dP^T = V dout^T
    __syncwarp();
    for (int c = side * 16; c < side * 16 + 16; ++c) {
      const int q = i0 + c;
      const float p = j < t && q < t && q >= j ? expf(st_w[r * kTile + c] * scale - lses[c]) : 0.0f;
      round_into(p, pts[warp] + r * kTile + c);
      round_into(p * (dpt_w[r * kTile + c] - deltas[c]), dsts[warp] + r * kTile + c);
    }
    __syncwarp();
    accumulate_p_tile(dv, pts[warp], dys);  // dV += P^T dout
    accumulate_p_tile(dk, dsts[warp], qs);  // dK += dS^T Q
  }
  auto row_at = [&](size_t column) {
    return [&, column](int rr) {
      const int row = row0 + warp * 16 + rr;
      return row < t ? dqkv + (size_t(bi) * t + row) * 3 * d + column + size_t(head) * hd : nullptr;
    };
  };
  store_rows(dk, scratch[warp], row_at(size_t(d)), hd, scale);
  store_rows(dv, scratch[warp], row_at(2 * size_t(d)), hd, 1.0f);
}

}  // namespace dpt::gpu::attention_tc_kernels
