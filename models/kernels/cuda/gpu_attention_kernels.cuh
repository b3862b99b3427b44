// Fused causal attention (gpu_ops.h attention_forward / attention_backward): the
// flash-attention scheme in fp32 on the CUDA cores. Forward keeps, per query row, a running
// maximum, a running sum of exponentials and a running output over tiles of keys, and
// stores the row's log-sum-exp; backward recomputes each probability from it. Nothing of
// size T x T exists at any time, and no atomics: dQ and (dK, dV) are two kernels, each
// output row summed by the threads that own it, in a fixed order (the same bits every run).
//
// Terms (the layer's layout, models/nn/layers/attention.h):
//   qkv      [B, T, 3d] rows: Q in columns [0, d), K in [d, 2d), V in [2d, 3d); head h
//            owns hd columns at h * hd of each.
//   out, dout [B, T, d]: head h's output at columns h * hd.
//   lse      [B, H, T]: log sum_j exp(s_ij) of row i's scaled scores s_ij = scale q_i.k_j.
//   delta    [B, H, T]: D_i = dout_i . out_i, which equals sum_j P_ij dP_ij.
//   HD       the head width rounded up to 32, 64 or 128 (a template argument: registers
//            are sized by it); columns from hd to HD are zeros.
//   lanes    G = HD / 32 threads share one row; lane g owns the 32 columns e * G + g, so the
//            G lanes read G adjacent words of a shared-memory row (distinct banks) and a
//            dot product is 32 multiply-adds and log2(G) shuffles.
//   tile     R = 64 rows per block (one per G lanes), C = 32 rows of the other operand
//            staged in shared memory at a time.
// Backward per (b, h), with P_ij = exp(s_ij - lse_i) for j <= i:
//   dV_j = sum_i P_ij dout_i,  dP_ij = dout_i . v_j,  dS_ij = P_ij (dP_ij - D_i),
//   dQ_i = scale sum_j dS_ij k_j,  dK_j = scale sum_i dS_ij q_i.
// Dropout (drop on): out_i = sum_j P_ij f_ij v_j with f_ij the mask's factor of element
// (b H + h, i, j) (0 or 1 / (1 - p), drop_mask.cuh), computed where it is used; the
// row's sum of exponentials is not masked. Backward: dV_j = sum_i P_ij f_ij dout_i,
// dP_ij = f_ij dout_i . v_j, and D_i = dout_i . out_i = sum_j P_ij dP_ij still holds.
//
// This header holds the kernels alone (no CUDA runtime calls), so that besides
// gpu_attention.cu, which launches them, a CPU emulation of the CUDA execution model
// (tests/support/cuda_emulation.h) can run them on a machine without a GPU
// (models_attention_emulated).
#pragma once

#include "models/kernels/cuda/drop_mask.cuh"

namespace dpt::gpu::attention_kernels {

constexpr int kRows = 64;  // R: rows a block owns
constexpr int kTile = 32;  // C: rows of the other operand per shared-memory tile
constexpr int kPer = 32;   // columns each lane owns

// Sum over the G lanes of one row (adjacent lanes; G divides 32).
template <int G>
__device__ __forceinline__ float row_sum(float v) {
#pragma unroll
  for (int o = G / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Where row `row` of one head's Q (which = 0), K (1) or V (2) starts.
__device__ __forceinline__ const float* qkv_row(const float* qkv, int b, int row, int which, int t, int d, int head,
                                                int hd) {
  return qkv + (size_t(b) * t + row) * (3 * size_t(d)) + size_t(which) * d + size_t(head) * hd;
}

// Lane g's columns of a length-hd row (zeros past hd, or for a row past the end).
template <int G>
__device__ __forceinline__ void load_lane(const float* row, bool valid, int hd, int g, float (&v)[kPer]) {
#pragma unroll
  for (int e = 0; e < kPer; ++e) {
    const int c = e * G + g;
    v[e] = valid && c < hd ? row[c] : 0.0f;
  }
}

template <int G>
__device__ __forceinline__ void store_lane(float* row, int hd, int g, const float (&v)[kPer], float scale) {
#pragma unroll
  for (int e = 0; e < kPer; ++e) {
    const int c = e * G + g;
    if (c < hd) row[c] = v[e] * scale;
  }
}

// Stage rows r0 .. r0 + C - 1 of two operands (which_a, which_b of qkv, or of dout when
// from_dout) into shared memory, zeros past the sequence's end or the head's width.
template <int HD>
__device__ void stage(float (*a)[HD], float (*b)[HD], const float* qkv, const float* dout, int bi, int r0, int which_a,
                      int which_b, bool b_from_dout, int t, int d, int head, int hd) {
  for (int x = threadIdx.x; x < kTile * HD; x += blockDim.x) {
    const int rr = x / HD, c = x % HD, row = r0 + rr;
    const bool ok = row < t && c < hd;
    a[rr][c] = ok ? qkv_row(qkv, bi, row, which_a, t, d, head, hd)[c] : 0.0f;
    const float* src = b_from_dout ? dout + (size_t(bi) * t + row) * d + size_t(head) * hd
                                   : qkv_row(qkv, bi, row, which_b, t, d, head, hd);
    b[rr][c] = ok ? src[c] : 0.0f;
  }
}

// A query-tile kernel's view (forward, dQ): block (query tile, b * H + h), tiles taken
// last-first so that the blocks with the most keys start first; G lanes per query row.
struct QueryRow {
  int bi, head, d;  // sample, head, model width
  int row0, g, i;   // the tile's first row, this thread's lane and row
  bool live;        // i < t (the last tile may be partial)
};

template <int G>
__device__ __forceinline__ QueryRow query_row(int t, int heads, int hd) {
  QueryRow r;
  r.bi = int(blockIdx.y) / heads;
  r.head = int(blockIdx.y) % heads;
  r.d = heads * hd;
  r.row0 = int(gridDim.x - 1 - blockIdx.x) * kRows;
  r.g = int(threadIdx.x) % G;
  r.i = r.row0 + int(threadIdx.x) / G;
  r.live = r.i < t;
  return r;
}

// Element (blockIdx.y = b H + h, i, j) of the [B, H, T, T] probabilities: its dropout index.
__device__ __forceinline__ uint64_t prob_index(int t, int i, int j) {
  return (uint64_t(blockIdx.y) * uint64_t(t) + uint64_t(i)) * uint64_t(t) + uint64_t(j);
}

// Forward (QueryRow's blocks).
template <int HD>
__global__ void __launch_bounds__(kRows * (HD / 32)) attention_fwd_k(const float* qkv, float* out, float* lse, int t,
                                                                      int heads, int hd, float scale, DropMask drop) {
  constexpr int G = HD / 32;
  __shared__ float ks[kTile][HD], vs[kTile][HD];
  const QueryRow r = query_row<G>(t, heads, hd);
  const int bi = r.bi, head = r.head, d = r.d, row0 = r.row0, g = r.g, i = r.i;
  const bool live = r.live;
  float q[kPer], acc[kPer];
  load_lane<G>(qkv_row(qkv, bi, live ? i : 0, 0, t, d, head, hd), live, hd, g, q);
#pragma unroll
  for (int e = 0; e < kPer; ++e) acc[e] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  const int last = min(t, row0 + kRows) - 1;  // the block's last query row: keys up to it
  for (int j0 = 0; j0 <= last; j0 += kTile) {
    __syncthreads();  // every thread is done with the previous tile
    stage<HD>(ks, vs, qkv, nullptr, bi, j0, 1, 2, false, t, d, head, hd);
    __syncthreads();
    const int n = live ? min(kTile, i - j0 + 1) : 0;  // keys j0 .. j0 + n - 1 are <= i
    float s[kTile];
    float tile_max = -INFINITY;
#pragma unroll
    for (int jj = 0; jj < kTile; ++jj) {  // every lane takes part: the shuffles need the whole warp
      float dot = 0.0f;
#pragma unroll
      for (int e = 0; e < kPer; ++e) dot += q[e] * ks[jj][e * G + g];
      dot = row_sum<G>(dot);
      s[jj] = jj < n ? dot * scale : -INFINITY;
      tile_max = fmaxf(tile_max, s[jj]);
    }
    if (n <= 0) continue;
    const float m_new = fmaxf(m, tile_max);
    const float keep = expf(m - m_new);  // 0 on the first tile (m = -inf)
    l *= keep;
#pragma unroll
    for (int e = 0; e < kPer; ++e) acc[e] *= keep;
#pragma unroll
    for (int jj = 0; jj < kTile; ++jj) {
      const float p = expf(s[jj] - m_new);  // 0 past the diagonal
      l += p;
      const float pf = drop.on && jj < n ? p * drop_factor(drop, prob_index(t, i, j0 + jj)) : p;
#pragma unroll
      for (int e = 0; e < kPer; ++e) acc[e] += pf * vs[jj][e * G + g];
    }
    m = m_new;
  }
  if (!live) return;
  store_lane<G>(out + (size_t(bi) * t + i) * d + size_t(head) * hd, hd, g, acc, 1.0f / l);
  if (g == 0) lse[size_t(blockIdx.y) * t + i] = m + logf(l);
}

// D_i = dout_i . out_i, one warp per (b, h, i).
__global__ void attention_delta_k(const float* out, const float* dout, float* delta, int b, int t, int heads, int hd) {
  const size_t row = (blockIdx.x * size_t(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (row >= size_t(b) * heads * t) return;
  const int i = int(row % t), bh = int(row / t), bi = bh / heads, head = bh % heads, d = heads * hd;
  const size_t at = (size_t(bi) * t + i) * d + size_t(head) * hd;
  float s = 0.0f;
  for (int c = lane; c < hd; c += 32) s += dout[at + c] * out[at + c];
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (lane == 0) delta[row] = s;
}

// dQ: block (query tile, b * H + h), keys staged as in forward.
template <int HD>
__global__ void __launch_bounds__(kRows * (HD / 32))
    attention_dq_k(const float* qkv, const float* dout, const float* lse, const float* delta, float* dqkv, int t,
                   int heads, int hd, float scale, DropMask drop) {
  constexpr int G = HD / 32;
  __shared__ float ks[kTile][HD], vs[kTile][HD];
  const QueryRow r = query_row<G>(t, heads, hd);
  const int bi = r.bi, head = r.head, d = r.d, row0 = r.row0, g = r.g, i = r.i;
  const bool live = r.live;
  const int ii = live ? i : 0;
  float q[kPer], dq[kPer], dy[kPer];
  load_lane<G>(qkv_row(qkv, bi, ii, 0, t, d, head, hd), live, hd, g, q);
  load_lane<G>(dout + (size_t(bi) * t + ii) * d + size_t(head) * hd, live, hd, g, dy);
#pragma unroll
  for (int e = 0; e < kPer; ++e) dq[e] = 0.0f;
  const float row_lse = live ? lse[size_t(blockIdx.y) * t + i] : 0.0f;
  const float row_delta = live ? delta[size_t(blockIdx.y) * t + i] : 0.0f;
  const int last = min(t, row0 + kRows) - 1;
  for (int j0 = 0; j0 <= last; j0 += kTile) {
    __syncthreads();
    stage<HD>(ks, vs, qkv, nullptr, bi, j0, 1, 2, false, t, d, head, hd);
    __syncthreads();
    const int n = live ? min(kTile, i - j0 + 1) : 0;
#pragma unroll 4
    for (int jj = 0; jj < kTile; ++jj) {
      float s = 0.0f, dp = 0.0f;
#pragma unroll
      for (int e = 0; e < kPer; ++e) {
        s += q[e] * ks[jj][e * G + g];
        dp += dy[e] * vs[jj][e * G + g];
      }
      s = row_sum<G>(s);
      dp = row_sum<G>(dp);
      if (jj < n) {
        if (drop.on) dp *= drop_factor(drop, prob_index(t, i, j0 + jj));
        const float ds = expf(s * scale - row_lse) * (dp - row_delta);
#pragma unroll
        for (int e = 0; e < kPer; ++e) dq[e] += ds * ks[jj][e * G + g];
      }
    }
  }
  if (live) store_lane<G>(dqkv + (size_t(bi) * t + i) * (3 * size_t(d)) + size_t(head) * hd, hd, g, dq, scale);
}

// dK and dV: block (key tile, b * H + h); queries i >= the tile's first key are staged
// with their dout rows, log-sum-exps and deltas.
template <int HD>
__global__ void __launch_bounds__(kRows * (HD / 32))
    attention_dkv_k(const float* qkv, const float* dout, const float* lse, const float* delta, float* dqkv, int t,
                    int heads, int hd, float scale, DropMask drop) {
  constexpr int G = HD / 32;
  __shared__ float qs[kTile][HD], dys[kTile][HD];
  __shared__ float lses[kTile], deltas[kTile];
  const int bi = blockIdx.y / heads, head = blockIdx.y % heads, d = heads * hd;
  const int row0 = blockIdx.x * kRows;
  const int g = threadIdx.x % G, j = row0 + threadIdx.x / G;
  const bool live = j < t;
  const int jj_row = live ? j : 0;
  float k[kPer], v[kPer], dk[kPer], dv[kPer];
  load_lane<G>(qkv_row(qkv, bi, jj_row, 1, t, d, head, hd), live, hd, g, k);
  load_lane<G>(qkv_row(qkv, bi, jj_row, 2, t, d, head, hd), live, hd, g, v);
#pragma unroll
  for (int e = 0; e < kPer; ++e) dk[e] = dv[e] = 0.0f;
  for (int i0 = row0 - row0 % kTile; i0 < t; i0 += kTile) {
    __syncthreads();
    stage<HD>(qs, dys, qkv, dout, bi, i0, 0, 0, true, t, d, head, hd);
    if (threadIdx.x < kTile) {
      const int i = i0 + threadIdx.x;
      lses[threadIdx.x] = i < t ? lse[size_t(blockIdx.y) * t + i] : 0.0f;
      deltas[threadIdx.x] = i < t ? delta[size_t(blockIdx.y) * t + i] : 0.0f;
    }
    __syncthreads();
#pragma unroll 4
    for (int ii = 0; ii < kTile; ++ii) {
      const int i = i0 + ii;
      float s = 0.0f, dp = 0.0f;
#pragma unroll
      for (int e = 0; e < kPer; ++e) {
        s += qs[ii][e * G + g] * k[e];
        dp += dys[ii][e * G + g] * v[e];
      }
      s = row_sum<G>(s);
      dp = row_sum<G>(dp);
      if (live && i >= j && i < t) {
        const float p = expf(s * scale - lses[ii]);
        const float f = drop.on ? drop_factor(drop, prob_index(t, i, j)) : 1.0f;
        const float ds = p * (dp * f - deltas[ii]);
        const float pf = p * f;
#pragma unroll
        for (int e = 0; e < kPer; ++e) {
          dv[e] += pf * dys[ii][e * G + g];
          dk[e] += ds * qs[ii][e * G + g];
        }
      }
    }
  }
  if (!live) return;
  float* row = dqkv + (size_t(bi) * t + j) * (3 * size_t(d)) + size_t(head) * hd;
  store_lane<G>(row + d, hd, g, dk, scale);
  store_lane<G>(row + 2 * size_t(d), hd, g, dv, 1.0f);
}

}  // namespace dpt::gpu::attention_kernels
