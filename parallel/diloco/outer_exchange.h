#pragma once
// DiLoCo's outer exchange for one rank (the terms are diloco_strategy.h's): this rank's
// slice [lo, hi) of theta and of the outer momentum, the pseudo-gradient averaged across
// the inner groups, the outer Nesterov step, and the allgather that gives every rank of
// the inner group the whole new theta.
//
//   begin(params)   delta = theta_slice - params[lo, hi), sent in the outer dtype (bf16
//                   and f16 are scaled by 1/G before rounding, so the sum stays in range);
//                   with keep_round_end, params is copied (the overlap's reference point)
//   finish(params)  waits for the average, steps theta's slice with outer SGD, allgathers
//                   theta within the group, then params = theta (blocking exchange) or
//                   params = theta + (params - round_end) (overlapped)
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "comm/communicator.h"
#include "comm/work.h"
#include "optim/sgd.h"
#include "parallel/strategy_config.h"

namespace dpt {

struct OuterExchangeStats {
  int64_t rounds = 0;
  int64_t bytes_sent = 0;     // payload this rank put on the cross-group allreduces (buffers included)
  double exchange_s = 0;      // begin() to the average's arrival, summed
  double exposed_s = 0;       // of which the caller waited in finish()
};

class OuterExchange {
 public:
  // inner: this rank's inner group (rank i of g holds slice i); outer: the ranks holding
  // the same slice in every group (G of them). numel: the model's parameters.
  OuterExchange(Communicator& inner, Communicator& outer, size_t numel, const DilocoConfig& config);
  // An exchange still in flight writes into this object's buffers: it is waited for.
  ~OuterExchange();

  size_t lo() const { return lo_; }
  size_t hi() const { return hi_; }
  // theta's slice and the momentum (empty before the first outer step with momentum).
  std::span<float> theta() { return theta_; }
  std::vector<std::pair<std::string, std::span<float>>> outer_state() { return outer_opt_->state_buffers(); }
  Sgd& outer_optimizer() { return *outer_opt_; }
  int64_t rounds() const { return stats_.rounds; }
  void set_rounds(int64_t r) { stats_.rounds = r; }
  const OuterExchangeStats& stats() const { return stats_; }

  // theta := params[lo, hi) (the start, or a state adopted from elsewhere).
  void reset_theta(std::span<const float> params);
  void set_communicators(Communicator& inner, Communicator& outer) { inner_ = &inner, outer_ = &outer; }

  void begin(std::span<const float> params, bool keep_round_end);
  bool in_flight() const { return in_flight_; }
  // The average has arrived (waits for it); for a checkpoint taken while in flight.
  void wait_average();
  void finish(std::span<float> params);
  // Blocking: `values` averaged over the groups (one allreduce on the cross-group split,
  // fp32 whatever the outer dtype); counted in bytes_sent. For state that is not trained
  // (BatchNorm's running statistics: DilocoStrategy::average_buffers).
  void average_across_groups(std::span<float> values);
  // A checkpoint's view of an exchange in flight: the round-end parameters and the
  // averaged slice (after wait_average); load_in_flight puts them back.
  std::span<const float> round_end() const { return round_end_; }
  std::span<const float> average() const { return average_; }
  void load_in_flight(std::span<const float> round_end, std::span<const float> average);

 private:
  Communicator* inner_;
  Communicator* outer_;
  DilocoConfig config_;
  size_t numel_, lo_ = 0, hi_ = 0, chunk_ = 0;
  std::vector<float> theta_;      // this rank's slice of theta
  std::vector<float> average_;    // the averaged pseudo-gradient slice (f32)
  std::vector<uint16_t> wire16_;  // bf16/f16 on the wire
  std::vector<float> round_end_;  // overlap: the parameters at the round's end
  std::vector<float> gathered_;   // g * chunk_: the new theta from every rank of the group
  std::unique_ptr<Sgd> outer_opt_;
  WorkPtr work_;
  bool in_flight_ = false, averaged_ = false;
  double started_ = 0;
  OuterExchangeStats stats_;
};

}  // namespace dpt
