// cuda_emulation: enough of CUDA's execution model, on CPU threads, to run a kernel
// written for the GPU on a machine without one, for tests of a kernel's logic (index
// arithmetic, tiling, reductions, synchronisation), not of its speed. Include it before
// the kernel source (a header of __global__ / __device__ functions with no CUDA runtime
// calls, e.g. models/kernels/cuda/gpu_attention_kernels.cuh) and launch with emulate_launch.
//
// Terms:
//   block      the blocks of a grid run one after another; the threads of one block run
//              at once, one std::thread each (one team reused for every block), so
//              __syncthreads is a real barrier.
//   __shared__ becomes `static`: one copy shared by every thread, which is one block's
//              shared memory because blocks do not overlap.
//   warp       32 consecutive threads of a block; __shfl_xor_sync exchanges through a
//              per-warp slot array between two warp barriers, so every lane of the warp
//              must call it (as the mask 0xffffffff requires on a GPU too).
//   exit       a thread that returns leaves both barriers (arrive_and_drop), so threads
//              that finish early do not hold the others.
//   16 bits  __nv_bfloat16 and __half hold their rounded value as a float; WMMA's
//            fragments hold a whole tile in every lane (below).
// Not emulated: memory ordering beyond the barriers, atomics, streams, intrinsics other
// than those below. A kernel that reads shared memory another thread writes without a
// __syncthreads between may still pass here (threads interleave arbitrarily but do not
// run in lockstep).
#pragma once

#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <type_traits>
#include <vector>

#include "models/kernels/cpu/bf16.h"
#include "models/kernels/cpu/f16_round.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
using uint3 = dim3;

namespace cuda_emulation {

struct BlockState {
  std::barrier<> block_barrier;
  std::vector<std::unique_ptr<std::barrier<>>> warp_barriers;
  std::vector<float> slots;  // one per thread: __shfl_xor_sync's exchange
  explicit BlockState(unsigned threads) : block_barrier(std::ptrdiff_t(threads)), slots(threads) {
    for (unsigned w = 0; w < (threads + 31) / 32; ++w)
      warp_barriers.push_back(std::make_unique<std::barrier<>>(std::ptrdiff_t(std::min(32u, threads - w * 32))));
  }
};

inline thread_local dim3 t_thread, t_block, t_block_dim, t_grid_dim;
inline thread_local BlockState* t_state = nullptr;

}  // namespace cuda_emulation

#define threadIdx (::cuda_emulation::t_thread)
#define blockIdx (::cuda_emulation::t_block)
#define blockDim (::cuda_emulation::t_block_dim)
#define gridDim (::cuda_emulation::t_grid_dim)

inline void __syncthreads() { cuda_emulation::t_state->block_barrier.arrive_and_wait(); }

inline float __shfl_xor_sync(unsigned /*mask*/, float v, int lane_mask) {
  auto& s = *cuda_emulation::t_state;
  const unsigned me = threadIdx.x, warp = me / 32, lane = me % 32;
  auto& bar = *s.warp_barriers[warp];
  s.slots[me] = v;
  bar.arrive_and_wait();
  const float other = s.slots[warp * 32 + (lane ^ unsigned(lane_mask))];
  bar.arrive_and_wait();  // nobody overwrites a slot before every lane has read
  return other;
}

inline void __syncwarp(unsigned /*mask*/ = 0xffffffffu) {
  auto& s = *cuda_emulation::t_state;
  s.warp_barriers[threadIdx.x / 32]->arrive_and_wait();
}

// CUDA's integer min/max and the float functions the kernels use unqualified.
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
using std::isfinite;  // expf, logf, fmaxf: <cmath>'s global C functions

// 16-bit types as values already rounded (round to nearest even, as the GPU's
// __float2bfloat16_rn / __float2half_rn): round_into and widen as half_types.cuh names them.
struct __nv_bfloat16 {
  float value;
};
struct __half {
  float value;
};
inline void round_into(float v, __nv_bfloat16* d) { d->value = dpt::bf16_value(dpt::bf16_bits(v)); }
inline void round_into(float v, __half* d) {
  dpt::round_to_f16(&v, 1);
  d->value = v;
}
inline float widen(__nv_bfloat16 v) { return v.value; }
inline float widen(__half v) { return v.value; }
inline float widen(float v) { return v; }

// WMMA (CUDA's <mma.h>) for 16x16x16 tiles: a fragment holds its whole tile in every lane
// (the hardware spreads it over the warp; kernels never see the layout), loads read the
// whole tile, mma_sync computes in float, and a store writes each element from one lane.
namespace nvcuda::wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
  static_assert(M == 16 && N == 16 && K == 16, "only 16x16x16 tiles are emulated");
  float v[16][16];
};

template <typename F>
void fill_fragment(F& f, float x) {
  for (auto& row : f.v)
    for (float& e : row) e = x;
}

// Operands: element (row, col) of the fragment's tile from memory in its layout.
template <typename Use, typename T, typename Layout>
void load_matrix_sync(fragment<Use, 16, 16, 16, T, Layout>& f, const T* p, unsigned ldm) {
  for (unsigned r = 0; r < 16; ++r)
    for (unsigned c = 0; c < 16; ++c)
      f.v[r][c] = widen(std::is_same_v<Layout, row_major> ? p[r * ldm + c] : p[c * ldm + r]);
}

inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float>& f, const float* p, unsigned ldm, layout_t l) {
  for (unsigned r = 0; r < 16; ++r)
    for (unsigned c = 0; c < 16; ++c) f.v[r][c] = l == mem_row_major ? p[r * ldm + c] : p[c * ldm + r];
}

template <typename A, typename B>
void mma_sync(fragment<accumulator, 16, 16, 16, float>& d, const A& a, const B& b,
              const fragment<accumulator, 16, 16, 16, float>& c) {
  float out[16][16];
  for (int r = 0; r < 16; ++r)
    for (int col = 0; col < 16; ++col) {
      float acc = c.v[r][col];
      for (int k = 0; k < 16; ++k) acc += a.v[r][k] * b.v[k][col];
      out[r][col] = acc;
    }
  for (int r = 0; r < 16; ++r)
    for (int col = 0; col < 16; ++col) d.v[r][col] = out[r][col];
}

inline void store_matrix_sync(float* p, const fragment<accumulator, 16, 16, 16, float>& f, unsigned ldm, layout_t l) {
  for (unsigned e = threadIdx.x % 32; e < 256; e += 32) {
    const unsigned r = e / 16, c = e % 16;
    (l == mem_row_major ? p[r * ldm + c] : p[c * ldm + r]) = f.v[r][c];
  }
}
}  // namespace nvcuda::wmma

namespace cuda_emulation {

// kernel<<<grid, block>>>(args...), run to completion. One team of threads serves every
// block in turn (creating a block's threads anew for each of thousands of blocks was most
// of the emulated tests' time); a team barrier between blocks keeps them from overlapping,
// and each block has barriers of its own, so a thread that returns early from one block
// leaves that block's barriers only.
template <typename Kernel, typename... Args>
void emulate_launch(dim3 grid, dim3 block, Kernel kernel, Args... args) {
  const unsigned threads = block.x * block.y * block.z;
  const unsigned blocks = grid.x * grid.y * grid.z;
  std::vector<std::unique_ptr<BlockState>> states(blocks);
  for (auto& s : states) s = std::make_unique<BlockState>(threads);
  std::barrier<> between_blocks(std::ptrdiff_t{threads});
  std::vector<std::thread> team;
  team.reserve(threads);
  for (unsigned t = 0; t < threads; ++t)
    team.emplace_back([&, t] {
      t_thread = dim3(t % block.x, t / block.x % block.y, t / (block.x * block.y));
      t_block_dim = block;
      t_grid_dim = grid;
      for (unsigned b = 0; b < blocks; ++b) {
        t_block = dim3(b % grid.x, b / grid.x % grid.y, b / (grid.x * grid.y));
        BlockState& state = *states[b];
        t_state = &state;
        kernel(args...);
        state.block_barrier.arrive_and_drop();
        state.warp_barriers[t / 32]->arrive_and_drop();
        between_blocks.arrive_and_wait();
      }
    });
  for (auto& th : team) th.join();
}

}  // namespace cuda_emulation
