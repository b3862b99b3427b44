// Models on CUDA against the same models on the CPU: identical parameters and inputs,
// then forward, loss and backward on both; outputs, loss and every gradient must agree
// to float32 rounding (relative error ||cuda - cpu|| / ||cpu||). [cuda] cases need a
// GPU: the binary's main exits 77 (CTest: skipped) without one when run with [cuda].
// [cuda_errors] cases run everywhere: the refusals a user sees without a GPU or with a
// model that has no CUDA path.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <tuple>
#include <vector>

#include "device/runtime.h"
#include "models/kernels/cpu/bf16.h"
#include "models/kernels/cpu/f16_round.h"
#include "models/kernels/cuda/gpu_ops.h"
#include "models/nn/layers/attention.h"
#include "models/nn/layers/linear.h"
#include "models/nn/loss.h"
#include "models/zoo/models.h"
#include "models/nn/param_store.h"
#include "models/nn/token_groups.h"
#include "models_test_util.h"

using namespace dpt;

namespace {

ModelConfig small_gpt() {
  ModelConfig cfg;
  cfg.vocab = 61;       // odd sizes: no kernel may rely on multiples of 32
  cfg.seq_len = 37;
  cfg.d_model = 48;
  cfg.n_layer = 2;
  cfg.n_head = 3;
  return cfg;
}

double rel_error(std::span<const float> got, std::span<const float> want) {
  double d2 = 0, w2 = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    d2 += double(got[i] - want[i]) * (got[i] - want[i]);
    w2 += double(want[i]) * want[i];
  }
  return w2 > 0 ? std::sqrt(d2 / w2) : std::sqrt(d2);
}

struct Batch {
  std::vector<float> x;
  std::vector<int32_t> tokens, labels;
  std::vector<float> values;
  ModelInput in;
  ModelTarget target;
};

Batch make_batch(const Module& m, int64_t n, uint64_t seed) {
  Batch b;
  std::mt19937_64 gen(seed);
  b.in.n = n;
  b.in.sample_shape = m.sample_shape();
  const size_t per = shape_numel(m.sample_shape());
  if (m.takes_tokens()) {
    std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(small_gpt().vocab - 1));
    for (size_t i = 0; i < n * per; ++i) b.tokens.push_back(tok(gen));
    for (size_t i = 0; i < n * per; ++i) b.labels.push_back(tok(gen));
    b.in.tokens = b.tokens.data();
    b.target.labels = b.labels.data();
  } else {
    b.x.resize(n * per);
    testing::fill_random(b.x, seed);
    b.in.x = b.x.data();
    if (m.loss_fn().name() == "mse") {
      b.values.resize(n * 5);
      testing::fill_random(b.values, seed + 1);
      b.target.values = b.values.data();
    } else {
      std::uniform_int_distribution<int32_t> cls(0, 9);
      for (int64_t i = 0; i < n; ++i) b.labels.push_back(cls(gen));
      b.target.labels = b.labels.data();
    }
  }
  return b;
}

// One training step of m with every product it runs recorded in rec.
float recorded_step(Module& m, const Batch& b, GemmRecorder& rec) {
  GemmRecordScope scope(rec);
  return m.train_step(b.in, b.target);
}

}  // namespace

TEST_CASE("models on cuda compute what they compute on the cpu", "[cuda]") {
  for (const std::string name : {"toy", "mlp", "gpt", "cnn", "resnet18"}) {
    DYNAMIC_SECTION(name) {
      const ModelConfig cfg = name == "gpt" ? small_gpt() : ModelConfig{};
      // cuDNN's algorithms (FFT, Winograd, implicit GEMM) sum in other orders than the
      // host's im2col GEMMs, and BatchNorm divides by small batch deviations: a looser
      // bound for the convolutional models, still far below a wrong kernel's error.
      const bool conv = name == "cnn" || name == "resnet18";
      const double out_tol = conv ? 1e-4 : 1e-5, grad_tol = conv ? 1e-3 : 1e-4;
      auto cpu = make_model(name, cfg);
      auto gpu = make_model(name, cfg);
      gpu->to_cuda(0);
      REQUIRE(gpu->on_cuda());
      // Two micro-batches accumulate: the device gradients must add up like the host's.
      for (int micro = 0; micro < 2; ++micro) {
        Batch b = make_batch(*cpu, name == "gpt" ? 5 : 7, 100 + micro);
        // The outputs before the loss: a training loss writes its gradient over them.
        const Tensor& out_cpu = cpu->forward(b.in, true);
        gpu->forward(b.in, true);
        const Tensor& out_gpu = gpu->host_output();
        REQUIRE(out_gpu.numel() == out_cpu.numel());
        CHECK(rel_error(out_gpu.span(), out_cpu.span()) < out_tol);
        const float l_cpu = cpu->loss(b.target, 0.5f);
        const float l_gpu = gpu->loss(b.target, 0.5f);
        INFO("micro-batch " << micro << ": loss cpu " << l_cpu << " cuda " << l_gpu);
        CHECK(std::abs(l_gpu - l_cpu) <= out_tol * std::max(1.0f, std::abs(l_cpu)));
        cpu->backward();
        gpu->backward();
      }
      // Every gradient reached the host buffer when it became final (on_grad_ready).
      for (const ParamInfo& p : cpu->param_infos()) {
        INFO(p.name);
        CHECK(rel_error(gpu->store().grad_span(p.index), cpu->store().grad_span(p.index)) < grad_tol);
      }
      // A parameter change on the host reaches the device at the next forward.
      for (Module* m : {cpu.get(), gpu.get()}) {
        auto params = m->flat_params();
        for (size_t i = 0; i < params.size(); i += 3) params[i] *= 0.5f;
        m->zero_grad();
      }
      Batch b = make_batch(*cpu, 3, 7);
      const float l_cpu = cpu->train_step(b.in, b.target);
      const float l_gpu = gpu->train_step(b.in, b.target);
      CHECK(std::abs(l_gpu - l_cpu) <= out_tol * std::max(1.0f, std::abs(l_cpu)));
      CHECK(rel_error(gpu->flat_grads(), cpu->flat_grads()) < grad_tol);
    }
  }
}

// ResNet-18 on the GPU (cuDNN convolutions, BatchNorm, max and average pooling): after
// training steps the running statistics (updated by kernels on the store's device copy
// of the buffers, read here through a host view that downloads them) equal the CPU's, and an evaluation forward (running statistics) gives the CPU's
// output; with the imagenet stem the 3x3 stride-2 max pool runs too.
TEST_CASE("resnet18 on cuda keeps the cpu's running statistics and evaluates alike", "[cuda]") {
  for (const bool imagenet : {false, true}) {
    DYNAMIC_SECTION((imagenet ? "imagenet stem" : "cifar stem")) {
      ModelConfig cfg;
      cfg.resnet_stem = imagenet ? "imagenet" : "cifar";
      auto cpu = make_model("resnet18", cfg);
      auto gpu = make_model("resnet18", cfg);
      gpu->to_cuda(0);
      for (int step = 0; step < 2; ++step) {
        Batch b = make_batch(*cpu, 6, 70 + step);
        cpu->zero_grad();
        gpu->zero_grad();
        const float l_cpu = cpu->train_step(b.in, b.target);
        const float l_gpu = gpu->train_step(b.in, b.target);
        INFO("step " << step << ": loss cpu " << l_cpu << " cuda " << l_gpu);
        CHECK(std::abs(l_gpu - l_cpu) <= 1e-4 * std::abs(l_cpu));
        CHECK(rel_error(gpu->flat_grads(), cpu->flat_grads()) < 1e-3);
      }
      CHECK(rel_error(gpu->store().flat_buffers(), cpu->store().flat_buffers()) < 1e-5);
      Batch e = make_batch(*cpu, 4, 99);
      cpu->forward(e.in, false);
      gpu->forward(e.in, false);
      CHECK(rel_error(gpu->host_output().span(), cpu->output().span()) < 1e-4);
    }
  }
}

// fp16 compute on CUDA: the rounding kernel gives the CPU emulation's values, so the two
// differ only where fp32 sums in another order land on the other side of an fp16 rounding
// boundary (a half ulp, 2^-11 relative, on a few values); a GPU that did not round would
// differ by the rounding of every activation instead, and the ResNet's BatchNorm and
// convolutions take the same path.
TEST_CASE("fp16 compute on cuda tracks the cpu's fp16 emulation", "[cuda]") {
  for (const std::string name : {"gpt", "resnet18"}) {
    DYNAMIC_SECTION(name) {
      const ModelConfig cfg = name == "gpt" ? small_gpt() : ModelConfig{};
      auto cpu = make_model(name, cfg);
      auto gpu = make_model(name, cfg);
      auto cpu32 = make_model(name, cfg);
      gpu->to_cuda(0);
      cpu->set_compute_precision(ComputePrecision::kF16);
      gpu->set_compute_precision(ComputePrecision::kF16);
      Batch b = make_batch(*cpu, 4, 55);
      const float l_cpu = cpu->train_step(b.in, b.target);
      const float l_gpu = gpu->train_step(b.in, b.target);
      const float l_32 = cpu32->train_step(b.in, b.target);
      INFO("loss fp16 cpu " << l_cpu << " fp16 cuda " << l_gpu << " fp32 cpu " << l_32);
      CHECK(std::abs(l_gpu - l_cpu) <= 2e-3 * std::abs(l_cpu));
      CHECK(l_cpu != l_32);  // the emulation rounds at all
      CHECK(rel_error(gpu->flat_grads(), cpu->flat_grads()) < 2e-2);
    }
  }
}

TEST_CASE("attention and layer norm agree at a longer sequence", "[cuda]") {
  ModelConfig cfg = small_gpt();
  cfg.seq_len = 130;  // rows longer than a warp's stride several times over
  cfg.d_model = 96;
  cfg.n_head = 4;
  auto cpu = make_model("gpt", cfg);
  auto gpu = make_model("gpt", cfg);
  gpu->to_cuda(0);
  Batch b = make_batch(*cpu, 2, 5);
  const float l_cpu = cpu->train_step(b.in, b.target);
  const float l_gpu = gpu->train_step(b.in, b.target);
  CHECK(std::abs(l_gpu - l_cpu) <= 1e-5 * std::abs(l_cpu));
  CHECK(rel_error(gpu->flat_grads(), cpu->flat_grads()) < 1e-4);
}

// The fused attention kernels (gpu::attention_forward/backward) against the CPU and against
// the materialized cuBLAS path, at head widths that take each kernel width (16 -> 32,
// 64, 80 -> 128) and sequences over several 64-row tiles with a partial last one. Fused,
// no product forms the T x T scores (the recorder sees none of shape T x T x hd), and a
// second run gives the same bits (no atomics anywhere in a GPT step).
TEST_CASE("fused attention on cuda matches the cpu and the materialized path", "[cuda]") {
  struct Shape { int d, heads, t; };
  for (const Shape sh : {Shape{48, 3, 37}, Shape{128, 2, 200}, Shape{160, 2, 70}}) {
    DYNAMIC_SECTION("d " << sh.d << " heads " << sh.heads << " T " << sh.t) {
      ModelConfig cfg = small_gpt();
      cfg.d_model = sh.d;
      cfg.n_head = sh.heads;
      cfg.seq_len = sh.t;
      auto cpu = make_model("gpt", cfg);
      Batch b = make_batch(*cpu, 3, 77);
      const float l_cpu = cpu->train_step(b.in, b.target);
      const int hd = sh.d / sh.heads;
      for (const CudaAttention kind : {CudaAttention::fused, CudaAttention::materialized}) {
        const bool fused = kind == CudaAttention::fused;
        INFO((fused ? "fused" : "materialized"));
        set_cuda_attention(kind);
        auto gpu = make_model("gpt", cfg);
        gpu->to_cuda(0);
        GemmRecorder rec;
        const float l_gpu = recorded_step(*gpu, b, rec);
        INFO("loss cpu " << l_cpu << " cuda " << l_gpu);
        CHECK(std::abs(l_gpu - l_cpu) <= 1e-5 * std::abs(l_cpu));
        CHECK(rel_error(gpu->flat_grads(), cpu->flat_grads()) < 1e-4);
        int64_t score_products = 0;
        for (const auto& [shape, count] : rec.calls())
          if (shape.m == sh.t && shape.n == sh.t && shape.k == hd) score_products += count;
        if (fused) {
          CHECK(score_products == 0);
          const std::vector<float> first(gpu->flat_grads().begin(), gpu->flat_grads().end());
          gpu->zero_grad();
          CHECK(gpu->train_step(b.in, b.target) == l_gpu);
          CHECK(std::vector<float>(gpu->flat_grads().begin(), gpu->flat_grads().end()) == first);
        } else {
          CHECK(score_products > 0);
        }
      }
      set_cuda_attention(CudaAttention::fused);
    }
  }
}

// The tensor-core attention (bf16 / fp16 operands, head widths up to 64) inside a GPT at
// that precision: losses within the 16-bit bound of the fp32 CPU model, no T x T product,
// the same bits on a second step.
TEST_CASE("fused tensor-core attention on cuda tracks the cpu and repeats its bits", "[cuda]") {
  ModelConfig cfg = small_gpt();
  cfg.d_model = 128;
  cfg.n_head = 2;  // hd 64: the width the tensor-core tiles hold
  cfg.seq_len = 150;
  auto cpu = make_model("gpt", cfg);
  Batch b = make_batch(*cpu, 2, 78);
  const float l_cpu = cpu->train_step(b.in, b.target);
  for (const GemmPrecision prec : {GemmPrecision::bf16, GemmPrecision::f16}) {
    DYNAMIC_SECTION(gemm_precision_name(prec)) {
      auto gpu = make_model("gpt", cfg);
      gpu->to_cuda(0);
      gpu->set_gemm_precision(prec);
      GemmRecorder rec;
      const float l_gpu = recorded_step(*gpu, b, rec);
      INFO("loss cpu fp32 " << l_cpu << " cuda " << l_gpu);
      CHECK(std::abs(l_gpu - l_cpu) <= 2e-2 * std::abs(l_cpu));
      CHECK(rel_error(gpu->flat_grads(), cpu->flat_grads()) < 5e-2);
      for (const auto& [shape, count] : rec.calls()) CHECK_FALSE((shape.m == cfg.seq_len && shape.n == cfg.seq_len));
      const std::vector<float> first(gpu->flat_grads().begin(), gpu->flat_grads().end());
      gpu->zero_grad();
      CHECK(gpu->train_step(b.in, b.target) == l_gpu);
      CHECK(std::vector<float>(gpu->flat_grads().begin(), gpu->flat_grads().end()) == first);
    }
  }
}

// gpt2: Conv1D layouts, dropout 0.1 (the CPU's counter-based masks, computed again by the
// kernels: the dropout kernel, and for the attention probabilities the fused kernels on
// the fly or the dropout kernel over the materialized [B, H, T, T]) and ignored labels
// (-100) must give the CPU's numbers too. Fused, no T x T product is formed.
TEST_CASE("gpt2 with dropout and ignored labels agrees with the cpu", "[cuda]") {
  ModelConfig cfg = small_gpt();
  cfg.n_positions = 64;
  cfg.dropout = 0.1f;
  for (const CudaAttention kind : {CudaAttention::fused, CudaAttention::materialized}) {
    const bool fused = kind == CudaAttention::fused;
    DYNAMIC_SECTION((fused ? "fused attention" : "materialized attention")) {
      set_cuda_attention(kind);
      auto cpu = make_model("gpt2", cfg);
      auto gpu = make_model("gpt2", cfg);
      gpu->to_cuda(0);
      for (int step = 0; step < 2; ++step) {  // two steps: the second draws other masks
        Batch b = make_batch(*cpu, 3, 40 + step);
        for (size_t i = 0; i < b.labels.size(); i += 4) b.labels[i] = -100;
        cpu->zero_grad();
        gpu->zero_grad();
        const float l_cpu = cpu->train_step(b.in, b.target);
        GemmRecorder rec;
        const float l_gpu = recorded_step(*gpu, b, rec);
        INFO("step " << step << ": loss cpu " << l_cpu << " cuda " << l_gpu);
        CHECK(std::abs(l_gpu - l_cpu) <= 1e-5 * std::abs(l_cpu));
        CHECK(rel_error(gpu->flat_grads(), cpu->flat_grads()) < 1e-4);
        const int64_t t = b.in.sample_shape.back();
        int64_t score_products = 0;
        for (const auto& [shape, count] : rec.calls())
          if (shape.m == t && shape.n == t && shape.k == cfg.d_model / cfg.n_head) score_products += count;
        CHECK((score_products == 0) == fused);
      }
      set_cuda_attention(CudaAttention::fused);
    }
  }
}

// Tensor-core products (gpu::gemm_bf16, cuBLASLt): each result within fp32 accumulation's
// bound of a float64 product of the bf16-rounded operands. An operand left unrounded or
// run as TF32 misses by ~2^-9 of sum |a b|, far outside (k + 2) 2^-23 of it; a wrong
// transpose, leading dimension or batch stride misses by the whole value.
const Device kGpu0{DeviceKind::cuda, 0};

// fp16 products (gpu::gemm_f16) meet the same bound over fp16-rounded operands (a product
// of two fp16 values is exact in fp32 as one of two bf16 values is).
TEST_CASE("bf16 and fp16 products on cuda match float64 over rounded operands", "[cuda]") {
  struct Case { bool ta, tb; int m, n, k, pad, batch; float alpha, beta; };
  for (const bool f16 : {false, true})
  for (const Case c : {Case{false, false, 37, 29, 61, 0, 1, 1.0f, 0.0f}, Case{true, false, 33, 70, 45, 3, 1, 0.5f, 1.0f},
                       Case{false, true, 64, 48, 128, 5, 3, 1.0f, 0.0f}, Case{true, true, 17, 9, 300, 1, 4, -2.0f, 0.25f}}) {
    DYNAMIC_SECTION((f16 ? "fp16" : "bf16") << " ta " << c.ta << " tb " << c.tb << " m " << c.m << " n " << c.n
                                            << " k " << c.k << " batch " << c.batch) {
      // Stored row-major with a padded leading dimension, batch members a stride apart.
      const int a_rows = c.ta ? c.k : c.m, a_cols = c.ta ? c.m : c.k, lda = a_cols + c.pad;
      const int b_rows = c.tb ? c.n : c.k, b_cols = c.tb ? c.k : c.n, ldb = b_cols + c.pad;
      const int ldc = c.n + c.pad;
      const int64_t sa = int64_t(a_rows) * lda + 7, sb = int64_t(b_rows) * ldb + 5, sc = int64_t(c.m) * ldc + 3;
      std::vector<float> a(size_t(sa * c.batch)), b(size_t(sb * c.batch)), c0(size_t(sc * c.batch));
      testing::fill_random(a, 11);
      testing::fill_random(b, 12);
      testing::fill_random(c0, 13);
      device::DeviceMemory da(kGpu0, a.size() * 4), db(kGpu0, b.size() * 4),
          dc(kGpu0, c0.size() * 4);
      device::set_current(kGpu0);
      device::copy(da.data(), a.data(), a.size() * 4);
      device::copy(db.data(), b.data(), b.size() * 4);
      device::copy(dc.data(), c0.data(), c0.size() * 4);
      auto* pa = static_cast<float*>(da.data());
      auto* pb = static_cast<float*>(db.data());
      auto* pc = static_cast<float*>(dc.data());
      if (c.batch == 1)
        (f16 ? gpu::gemm_f16 : gpu::gemm_bf16)(c.ta, c.tb, c.m, c.n, c.k, c.alpha, pa, lda, pb, ldb, c.beta, pc, ldc);
      else
        (f16 ? gpu::gemm_f16_batched : gpu::gemm_bf16_batched)(c.ta, c.tb, c.m, c.n, c.k, c.alpha, pa, lda, sa, pb,
                                                               ldb, sb, c.beta, pc, ldc, sc, c.batch);
      std::vector<float> got(c0.size());
      device::copy(got.data(), pc, got.size() * 4);
      auto r16 = [f16](float v) {
        if (!f16) return double(bf16_value(bf16_bits(v)));
        round_to_f16(&v, 1);
        return double(v);
      };
      int bad = 0;
      for (int i = 0; i < c.batch; ++i)
        for (int r = 0; r < c.m; ++r)
          for (int col = 0; col < c.n; ++col) {
            double want = 0, mag = 0;
            for (int x = 0; x < c.k; ++x) {
              const double av = r16(a[size_t(i * sa + (c.ta ? int64_t(x) * lda + r : int64_t(r) * lda + x))]);
              const double bv = r16(b[size_t(i * sb + (c.tb ? int64_t(col) * ldb + x : int64_t(x) * ldb + col))]);
              want += av * bv;
              mag += std::abs(av * bv);
            }
            const double cin = c0[size_t(i * sc + int64_t(r) * ldc + col)];
            want = c.alpha * want + c.beta * cin;
            const double bound = (c.k + 2) * std::ldexp(std::abs(c.alpha) * mag, -23) +
                                 std::ldexp(std::abs(c.beta * cin), -22) + 1e-30;
            const double g = got[size_t(i * sc + int64_t(r) * ldc + col)];
            if (!(std::abs(g - want) <= bound) && bad++ < 5)
              FAIL_CHECK("member " << i << " (" << r << ", " << col << "): " << g << " want " << want << " bound "
                                   << bound);
          }
      CHECK(bad == 0);
      // Padding between rows and members is C's own: untouched.
      for (int i = 0; i < c.batch; ++i)
        for (int r = 0; r < c.m; ++r)
          for (int col = c.n; col < ldc && r * ldc + col < sc; ++col)
            CHECK(got[size_t(i * sc + int64_t(r) * ldc + col)] == c0[size_t(i * sc + int64_t(r) * ldc + col)]);
    }
  }
}

// The embedding backward without atomics (gpu::embedding_backward over TokenGroups):
// every table and position row adds its dy rows in position order onto what the gradient
// held, as the host loop does, so the result is the host loop's bits, run after run. An
// atomic scatter, or groups in another order, differs in the last bits of repeated ids.
TEST_CASE("the embedding backward on cuda gives the host loop's bits", "[cuda]") {
  const int vocab = 97, samples = 6, t = 41, d = 300, count = samples * t;  // d: more than one block of channels
  std::vector<int32_t> tokens(static_cast<size_t>(count));
  std::mt19937 gen(8);
  std::geometric_distribution<int32_t> skew(0.1);  // some ids repeat dozens of times
  for (auto& id : tokens) id = skew(gen) % vocab;
  std::vector<float> dy(size_t(count) * d), table0(size_t(vocab) * d), pos0(size_t(t) * d);
  testing::fill_random(dy, 31);
  testing::fill_random(table0, 32);  // accumulates onto an earlier micro-batch's gradient
  testing::fill_random(pos0, 33);
  std::vector<float> want_table = table0, want_pos = pos0;
  for (int i = 0; i < count; ++i)
    for (int c = 0; c < d; ++c) {
      want_pos[size_t(i % t) * d + c] += dy[size_t(i) * d + c];
      want_table[size_t(tokens[size_t(i)]) * d + c] += dy[size_t(i) * d + c];
    }
  TokenGroups groups;
  groups.build(tokens, vocab);
  device::set_current(kGpu0);
  device::DeviceMemory g_dev(kGpu0, groups.words().size() * 4), dy_dev(kGpu0, dy.size() * 4),
      table_dev(kGpu0, table0.size() * 4), pos_dev(kGpu0, pos0.size() * 4);
  device::copy(g_dev.data(), groups.words().data(), groups.words().size() * 4);
  device::copy(dy_dev.data(), dy.data(), dy.size() * 4);
  for (int run = 0; run < 2; ++run) {
    device::copy(table_dev.data(), table0.data(), table0.size() * 4);
    device::copy(pos_dev.data(), pos0.data(), pos0.size() * 4);
    gpu::embedding_backward(static_cast<const int32_t*>(g_dev.data()), groups.distinct(),
                            static_cast<const float*>(dy_dev.data()), static_cast<float*>(table_dev.data()),
                            static_cast<float*>(pos_dev.data()), count, t, d);
    std::vector<float> got_table(table0.size()), got_pos(pos0.size());
    device::copy(got_table.data(), table_dev.data(), got_table.size() * 4);
    device::copy(got_pos.data(), pos_dev.data(), got_pos.size() * 4);
    INFO("run " << run);
    CHECK(got_table == want_table);
    CHECK(got_pos == want_pos);
  }
}

// --precision bf16 on CUDA: every product of a GPT on tensor cores. Its loss and
// gradients must stay within bf16's reach of the fp32 CPU model (operands keep 8 bits,
// so products are off by ~2^-9 relative; summed over a step, a few 1e-3), and the
// recorder must see every product as bf16.
TEST_CASE("a gpt at bf16 on cuda tracks the fp32 cpu model", "[cuda]") {
  auto cpu = make_model("gpt", small_gpt());
  auto gpu = make_model("gpt", small_gpt());
  gpu->to_cuda(0);
  gpu->set_gemm_precision(GemmPrecision::bf16);
  Batch b = make_batch(*cpu, 5, 21);
  const float l_cpu = cpu->train_step(b.in, b.target);
  GemmRecorder rec;
  const float l_gpu = recorded_step(*gpu, b, rec);
  INFO("loss cpu fp32 " << l_cpu << " cuda bf16 " << l_gpu);
  CHECK(std::abs(l_gpu - l_cpu) <= 2e-2 * std::abs(l_cpu));
  CHECK(std::abs(l_gpu - l_cpu) > 0.0f);  // the products did run in bf16
  const double err = rel_error(gpu->flat_grads(), cpu->flat_grads());
  INFO("gradient relative error " << err);
  CHECK(err < 5e-2);
  CHECK(err > 1e-6);
  REQUIRE_FALSE(rec.calls().empty());
  for (const auto& [shape, count] : rec.calls()) CHECK(shape.bf16);
}

// --precision fp16 on CUDA: fp16 compute (rounded activations) and every product on fp16
// tensor cores. Against the CPU's fp16 emulation (fp32 products on the rounded values) the
// difference is the rounding of the operands the emulation leaves in fp32 (weights here,
// attention's scores and probabilities): fp16's 2^-11, summed over a step a few 1e-3; the
// recorder must see every product as fp16.
TEST_CASE("a gpt with fp16 products on cuda tracks the cpu's fp16 emulation", "[cuda]") {
  auto cpu = make_model("gpt", small_gpt());
  auto gpu = make_model("gpt", small_gpt());
  gpu->to_cuda(0);
  cpu->set_compute_precision(ComputePrecision::kF16);
  gpu->set_compute_precision(ComputePrecision::kF16);
  gpu->set_gemm_precision(GemmPrecision::f16);
  Batch b = make_batch(*cpu, 5, 23);
  const float l_cpu = cpu->train_step(b.in, b.target);
  GemmRecorder rec;
  const float l_gpu = recorded_step(*gpu, b, rec);
  INFO("loss cpu fp16 emulation " << l_cpu << " cuda fp16 products " << l_gpu);
  CHECK(std::abs(l_gpu - l_cpu) <= 1e-2 * std::abs(l_cpu));
  const double err = rel_error(gpu->flat_grads(), cpu->flat_grads());
  INFO("gradient relative error " << err);
  CHECK(err < 5e-2);
  REQUIRE_FALSE(rec.calls().empty());
  for (const auto& [shape, count] : rec.calls()) CHECK((shape.f16 && !shape.bf16));
}

// 16-bit convolutions (gpu::conv2d_* with ConvType::bf16 / f16, cuDNN on tensor cores)
// against a float64 direct convolution of the rounded operands, all three passes: each
// result within the rounding of a 16-bit result (u |want|, u = 2^-8 bf16, 2^-11 fp16) plus
// two 16-bit roundings of sum |terms| (room for the intermediate rounding of a Winograd
// or FFT algorithm) and fp16's subnormal spacing. A wrong layout, stride, padding or
// accumulation misses by the size of the values themselves; dw must add onto what it held.
TEST_CASE("16-bit convolutions on cuda match float64 over rounded operands", "[cuda]") {
  for (const gpu::ConvType type : {gpu::ConvType::bf16, gpu::ConvType::f16}) {
    const bool f16 = type == gpu::ConvType::f16;
    const double u = f16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
    auto r16 = [f16](float v) {
      if (!f16) return double(bf16_value(bf16_bits(v)));
      round_to_f16(&v, 1);
      return double(v);
    };
    for (const auto& [k, stride, pad] : {std::tuple{3, 1, 1}, std::tuple{3, 2, 1}, std::tuple{1, 2, 0}}) {
      DYNAMIC_SECTION((f16 ? "fp16" : "bf16") << " k " << k << " stride " << stride << " pad " << pad) {
        gpu::ConvShape s{3, 16, 9, 9, 24, k, stride, pad, 0, 0, type};
        s.oh = (s.h + 2 * pad - k) / stride + 1;
        s.ow = (s.w + 2 * pad - k) / stride + 1;
        const size_t nx = size_t(s.n) * s.c * s.h * s.w, nw = size_t(s.oc) * s.c * k * k,
                     ny = size_t(s.n) * s.oc * s.oh * s.ow;
        std::vector<float> x(nx), w(nw), dy(ny), dw0(nw);
        testing::fill_random(x, 41);
        testing::fill_random(w, 42);
        testing::fill_random(dy, 43);
        testing::fill_random(dw0, 44);
        device::set_current(kGpu0);
        device::DeviceMemory dx_d(kGpu0, nx * 4), dw_d(kGpu0, nw * 4), dy_d(kGpu0, ny * 4), x_d(kGpu0, nx * 4),
            w_d(kGpu0, nw * 4), y_d(kGpu0, ny * 4);
        device::copy(x_d.data(), x.data(), nx * 4);
        device::copy(w_d.data(), w.data(), nw * 4);
        device::copy(dy_d.data(), dy.data(), ny * 4);
        device::copy(dw_d.data(), dw0.data(), nw * 4);
        auto* xp = static_cast<float*>(x_d.data());
        auto* wp = static_cast<float*>(w_d.data());
        auto* dyp = static_cast<float*>(dy_d.data());
        gpu::conv2d_forward(s, xp, wp, static_cast<float*>(y_d.data()));
        gpu::conv2d_backward_data(s, wp, dyp, static_cast<float*>(dx_d.data()));
        gpu::conv2d_backward_filter(s, xp, dyp, static_cast<float*>(dw_d.data()));
        std::vector<float> y(ny), dx(nx), dw(nw);
        device::copy(y.data(), y_d.data(), ny * 4);
        device::copy(dx.data(), dx_d.data(), nx * 4);
        device::copy(dw.data(), dw_d.data(), nw * 4);
        // Exact (float64) sums of the rounded operands, with sum |term| beside each.
        std::vector<double> want_y(ny), mag_y(ny), want_dx(nx), mag_dx(nx), want_dw(nw), mag_dw(nw);
        for (int n = 0; n < s.n; ++n)
          for (int o = 0; o < s.oc; ++o)
            for (int i = 0; i < s.oh; ++i)
              for (int j = 0; j < s.ow; ++j)
                for (int c = 0; c < s.c; ++c)
                  for (int a = 0; a < k; ++a)
                    for (int b = 0; b < k; ++b) {
                      const int hi = i * stride - pad + a, wj = j * stride - pad + b;
                      if (hi < 0 || hi >= s.h || wj < 0 || wj >= s.w) continue;
                      const size_t xi = ((size_t(n) * s.c + c) * s.h + hi) * s.w + wj;
                      const size_t wi = ((size_t(o) * s.c + c) * k + a) * k + b;
                      const size_t yi = ((size_t(n) * s.oc + o) * s.oh + i) * s.ow + j;
                      const double xv = r16(x[xi]), wv = r16(w[wi]), gv = r16(dy[yi]);
                      want_y[yi] += xv * wv, mag_y[yi] += std::abs(xv * wv);
                      want_dx[xi] += wv * gv, mag_dx[xi] += std::abs(wv * gv);
                      want_dw[wi] += xv * gv, mag_dw[wi] += std::abs(xv * gv);
                    }
        auto count_bad = [&](const char* what, const std::vector<float>& got, const std::vector<double>& want,
                             const std::vector<double>& mag, const std::vector<float>* base) {
          int bad = 0;
          for (size_t i = 0; i < got.size(); ++i) {
            const double b0 = base ? (*base)[i] : 0.0;
            const double bound = u * std::abs(want[i]) + 2 * u * mag[i] + std::ldexp(1.0, -24) +
                                 std::ldexp(std::abs(b0), -23);
            if (!(std::abs(got[i] - (b0 + want[i])) <= bound) && bad++ < 3)
              FAIL_CHECK(what << "[" << i << "] = " << got[i] << ", want " << b0 + want[i] << " within " << bound);
          }
          return bad;
        };
        CHECK(count_bad("y", y, want_y, mag_y, nullptr) == 0);
        CHECK(count_bad("dx", dx, want_dx, mag_dx, nullptr) == 0);
        CHECK(count_bad("dw", dw, want_dw, mag_dw, &dw0) == 0);
      }
    }
  }
}

// --precision bf16 / fp16 on CUDA for the image models: every convolution and the fc
// product on tensor cores (the recorder sees each as 16-bit), losses within 2% and
// gradients within 10% of the fp32 CPU model (16-bit results through 17 convolutions and
// BatchNorm), and not equal to it (the 16-bit path did run).
TEST_CASE("cnn and resnet18 with 16-bit products on cuda track the fp32 cpu model", "[cuda]") {
  for (const std::string name : {"cnn", "resnet18"})
    for (const GemmPrecision prec : {GemmPrecision::bf16, GemmPrecision::f16}) {
      DYNAMIC_SECTION(name << " " << gemm_precision_name(prec)) {
        auto cpu = make_model(name, ModelConfig{});
        auto gpu = make_model(name, ModelConfig{});
        gpu->to_cuda(0);
        gpu->set_gemm_precision(prec);
        Batch b = make_batch(*cpu, 8, 61);
        const float l_cpu = cpu->train_step(b.in, b.target);
        GemmRecorder rec;
        const float l_gpu = recorded_step(*gpu, b, rec);
        INFO("loss cpu fp32 " << l_cpu << " cuda " << l_gpu);
        CHECK(std::abs(l_gpu - l_cpu) <= 2e-2 * std::abs(l_cpu));
        const double err = rel_error(gpu->flat_grads(), cpu->flat_grads());
        INFO("gradient relative error " << err);
        CHECK(err < 1e-1);
        CHECK(err > 1e-6);
        REQUIRE_FALSE(rec.calls().empty());
        for (const auto& [shape, count] : rec.calls())
          CHECK((prec == GemmPrecision::bf16 ? shape.bf16 && !shape.f16 : shape.f16 && !shape.bf16));
      }
    }
}

namespace {
// A layer with no CUDA path (every built-in layer has one): to_cuda must refuse it by name.
class HostOnlyLayer : public Layer {
 public:
  explicit HostOnlyLayer(const std::string& name) : Layer(name) {}
  const Tensor& forward(const Tensor& in, const ForwardContext&) override { return in; }
  const Tensor& backward(const Tensor& dout, GradSink&, bool) override { return dout; }
};
class HostOnlyModel : public Module {
 public:
  HostOnlyModel() : Module("host_only", ModelConfig{}, {10}, false) {
    add_layer<Linear>(store_, "fc", 10, 5);
    add_layer<HostOnlyLayer>("host_step");
    finalize(std::make_unique<MseLoss>());
  }
};
}  // namespace

TEST_CASE("a model without a CUDA path, or no GPU, is refused by name", "[cuda_errors]") {
  HostOnlyModel host_only;
  try {
    host_only.to_cuda(0);
    FAIL("a model with a host-only layer went to cuda");
  } catch (const std::invalid_argument& e) {
    CHECK_THAT(e.what(), Catch::Contains("host_step") && Catch::Contains("no CUDA kernels"));
  }
  CHECK_FALSE(host_only.on_cuda());
  std::string why;
  if (device::kernel_device_count(&why) == 0) {
    auto mlp = make_model("mlp", {});
    try {
      mlp->to_cuda(0);
      FAIL("mlp went to cuda without a GPU");
    } catch (const device::DeviceError& e) {
      CHECK_THAT(e.what(), Catch::Contains("no CUDA device 0"));
    }
    CHECK_FALSE(mlp->on_cuda());
  }
}

// The device-resident protocol of ParamStore (set_device_resident), on the emulated device
// (DPT_EMULATE_DEVICE=1: device memory is host memory, so the test can play the device
// step by writing the device copies itself). Host views must refresh after a device
// change, a writable view must reach the device before its next read, and nothing may
// move when nothing changed.
TEST_CASE("a device-resident store refreshes its host views on demand", "[cuda_emulated]") {
  REQUIRE(device::emulated());
  device::set_current(kGpu0);
  ParamStore s;
  const size_t w = s.add("w", {3, 4}), b = s.add("b", {5});
  s.finalize();
  for (size_t i = 0; i < s.total_numel(); ++i) s.flat_params()[i] = float(i);
  s.attach_device();
  s.set_device_resident(true);  // every parameter goes up now
  REQUIRE(s.device_resident());
  const uint64_t up0 = s.uploaded_bytes(), down0 = s.downloaded_bytes();
  CHECK(up0 == s.total_numel() * sizeof(float));
  CHECK(s.device_param(b)[2] == float(12 + 2));
  // Nothing changed: no transfer either way.
  s.sync_device_params();
  const ParamStore& cs = s;
  CHECK(cs.param(w)[1] == 1.0f);
  CHECK(s.uploaded_bytes() == up0);
  CHECK(s.downloaded_bytes() == down0);
  // A device step: the host sees it at its next view, and only then pays for it.
  s.device_param(w)[1] = 100.0f;
  s.device_params_updated();
  CHECK(s.downloaded_bytes() == down0);
  CHECK(cs.flat_params()[1] == 100.0f);
  CHECK(s.downloaded_bytes() == down0 + s.total_numel() * sizeof(float));
  CHECK(cs.param(b)[0] == 12.0f);  // no second download
  CHECK(s.downloaded_bytes() == down0 + s.total_numel() * sizeof(float));
  // A const view leaves the device copy as it is; a writable one has it uploaded before
  // the next device read.
  s.sync_device_params();
  CHECK(s.uploaded_bytes() == up0);
  s.param(b)[4] = -7.0f;
  CHECK(s.device_param(b)[4] == 16.0f);
  s.sync_device_params();
  CHECK(s.device_param(b)[4] == -7.0f);
  CHECK(s.uploaded_bytes() == 2 * up0);
  // Gradients: written on the device, read on the host after a device change.
  s.device_grad(w)[3] = 0.25f;
  s.device_grads_updated();
  CHECK(s.grad_span(w)[3] == 0.25f);
  // Leaving the mode brings the host up to date once more: it is authoritative again.
  s.device_param(w)[0] = 42.0f;
  s.device_params_updated();
  s.set_device_resident(false);
  CHECK_FALSE(s.device_resident());
  CHECK(cs.param(w)[0] == 42.0f);
}

TEST_CASE("a store's buffers: the copy written last is current, and moves only when the other side asks",
          "[cuda_emulated]") {
  REQUIRE(device::emulated());
  device::set_current(kGpu0);
  ParamStore s;
  s.add("w", {2});
  const size_t rm = s.add_buffer("bn.running_mean", {3}), nb = s.add_buffer("bn.num_batches_tracked", {}, true);
  s.finalize();
  s.buffer(rm)[1] = 5.0f;
  s.attach_device();
  const uint64_t up0 = s.uploaded_bytes(), down0 = s.downloaded_bytes();
  const uint64_t all = s.flat_buffers().size() * sizeof(float);
  // The host values go up at the first device read, once.
  CHECK(s.device_buffer(rm)[1] == 5.0f);
  CHECK(s.uploaded_bytes() == up0 + all);
  CHECK(s.device_buffer(nb)[0] == 0.0f);
  CHECK(s.uploaded_bytes() == up0 + all);
  // A kernel's update (BatchNorm's training forward): the host sees it at its next view.
  s.device_buffer(rm)[2] = 0.5f;
  s.device_buffer(nb)[0] = 1.0f;
  s.device_buffers_updated();
  CHECK(s.downloaded_bytes() == down0);
  const ParamStore& cs = s;
  CHECK(cs.buffer(rm)[2] == 0.5f);
  CHECK(cs.flat_buffers()[3] == 1.0f);  // one download for both views
  CHECK(s.downloaded_bytes() == down0 + all);
  // A const view leaves the device copy current; a writable one (DDP's broadcast, a
  // checkpoint load) has the host values uploaded before the next device read.
  CHECK(s.device_buffer(rm)[2] == 0.5f);
  CHECK(s.uploaded_bytes() == up0 + all);
  s.flat_buffers()[0] = -3.0f;
  CHECK(s.device_buffer(rm)[0] == -3.0f);
  CHECK(s.uploaded_bytes() == up0 + 2 * all);
  // A writable view after a device update sees the device values first (nothing lost).
  s.device_buffer(rm)[1] = 9.0f;
  s.device_buffers_updated();
  s.buffer(rm)[0] = 4.0f;
  CHECK(cs.buffer(rm)[1] == 9.0f);
  CHECK(s.device_buffer(rm)[0] == 4.0f);
}

// Run with DPT_EMULATE_DEVICE=1 (models_cuda_refuses_emulated): the emulated device is
// host memory for comm/'s staging paths; a model's kernels must never be handed it.
TEST_CASE("a model is refused the emulated device", "[cuda_emulated]") {
  REQUIRE(device::emulated());
  auto mlp = make_model("mlp", {});
  try {
    mlp->to_cuda(0);
    FAIL("mlp went to the emulated device");
  } catch (const device::DeviceError& e) {
    CHECK_THAT(e.what(), Catch::Contains("DPT_EMULATE_DEVICE=1") && Catch::Contains("runs no model kernels"));
  }
  CHECK_FALSE(mlp->on_cuda());
}
