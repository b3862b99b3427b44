// gpt2_step: one process training GPT-2 on random tokens, timed by phase, for the speed
// benchmark (bench/gpt2_speed.sh) and for profiling. The model, loss, Adam and GEMM
// measurement are the project's own (make_model, Adam via make_optimizer,
// record_step_gemms + benchmark_gemm_calls from train/local_trainer.h); only the data
// is synthetic, so the figure is the model's and optimizer's cost.
//
// Terms:
//   step        zero_grad, forward, loss, backward, Adam step on one batch.
//   tokens/s    batch x seq_len / mean step time over the timed steps (after warm-up);
//               best: over the fastest step (on a shared machine, the least disturbed).
//   model FLOPs 2mnk over the GEMM calls of one recorded training step.
//   precision   --precision bf16: the model's GEMMs with bf16 operands and fp32
//               accumulation (Module::set_gemm_precision), where the CPU has AMX or
//               AVX512-BF16; the replay below then runs them as gemm_bf16 too.
//   serial loops --serial-loops: LayerNorm, GELU, adds, softmax, loss and Adam on one
//               thread (SerialLoopsScope), as before they ran on parallel_for's threads.
//   keep logits --keep-logits: the loss writes the logits' gradient into its own buffer
//               (Module::set_keep_output), as before it wrote over the logits.
//   sgemm       OpenBLAS on exactly those calls: the ceiling. One round of them is timed
//               right after each timed step, so each step has a ceiling measured under
//               the same load; the GEMM ratio is sgemm-round time / step time, per pair,
//               median over the pairs (on a shared machine a ratio of separate means or
//               bests mixes different loads).
//   peak RSS    getrusage's ru_maxrss at the end; the sgemm replay's scratch operands (up to
//               three times the largest matrix, ~0.4 GiB at 124M) are included unless --no-gemm.
//   model states 16 bytes per parameter: parameters, gradients, Adam's two moments.
//   activations the bytes held in HostFloats (models/kernels/cpu/huge_pages.h) at their peak minus
//               the model states: every layer's kept outputs, its backward buffers, the
//               logits (their gradient written over them), measured, not estimated.
//   cpu         the same phases in process CPU time (CLOCK_PROCESS_CPUTIME_ID): with
//               OPENBLAS_NUM_THREADS=1 (GEMMs and loops on one thread) a loaded machine
//               stretches wall time but barely the CPU time, so cpu_tokens_per_s is the
//               figure to compare across runs there.
//   in-step GEMM every sgemm() of the timed steps timed where it runs (GemmClockScope),
//               bf16 operand conversions included: step_gemm_gflops (wall) and
//               step_gemm_cpu_gflops, and the CPU time outside them ("non-GEMM").
// Prints one "key=value" line (parsed by gpt2_speed.sh) after a phase table.
#include <sys/resource.h>

#include <boost/program_options.hpp>

#include <chrono>
#include <ctime>
#include <cstdio>
#include <iostream>
#include <algorithm>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <vector>
#include <string>

#include "data/batch.h"
#include "models/kernels/cpu/gemm.h"
#include "models/kernels/cpu/parallel_for.h"
#include "models/zoo/gpt2.h"
#include "models/kernels/cpu/huge_pages.h"
#include "models/zoo/models.h"
#include "optim/optimizer.h"
#include "train/local_trainer.h"

namespace po = boost::program_options;
using Clock = std::chrono::steady_clock;

namespace {
double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}
}  // namespace

int main(int argc, char** argv) {
  std::string size = "124M";
  int64_t batch = 4, seq = 64, steps = 10, warmup = 2;
  float dropout = 0.1f, lr = 3e-5f;
  bool measure_gemm = true;
  std::string precision = "fp32";
  po::options_description desc("gpt2_step: timed GPT-2 training steps on random tokens");
  desc.add_options()("help,h", "show this help")("size", po::value(&size), "124M | 355M | 774M | 1558M")(
      "batch", po::value(&batch), "sequences per step")("seq", po::value(&seq), "tokens per sequence")(
      "steps", po::value(&steps), "timed steps")("warmup", po::value(&warmup), "untimed steps first")(
      "dropout", po::value(&dropout), "dropout (GPT-2: 0.1)")("lr", po::value(&lr), "Adam learning rate")(
      "no-gemm", "skip the sgemm ceiling measurement")(
      "serial-loops", "run the layers' and Adam's loops on one thread (models/kernels/cpu/parallel_for.h), for comparison")(
      "keep-logits", "the loss writes its gradient into a buffer of its own, not over the logits (for comparison)")(
      "precision", po::value(&precision),
      "fp32 | bf16: the model's GEMM precision (bf16: bf16 operands, fp32 accumulation, where native; "
      "fp32 weights and Adam either way)");
  try {
    po::variables_map vm;
    po::store(po::parse_command_line(argc, argv, desc), vm);
    po::notify(vm);
    if (vm.count("help")) {
      std::cout << desc << "\n";
      return 0;
    }
    measure_gemm = !vm.count("no-gemm");
    std::optional<dpt::SerialLoopsScope> serial_loops;
    if (vm.count("serial-loops")) serial_loops.emplace();
    dpt::ModelConfig cfg;
    dpt::Gpt2Request req;
    req.size = size;
    dpt::configure_gpt2(req, cfg);
    cfg.seq_len = seq;
    cfg.dropout = dropout;
    auto model = dpt::make_model("gpt2", cfg);
    model->set_keep_output(vm.count("keep-logits") > 0);
    std::printf("# GEMM: %s\n", dpt::gemm_engine_description().c_str());
    if (precision == "bf16") {
      model->set_gemm_precision(dpt::GemmPrecision::bf16);
      std::printf("# %s\n", dpt::bf16_gemm_description().c_str());
    } else if (precision != "fp32") {
      throw std::invalid_argument("--precision '" + precision + "': valid are fp32, bf16");
    }
    dpt::OptimizerConfig oc;
    auto adam = dpt::make_optimizer("adam", oc, model->num_params());
    std::mt19937_64 gen(1);
    auto make_batch = [&] {
      dpt::Batch b;
      b.n = static_cast<size_t>(batch);
      b.sample_shape = {seq};
      for (int64_t i = 0; i < batch * seq; ++i) b.tokens.push_back(int32_t(gen() % uint64_t(cfg.vocab)));
      b.labels.assign(b.tokens.begin() + 1, b.tokens.end());
      b.labels.push_back(dpt::kIgnoreLabel);
      return b;
    };
    double gemm_flops = 0, best_round = 0;
    dpt::GemmRecorder rec;
    std::unique_ptr<dpt::GemmReplay> replay;
    if (measure_gemm) {
      rec = dpt::record_step_gemms(*model, make_batch());
      gemm_flops = rec.total_flops();
      replay = std::make_unique<dpt::GemmReplay>(rec);  // scratch allocated (and touched) once
      const dpt::GemmPrecisionScope as_in_the_step(model->gemm_precision());
      replay->run_round();                              // warm-up
    }
    std::vector<double> ratios;  // sgemm round time / step time, per timed step
    double t_zero = 0, t_fwd = 0, t_loss = 0, t_bwd = 0, t_opt = 0, total = 0, best = 0;
    double c_zero = 0, c_fwd = 0, c_loss = 0, c_bwd = 0, c_opt = 0, c_total = 0;
    dpt::GemmClock in_step;  // the timed steps' GEMMs
    for (int64_t s = 0; s < warmup + steps; ++s) {
      const dpt::Batch b = make_batch();
      dpt::GemmClock step_gemms;
      const auto t0 = Clock::now();
      const double c0 = process_cpu_seconds();
      model->zero_grad();
      const auto t1 = Clock::now();
      const double c1 = process_cpu_seconds();
      float loss = 0;
      {
        const dpt::GemmClockScope timed(step_gemms);
        model->forward(dpt::model_input(b), true);
      }
      const auto t2 = Clock::now();
      const double c2 = process_cpu_seconds();
      loss = model->loss(dpt::model_target(b));
      const auto t3 = Clock::now();
      const double c3 = process_cpu_seconds();
      {
        const dpt::GemmClockScope timed(step_gemms);
        model->backward();
      }
      const auto t4 = Clock::now();
      const double c4 = process_cpu_seconds();
      adam->step(model->flat_params(), model->flat_grads(), lr);
      const auto t5 = Clock::now();
      const double c5 = process_cpu_seconds();
      auto sec = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
      std::fprintf(stderr, "step %lld loss %.4f %.3f s (cpu %.3f s, GEMMs %.3f s)\n", (long long)s, loss,
                   sec(t0, t5), c5 - c0, step_gemms.wall_seconds);
      if (s < warmup) continue;
      t_zero += sec(t0, t1), t_fwd += sec(t1, t2), t_loss += sec(t2, t3), t_bwd += sec(t3, t4), t_opt += sec(t4, t5);
      c_zero += c1 - c0, c_fwd += c2 - c1, c_loss += c3 - c2, c_bwd += c4 - c3, c_opt += c5 - c4;
      c_total += c5 - c0;
      in_step.wall_seconds += step_gemms.wall_seconds, in_step.cpu_seconds += step_gemms.cpu_seconds;
      in_step.flops += step_gemms.flops, in_step.calls += step_gemms.calls;
      total += sec(t0, t5);
      if (best == 0 || sec(t0, t5) < best) best = sec(t0, t5);
      if (measure_gemm) {
        // The replay's products run as the step's (bf16: its conversions on oneDNN's threads).
        const dpt::GemmPrecisionScope as_in_the_step(model->gemm_precision());
        const double round = replay->run_round();
        ratios.push_back(round / sec(t0, t5));
        std::fprintf(stderr, "  sgemm replay of the step's GEMMs %.3f s (ratio %.3f)\n", round, ratios.back());
        if (best_round == 0 || round < best_round) best_round = round;
      }
    }
    struct rusage ru {};  // peak RSS, the sgemm replay's scratch included
    getrusage(RUSAGE_SELF, &ru);
    std::sort(ratios.begin(), ratios.end());
    const double gemm_ratio = ratios.empty() ? 0.0 : ratios[ratios.size() / 2];
    const double sgemm_gflops = best_round > 0 ? gemm_flops / best_round / 1e9 : 0.0;
    const double n = double(steps), step_s = total / n;
    const double tokens_per_s = double(batch * seq) / step_s;
    const double achieved = gemm_flops / step_s / 1e9;
    std::printf("phase ms/step: zero_grad %.1f | forward %.1f | loss %.1f | backward %.1f | adam %.1f | total %.1f\n",
                1e3 * t_zero / n, 1e3 * t_fwd / n, 1e3 * t_loss / n, 1e3 * t_bwd / n, 1e3 * t_opt / n, 1e3 * step_s);
    std::printf("phase cpu ms/step: zero_grad %.1f | forward %.1f | loss %.1f | backward %.1f | adam %.1f | total "
                "%.1f | of which GEMMs %.1f (%lld calls), non-GEMM forward+backward %.1f\n",
                1e3 * c_zero / n, 1e3 * c_fwd / n, 1e3 * c_loss / n, 1e3 * c_bwd / n, 1e3 * c_opt / n,
                1e3 * c_total / n, 1e3 * in_step.cpu_seconds / n, (long long)(double(in_step.calls) / n),
                1e3 * (c_fwd + c_bwd - in_step.cpu_seconds) / n);
    const double cpu_tokens_per_s = double(batch * seq) / (c_total / n);
    const double gemm_gflops = in_step.wall_seconds > 0 ? in_step.flops / in_step.wall_seconds / 1e9 : 0.0;
    const double gemm_cpu_gflops = in_step.cpu_seconds > 0 ? in_step.flops / in_step.cpu_seconds / 1e9 : 0.0;
    const double best_achieved = gemm_flops / best / 1e9;
    const double states = 16.0 * double(model->num_params());
    const double held_peak = double(dpt::host_floats_bytes().peak);
    std::printf("memory MiB: model states (16 B/param) %.0f | activations and buffers %.0f | sum %.0f | peak RSS %.0f\n",
                states / 1048576, (held_peak - states) / 1048576, held_peak / 1048576, double(ru.ru_maxrss) / 1024.0);
    std::printf("result size=%s params=%zu batch=%lld seq=%lld tokens_per_s=%.1f best_tokens_per_s=%.1f step_ms=%.1f "
                "gemm_gflop_per_step=%.2f achieved_gflops=%.2f best_achieved_gflops=%.2f sgemm_gflops=%.2f "
                "gemm_ratio=%.3f best_gemm_ratio=%.3f peak_rss_mb=%.0f states_mb=%.0f activations_mb=%.0f "
                "cpu_tokens_per_s=%.1f step_gemm_gflops=%.2f step_gemm_cpu_gflops=%.2f\n",
                size.c_str(), model->num_params(), (long long)batch, (long long)seq, tokens_per_s,
                double(batch * seq) / best, 1e3 * step_s, gemm_flops / 1e9, achieved, best_achieved, sgemm_gflops,
                gemm_ratio, sgemm_gflops > 0 ? best_achieved / sgemm_gflops : 0.0,
                double(ru.ru_maxrss) / 1024.0, states / 1048576, (held_peak - states) / 1048576, cpu_tokens_per_s,
                gemm_gflops, gemm_cpu_gflops);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "gpt2_step: error: " << e.what() << "\n";
    return 1;
  }
}
