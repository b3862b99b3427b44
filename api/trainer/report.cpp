// What train prints and writes (report.h).
#include "api/trainer/report.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "models/kernels/cpu/gemm_choice.h"
#include "parallel/ddp/powersgd.h"
#include "parallel/diloco/diloco_strategy.h"
#include "api/cli/figures.h"
#include "api/cli/image_flags.h"
#include "api/cli/run_flags.h"
#include "train/trainer_common.h"

namespace train {
namespace {

std::string box(const std::vector<std::pair<std::string, std::string>>& rows) {
  size_t kw = 0, vw = 0;
  for (auto& [k, v] : rows) kw = std::max(kw, k.size()), vw = std::max(vw, v.size());
  std::string line = "+" + std::string(kw + 2, '-') + "+" + std::string(vw + 2, '-') + "+\n";
  std::string out = line;
  for (auto& [k, v] : rows)
    out += "| " + k + std::string(kw - k.size(), ' ') + " | " + v + std::string(vw - v.size(), ' ') + " |\n";
  return out + line;
}

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

double now_unix() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// " sent_bytes_tcp=S recv_bytes_tcp=R ... other_hosts_bytes=X" for the final line: payload
// each backend carried over the run (a backend used twice is summed), and this rank's bytes
// to and from ranks on other hosts over all of them (comm/traffic.h).
std::string traffic_fields(const std::vector<dpt::BackendTraffic>& traffic) {
  std::vector<std::pair<std::string, dpt::Traffic>> by_name;
  uint64_t other_hosts = 0;
  for (const auto& t : traffic) {
    other_hosts += t.carried.other_hosts_bytes();
    auto it = std::find_if(by_name.begin(), by_name.end(), [&](const auto& p) { return p.first == t.backend; });
    if (it == by_name.end()) it = by_name.insert(by_name.end(), {t.backend, {}});
    it->second.bytes_sent += t.carried.bytes_sent;
    it->second.bytes_received += t.carried.bytes_received;
  }
  std::string out;
  for (const auto& [name, t] : by_name)
    out += " sent_bytes_" + name + "=" + std::to_string(t.bytes_sent) + " recv_bytes_" + name + "=" + std::to_string(t.bytes_received);
  return out + " other_hosts_bytes=" + std::to_string(other_hosts);
}

// The gradient bytes one rank hands to the communicator per step, compressed and not.
std::string powersgd_line(const Options& o, const dpt::Module& model) {
  const auto w = dpt::powersgd_wire(model.param_infos(), o.powersgd_rank);
  return "PowerSGD rank " + std::to_string(o.powersgd_rank) + ": " + std::to_string(w.compressed_floats * 4) +
         " gradient bytes per step from step " + std::to_string(o.powersgd_start_step + 1) + " (the first " +
         std::to_string(o.powersgd_start_step) + " uncompressed: " + std::to_string(w.plain_floats * 4) + "), " +
         fmt("%.1f", double(w.plain_floats) / double(w.compressed_floats)) + "x fewer";
}

}  // namespace

void print_config(const Options& o, dpt::DistTrainer& trainer, const dpt::Communicator& comm) {
  const size_t params = trainer.model().num_params();
  std::cout << box({{"model", o.cfg.model + " (" + std::to_string(params) + " parameters, " + fmt("%.2f", params * 4.0 / (1 << 20)) + " MiB)"},
                    {"dataset", trainer.train_set().name() + " (" + std::to_string(trainer.train_set().size()) + " samples, " + std::to_string(trainer.held_out_set().size()) + " held out)"},
                    {"input", dpt::tools::shape_text(trainer.model().sample_shape()) + ", augmentation " + dpt::augment_name(o.cfg.image.augment)},
                    {"BatchNorm", trainer.model().flat_buffers().empty() ? "none" : std::to_string(trainer.model().flat_buffers().size()) + " buffer values, " + (o.cfg.broadcast_buffers ? "broadcast from rank 0 each step" : "per rank (not broadcast)") + (o.cfg.sync_bn ? ", SyncBatchNorm" : "")},
                    {"world size", std::to_string(comm.size()) + " (" + comm.topology().describe() + ")"},
                    {"device", o.device == "cuda" ? "cuda (model on the GPU; optimizer and gradient exchange on host buffers)" : "cpu"},
                    {"GEMM", o.device == "cuda" ? "cuBLAS" : dpt::gemm_engine_description()},
                    {"threads", o.threads_text},
                    {"backend", comm.backend_name() + (o.switch_backend.empty() ? "" : " (switch at " + o.switch_backend + ")")},
                    {"algorithm", o.algo},
                    {"per-rank batch", std::to_string(o.cfg.batch_size) + " x " + std::to_string(o.cfg.grad_accum) + " accum"},
                    {"global batch", std::to_string(o.cfg.batch_size * o.cfg.grad_accum * comm.size())},
                    {"optimizer", o.cfg.optimizer + " lr " + fmt("%g", o.cfg.lr_config.lr) + " (" + o.cfg.lr_schedule + ")"},
                    {"precision", o.precision == "fp32" ? "fp32" : o.precision + " working weights and gradients, fp32 master weights" + (o.precision == "fp16" ? ", fp16 activations, loss scale " + fmt("%g", o.cfg.loss_scaler.init_scale) + " (window " + std::to_string(o.cfg.loss_scaler.growth_interval) + ")" : "")},
                    o.strategy == "diloco"
                        ? std::pair<std::string, std::string>{"strategy", trainer.strategy().name() + ", outer lr " + fmt("%g", o.cfg.parallel.diloco.outer_lr) + ", Nesterov " + fmt("%g", o.cfg.parallel.diloco.outer_momentum) + " (docs/diloco.md)"}
                        : std::pair<std::string, std::string>{"ZeRO stage", std::to_string(o.zero) + (o.zero ? " (" + trainer.strategy().name() + ", shard " + std::to_string((params + comm.size() - 1) / comm.size()) + " elements per rank)" : " (DDP)")},
                    {o.zero >= 2 ? "ZeRO-2/3 buckets" : "DDP buckets", std::to_string(trainer.num_buckets()) + " (" + fmt("%g", o.bucket_mb) + " MiB, overlap " + (o.no_overlap ? "off" : "on") + ", wire " + o.grad_compress + ")"},
                    {"epochs / steps", std::to_string(o.cfg.epochs) + " / " + (o.cfg.steps ? std::to_string(o.cfg.steps) : "all")}});
  if (o.grad_compress == "powersgd") std::cout << powersgd_line(o, trainer.model()) << "\n";
  std::cout << dpt::memory_table(trainer.memory_bytes(), "start");
  std::cout.flush();
}

Reporter::Reporter(const Options& o, dpt::DistTrainer& trainer, int start_rank)
    : o_(o), trainer_(trainer), start_rank_(start_rank),
      // mpirun hands its ranks a pseudo-terminal even when its own output is a file, so
      // under Open MPI the bar stays off; tools/launch passes pipes and is judged honestly.
      tty_(start_rank == 0 && isatty(STDOUT_FILENO) && !std::getenv("OMPI_COMM_WORLD_SIZE")) {
  open_metrics();
}

bool Reporter::leader() const { return trainer_.communicator().rank() == 0; }

void Reporter::open_metrics() {
  if (metrics_.is_open() || o_.metrics_out.empty() || !leader()) return;
  metrics_.open(o_.metrics_out, start_rank_ == 0 ? std::ios::trunc : std::ios::app);
  if (!metrics_) throw std::runtime_error("--metrics-out: cannot write '" + o_.metrics_out + "'");
}

dpt::TrainCallbacks Reporter::callbacks(std::function<void(int64_t, const char*)> on_phase) {
    auto on_log = [this](const dpt::StepLog& l) {
      if (!leader()) return;
      open_metrics();
      if (tty_) std::printf("\r\033[K");
      std::printf("step %6lld | epoch %d | loss %.6f | lr %.3g | %9s samples/s | comm %.2f ms, exposed %.2f ms%s\n",
                  (long long)l.step, l.epoch, l.loss, l.lr, dpt::tools::rate(l.samples_per_s).c_str(), l.comm_s * 1e3, l.exposed_s * 1e3,
                  l.loss_scale > 0 ? (" | scale " + fmt("%g", l.loss_scale) + ", skipped " + std::to_string(l.skipped_steps)).c_str() : "");
      if (tty_ && o_.cfg.steps > 0) {
        int w = 30, fill = int(w * double(l.step) / double(o_.cfg.steps));
        std::printf("[%s%s] %lld/%lld", std::string(fill, '#').c_str(), std::string(w - fill, ' ').c_str(), (long long)l.step, (long long)o_.cfg.steps);
      }
      std::fflush(stdout);
      if (metrics_.is_open()) {
        nlohmann::json j = {{"step", l.step}, {"epoch", l.epoch}, {"loss", l.loss}, {"lr", l.lr},
                            {"samples_per_s", l.samples_per_s}, {"comm_ms", l.comm_s * 1e3}, {"exposed_ms", l.exposed_s * 1e3}, {"comm_bytes", l.comm_bytes},
                            {"world_size", l.world_size}, {"sample_begin", l.sample_begin}, {"sample_end", l.sample_end},
                            {"other_hosts_bytes", l.other_hosts_bytes}, {"unix_time", now_unix()}};
        if (l.loss_scale > 0) j["loss_scale"] = l.loss_scale, j["skipped_steps"] = l.skipped_steps;
        metrics_ << j.dump() << "\n" << std::flush;
      }
    };
    auto on_eval = [this](int64_t step, const dpt::EvalResult& e) {
      if (!leader()) return;
      open_metrics();
      if (tty_) std::printf("\r\033[K");
      // How much of the held-out set was evaluated: all, or the --max-eval-samples cap.
      const std::string dataset = o_.cfg.make_dataset     ? trainer_.held_out_set().name()
                                  : o_.cfg.dataset.empty() ? dpt::default_dataset(o_.cfg.model)
                                                           : o_.cfg.dataset;
      const std::string covered = dpt::tools::eval_coverage(e.samples, trainer_.held_out_set().size(), dataset);
      if (e.accuracy) std::printf("eval  step %lld: test_loss %.4f test_acc %.4f (%s)\n", (long long)step, e.loss, *e.accuracy, covered.c_str());
      else std::printf("eval  step %lld: val_loss %.4f (%s)\n", (long long)step, e.loss, covered.c_str());
      std::fflush(stdout);
      if (metrics_.is_open()) {
        nlohmann::json j = {{"step", step}, {"eval_loss", e.loss}, {"eval_samples", e.samples}};
        if (e.accuracy) j["test_acc"] = *e.accuracy;
        metrics_ << j.dump() << "\n" << std::flush;
      }
    };
    auto on_event = [this](const std::string& what) {
      if (!leader()) return;
      open_metrics();
      if (tty_) std::printf("\r\033[K");
      std::printf("%s\n", what.c_str());
      std::fflush(stdout);
      if (metrics_.is_open()) metrics_ << nlohmann::json{{"event", what}}.dump() << "\n" << std::flush;
    };
    auto on_membership = [this](const dpt::MembershipChange& m) {
      if (!leader()) return;
      open_metrics();
      std::string lost;
      for (const auto& id : m.lost) lost += (lost.empty() ? "" : ", ") + id;
      std::printf("elastic: generation %d: world size %d (lost [%s], joined %d); resuming after step %lld, %lld step(s) lost, recovery %.2f s\n",
                  m.generation, m.world_size, lost.c_str(), m.joined, (long long)m.resumed_after_step, (long long)m.lost_steps, m.recovery_s);
      std::fflush(stdout);
      if (metrics_.is_open())
        metrics_ << nlohmann::json{{"event", "membership"}, {"generation", m.generation}, {"world_size", m.world_size},
                                  {"lost", m.lost}, {"joined", m.joined}, {"resumed_after_step", m.resumed_after_step},
                                  {"lost_steps", m.lost_steps}, {"recovery_s", m.recovery_s}, {"reason", m.reason},
                                  {"prev_members", m.prev_members}, {"from_checkpoint", m.from_checkpoint},
                                  {"unix_time", now_unix()}}.dump()
                << "\n" << std::flush;
    };
  auto on_leave = [this](int generation, const std::string& why) {
    std::fprintf(stderr, "elastic: leaving generation %d as rank %d: %s\n", generation, trainer_.communicator().rank(),
                 why.c_str());
    std::fflush(stderr);
  };
  return {on_log, on_eval, on_event, on_membership, on_leave, std::move(on_phase)};
}

namespace {
// --strategy diloco: this rank's outer rounds and exchange: payload it sent, the time
// from each exchange's start to its average's arrival, how much of that the rank waited
// for, and so the fraction hidden behind inner steps (0 without overlap).
std::string diloco_fields(const dpt::ParallelStrategy& strategy) {
  const auto* d = dynamic_cast<const dpt::DilocoStrategy*>(&strategy);
  if (!d) return "";
  const dpt::OuterExchangeStats& o = d->outer_stats();
  const double hidden = o.exchange_s > 0 ? 1.0 - o.exposed_s / o.exchange_s : 0.0;
  return fmt(" outer_rounds=%.0f", double(o.rounds)) + fmt(" outer_mib_sent=%.4f", double(o.bytes_sent) / (1 << 20)) +
         fmt(" outer_exchange_s=%.3f", o.exchange_s) + fmt(" outer_exposed_s=%.3f", o.exposed_s) +
         fmt(" outer_hidden_frac=%.3f", hidden);
}
}  // namespace

void Reporter::final_line(const dpt::TrainSummary& s) {
  if (!leader()) return;
  open_metrics();
  std::string acc = s.eval.accuracy ? "test_acc=" + fmt("%.4f", *s.eval.accuracy) : "val_loss=" + fmt("%.4f", s.eval.loss);
  double hidden = s.comm_s > 0 ? 1.0 - s.exposed_s / s.comm_s : 1.0;
  std::cout << dpt::memory_table(trainer_.memory_bytes(), "end");
  // tokens_per_s for language models only (sample positions x samples/s); an image
  // model has no tokens, and a 0 there read as a measurement.
  const std::string tokens = trainer_.model().takes_tokens()
                                 ? " tokens_per_s=" + fmt("%.1f", s.samples_per_s * double(trainer_.model().sample_shape().at(0)))
                                 : "";
  // Stragglers evicted (--straggler-action evict), by elastic id: "a,b".
  std::string evicted;
  for (const auto& id : s.evicted) evicted += (evicted.empty() ? " evicted=" : ",") + id;
  std::printf("final: %s loss=%.6f samples_per_s=%.3f time_s=%.2f steps=%lld world_size=%d backend=%s comm_s=%.3f exposed_comm_s=%.3f hidden_frac=%.3f skipped_batches=%lld step_ms=%.3f zero=%d comm_mib_per_step=%.4f precision=%s device=%s%s d2h_bytes_per_step=%llu h2d_bytes_per_step=%llu recoveries=%d lost_steps=%lld loss_scale=%g skipped_steps=%lld zero_grad_frac=%.6f agreements=%lld straggler_rank=%d straggler_ratio=%.2f evictions=%zu%s%s%s\n",
              acc.c_str(), s.last_loss, s.samples_per_s, s.time_s, (long long)s.steps, s.world_size, s.backend.c_str(), s.comm_s, s.exposed_s, hidden, (long long)s.skipped_batches, s.step_s * 1e3, o_.zero,
              s.comm_bytes_per_step / (1 << 20), o_.precision.c_str(), o_.device.c_str(), tokens.c_str(),
              (unsigned long long)s.pcie_per_step.to_host, (unsigned long long)s.pcie_per_step.to_device, s.recoveries,
              (long long)s.lost_steps, double(s.loss_scale), (long long)s.skipped_steps, s.zero_grad_frac, (long long)s.agreements,
              s.straggler_rank, s.straggler_ratio, s.evicted.size(), evicted.c_str(),
              traffic_fields(s.traffic).c_str(), diloco_fields(trainer_.strategy()).c_str());
  std::fflush(stdout);
  if (metrics_.is_open()) {
    nlohmann::json j = {{"final", true}, {"steps", s.steps}, {"loss", s.last_loss}, {"samples_per_s", s.samples_per_s},
                        {"time_s", s.time_s}, {"step_ms", s.step_s * 1e3}, {"comm_s", s.comm_s}, {"exposed_comm_s", s.exposed_s}, {"eval_loss", s.eval.loss},
                        {"straggler_rank", s.straggler_rank}, {"straggler_ratio", s.straggler_ratio},
                        {"evictions", s.evicted.size()}, {"evicted", s.evicted}};
    if (s.eval.accuracy) j["test_acc"] = *s.eval.accuracy;
    metrics_ << j.dump() << "\n";
  }
}

}  // namespace train
