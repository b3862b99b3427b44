#pragma once
// PowerSGD gradient compression for DDP (`train --grad-compress powersgd`; Vogels,
// Karimireddy and Jaggi, NeurIPS 2019, as in PyTorch's powerSGD_hook: rank-R power
// iteration with error feedback and warm start). One PowerSgdBucket per gradient bucket;
// grad_allreduce.h runs its phases around the collectives, and the phases themselves do
// no communication, so a test can run them against its own averaging.
//
// Terms:
//   R             the approximation rank (--powersgd-rank).
//   matrix        a parameter with >= 2 dims viewed as n x m (its first dim x the rest),
//                 row-major as it is stored (a Linear's [out, in], a Conv2d's [out, in*k*k]).
//   compressed    a matrix with R (n + m) < n m: it travels as P (n x R) and Q (m x R)
//                 instead of its n m elements. This implies min(n, m) > R.
//   uncompressed  every other parameter of the bucket (biases, norms, thin matrices): its
//                 gradient travels as is, all of them in the same buffer as the P's.
//   M             a compressed matrix's gradient plus its error, formed in place in the
//                 gradient buffer.
//   P             M Q with the previous step's Q; averaged over the ranks, then its columns
//                 orthonormalised (orthonormalize_columns).
//   Q             M^T P, averaged over the ranks. The average is kept as the next step's
//                 starting Q (warm start: one power iteration per step refines it); before
//                 the first compressed step it is a seeded pseudo-random matrix, the same
//                 on every rank.
//   approximation P Q^T with the averaged Q = the average over ranks of P P^T M: what the
//                 optimizer receives, bit-identical on every rank (P and Q are averages).
//   error         M - P Q_local^T with this rank's own Q (before averaging), the part of
//                 its gradient the projection left out, kept per rank and added to the next
//                 step's M (error feedback: over K steps, sum of approximations + final
//                 errors averaged over the ranks = sum of the averaged gradients).
//   wire floats   per step: sum over compressed matrices of R (n + m), plus the
//                 uncompressed elements (powersgd_wire).
// The state (Q and error) is local to the process: a backend switch keeps it; a
// checkpoint holds it (powersgd_checkpoint.h), so a resumed run goes on bit for bit.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "models/nn/param_store.h"

namespace dpt {

// Orthonormalises the columns of the row-major n x cols matrix p in place: modified
// Gram-Schmidt, run twice (one pass loses orthogonality on nearly dependent columns),
// dot products accumulated in double. A column left with less than 1e-4 of its norm
// after the earlier columns are removed (or one that was zero) is dependent on them:
// it becomes zero instead of amplified rounding noise (the epsilon guard), so P P^T
// stays a projection.
void orthonormalize_columns(float* p, size_t n, size_t cols);

// How a parameter travels: true when it is a compressed matrix at rank R.
bool powersgd_compresses(const ParamInfo& p, int rank);

struct PowerSgdWire {
  size_t compressed_floats = 0;  // per compressed step: the P and Q payloads + uncompressed elements
  size_t plain_floats = 0;       // per uncompressed step: every element
};
PowerSgdWire powersgd_wire(const std::vector<ParamInfo>& params, int rank);

class PowerSgdBucket {
 public:
  // params: the bucket's parameters (offsets into the flat gradient buffer).
  PowerSgdBucket(const std::vector<ParamInfo>& params, int rank, uint64_t seed);

  // Phase 1, the bucket's gradients final: M = gradient + error (in grads), P = M Q.
  // Returns the payload to average over the ranks: the uncompressed elements, then P
  // of every compressed matrix.
  std::span<float> compress(std::span<float> grads);
  // Phase 2, the payload averaged in place: the uncompressed elements go back to grads,
  // P is orthonormalised, Q_local = M^T P. Returns Q_local (the send side of Q's
  // average; empty when the bucket has no compressed matrix).
  std::span<float> project(std::span<float> grads);
  // Where Q's average goes (the receive side).
  std::span<float> q_average() { return q_; }
  // Phase 2b, any time before decompress (e.g. while Q travels): error = M - P Q_local^T.
  void remember_error(std::span<const float> grads);
  // Phase 3, Q averaged into q_average(): grads = P Q^T; Q is kept for the next step.
  void decompress(std::span<float> grads);

  // Zero error and the seeded Q (the state of a fresh run).
  void reset();
  // What carries from one step to the next, between steps (checkpoints): the averaged Q
  // (the same on every rank) and this rank's error. The other buffers are rewritten
  // before they are read in every step.
  std::span<float> q_state() { return q_; }
  std::span<float> error_state() { return error_; }
  int approximation_rank() const { return rank_; }
  size_t payload_floats() const { return payload_.size(); }
  size_t q_floats() const { return q_.size(); }
  // Error, Q (average and local) and payload: what this bucket holds besides the gradients.
  size_t state_bytes() const;
  // Which slices of the flat gradient its state belongs to: "offset:rowsxcols" of each
  // compressed matrix, ';'-separated. Checkpoints compare it, so a state is restored only
  // into the matrices it was built on (not merely into buffers of the same size).
  std::string layout() const;
  // The current (averaged) Q of compressed matrix i, m x R row-major (tests).
  std::span<const float> q_of(size_t i) const;
  size_t num_compressed() const { return mats_.size(); }

 private:
  struct Matrix {
    size_t offset = 0, rows = 0, cols = 0;  // in the flat buffer; n x m
    size_t p_at = 0, q_at = 0, err_at = 0;  // in payload_ (after the uncompressed), q_, error_
    uint64_t seed = 0;
  };
  struct Span {
    size_t offset = 0, numel = 0;
  };
  enum class Phase { idle, compressed, projected, remembered };
  void expect(Phase p, const char* call) const;

  int rank_;
  std::vector<Matrix> mats_;
  std::vector<Span> plain_;
  size_t plain_floats_ = 0;
  std::vector<float> payload_, q_, q_local_, error_;
  Phase phase_ = Phase::idle;
};

}  // namespace dpt
