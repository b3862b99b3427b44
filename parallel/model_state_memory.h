#pragma once
// Memory accounting of model states per rank, printed next to the ZeRO paper's formula.
//
// Terms:
//   P, N      parameter count and world size.
//   K         optimizer-state bytes per parameter (Adam: 8 = two fp32 moments;
//             SGD with momentum: 4; plain SGD: 0), plus 4 for the fp32 master weights
//             in mixed precision (the paper's K = 12 for mixed-precision Adam). Our
//             bf16 working weights and gradients sit in fp32 arrays (the CPU kernels
//             compute in fp32), so they count 4 + 4 bytes, not the paper's 2 + 2.
//   formula   bytes per rank of parameters + gradients + optimizer state, fp32:
//               stage 0  (4 + 4 + K) P            (Adam: 16P)
//               stage 1  8P + K P / N             (Adam: 8P + 8P/N)
//               stage 2  4P + (4 + K) P / N       (Adam: 4P + 12P/N)
//               stage 3  (8 + K) P / N + the gathered working set
//   measured  the buffers' real sizes (vector capacities; for a buffer whose pages are
//             released, its resident bytes from mincore), never the formula.
//   peak RSS  getrusage's ru_maxrss of this process (everything: code, data sets,
//             activations, the communicator's scratch).
#include <cstddef>
#include <string>

namespace dpt {

struct ModelStateBytes {
  int stage = 0;
  int world = 1;
  size_t numel = 0;            // P
  double state_per_param = 0;  // K
  size_t params = 0;            // counted: allocated, or resident (stage 3)
  size_t params_allocated = 0;  // for the note when they differ
  size_t grads = 0;            // counted: allocated, or resident where pages are released
  size_t grads_allocated = 0;  // for the note when they differ
  size_t optimizer = 0;         // optimizer state, the fp32 master included
  size_t master = 0;            // mixed precision: the fp32 master weights (part of optimizer)
  size_t comm = 0;
  size_t gathered_peak = 0;     // stage 3: the gathered working set, at its largest so far
  // What the memory check planned per rank (memory_check.h), when the trainer knows it
  // (gpt2: from the shape), and its activation term; 0: not shown.
  double planned = 0, activations_estimate = 0;
};

double zero_formula_bytes(int stage, double numel, int world, double state_per_param);
size_t peak_rss_bytes();
// A boxed table; `when` is "start" or "end".
std::string memory_table(const ModelStateBytes& m, const std::string& when);

}  // namespace dpt
