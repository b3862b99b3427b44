#include "parallel/diloco/outer_exchange.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>

#include "parallel/precision/wire16.h"

namespace dpt {

namespace {
double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
}  // namespace

OuterExchange::OuterExchange(Communicator& inner, Communicator& outer, size_t numel, const DilocoConfig& config)
    : inner_(&inner), outer_(&outer), config_(config), numel_(numel) {
  if (config.outer_dtype != DType::f32) check_wire16(config.outer_dtype, "--outer-dtype");
  const size_t g = size_t(inner.size()), i = size_t(inner.rank());
  // Equal slices (the last ones may be short or empty) so the group's allgather is one call.
  chunk_ = (numel + g - 1) / g;
  lo_ = std::min(numel, i * chunk_);
  hi_ = std::min(numel, lo_ + chunk_);
  theta_.assign(hi_ - lo_, 0.0f);
  average_.assign(hi_ - lo_, 0.0f);
  if (g > 1) gathered_.assign(g * chunk_, 0.0f);
  // torch.optim.SGD(lr=outer_lr, momentum=mu, nesterov=mu > 0) over theta's slice.
  outer_opt_ = std::make_unique<Sgd>(theta_.size(), config.outer_momentum, 0.0f, config.outer_momentum > 0);
}

OuterExchange::~OuterExchange() {
  if (!work_) return;
  try {
    work_->wait();
  } catch (const std::exception&) {
    // A failed exchange (a peer gone, an elastic re-form): its buffers are no longer read.
  }
}

void OuterExchange::reset_theta(std::span<const float> params) {
  if (params.size() != numel_) throw std::logic_error("DiLoCo: reset_theta with the wrong number of parameters");
  std::copy(params.begin() + std::ptrdiff_t(lo_), params.begin() + std::ptrdiff_t(hi_), theta_.begin());
}

void OuterExchange::begin(std::span<const float> params, bool keep_round_end) {
  if (in_flight_) throw std::logic_error("DiLoCo: an outer exchange began while the previous one is in flight");
  const size_t n = hi_ - lo_;
  for (size_t k = 0; k < n; ++k) average_[k] = theta_[k] - params[lo_ + k];
  if (keep_round_end) round_end_.assign(params.begin(), params.end());
  const int groups = outer_->size();
  started_ = now_s();
  if (config_.outer_dtype == DType::f32) {
    work_ = outer_->allreduce_async(Buffer{average_.data(), n, DType::f32, {}}, Buffer{average_.data(), n, DType::f32, {}},
                                    ReduceOp::avg);
    stats_.bytes_sent += int64_t(n * sizeof(float));
  } else {
    wire16_.resize(n);
    pack16(config_.outer_dtype, average_.data(), wire16_.data(), n, 1.0f / float(groups));
    const Buffer b{wire16_.data(), n, config_.outer_dtype, {}};
    work_ = outer_->allreduce_async(b, b, ReduceOp::sum);
    stats_.bytes_sent += int64_t(n * sizeof(uint16_t));
  }
  in_flight_ = true;
  averaged_ = false;
}

void OuterExchange::wait_average() {
  if (!in_flight_ || averaged_) return;
  const double t0 = now_s();
  work_->wait();
  work_.reset();
  const double t1 = now_s();
  stats_.exposed_s += t1 - t0;
  stats_.exchange_s += t1 - started_;
  if (config_.outer_dtype != DType::f32) unpack16(config_.outer_dtype, wire16_.data(), average_.data(), average_.size());
  averaged_ = true;
}

void OuterExchange::load_in_flight(std::span<const float> round_end, std::span<const float> average) {
  if (average.size() != average_.size() || (!round_end.empty() && round_end.size() != numel_))
    throw std::invalid_argument("DiLoCo: the exchange in flight in the checkpoint has other sizes than this run's");
  round_end_.assign(round_end.begin(), round_end.end());
  std::copy(average.begin(), average.end(), average_.begin());
  in_flight_ = true;
  averaged_ = true;
}

void OuterExchange::finish(std::span<float> params) {
  if (!in_flight_) throw std::logic_error("DiLoCo: finish() without an exchange in flight");
  wait_average();
  outer_opt_->step(theta_, average_, config_.outer_lr);
  // The whole new theta on every rank of the group: an allgather of the slices within
  // the host (nothing crosses the slow link).
  const float* full = theta_.data();
  if (!gathered_.empty()) {
    std::vector<float> mine(chunk_, 0.0f);
    std::copy(theta_.begin(), theta_.end(), mine.begin());
    inner_->allgather(Buffer{mine.data(), chunk_, DType::f32, {}}, Buffer{gathered_.data(), gathered_.size(), DType::f32, {}});
    full = gathered_.data();
  }
  if (round_end_.empty()) {
    std::copy(full, full + numel_, params.begin());
  } else {  // overlapped: keep what the inner steps since the round's end added
    for (size_t k = 0; k < numel_; ++k) params[k] = full[k] + (params[k] - round_end_[k]);
    round_end_.clear();
  }
  in_flight_ = false;
  averaged_ = false;
  ++stats_.rounds;
}

void OuterExchange::average_across_groups(std::span<float> values) {
  if (values.empty() || outer_->size() == 1) return;
  const double t0 = now_s();
  outer_->allreduce(Buffer{values.data(), values.size(), DType::f32, {}}, ReduceOp::avg);
  const double waited = now_s() - t0;
  stats_.exposed_s += waited;
  stats_.exchange_s += waited;
  stats_.bytes_sent += int64_t(values.size_bytes());
}

}  // namespace dpt
