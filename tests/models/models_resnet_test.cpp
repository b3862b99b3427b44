// ResNet-18's module state and the models/ side of SyncBatchNorm and fp16:
//   - buffers are outside the parameters, gradients and optimizer, updated by training
//     forwards only, and saved/loaded by checkpoints (num_batches_tracked as I64 []);
//   - SyncBatchNorm through a BatchStatsReducer: replicas on parts of a batch, with a
//     reducer joining them, compute what one model computes on the whole batch;
//   - fp16 compute precision: values really round to fp16 (F16C against GCC's
//     _Float16), and a small loss's gradients underflow unless the loss is scaled.
// (Names and shapes against torchvision, and values against PyTorch, are checked in
// torch_ref/resnet_vs_torch.py.)
#include <catch2/catch.hpp>

#include <unistd.h>

#include <barrier>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "models/io/checkpoint.h"
#include "models/kernels/cpu/f16_round.h"
#include "models/zoo/models.h"
#include "models_test_util.h"

using namespace dpt;
using dpt::testing::fill_random;
namespace fs = std::filesystem;

namespace {

ModelConfig small_resnet(const std::string& stem = "cifar", int64_t size = 8) {
  ModelConfig cfg;
  cfg.seed = 21;
  cfg.in_channels = 3;
  cfg.image_h = cfg.image_w = size;
  cfg.resnet_stem = stem;
  return cfg;
}

struct ImageBatch {
  std::vector<float> x;
  std::vector<int32_t> labels;
  ModelInput in(int64_t first, int64_t n, const Module& m) const {
    ModelInput i;
    size_t per = 1;
    for (auto d : m.sample_shape()) per *= size_t(d);
    i.x = x.data() + size_t(first) * per;
    i.n = n;
    i.sample_shape = m.sample_shape();
    return i;
  }
  ModelTarget target(int64_t first) const { return {labels.data() + first, nullptr}; }
};

ImageBatch random_batch(const Module& m, int64_t n, uint64_t seed) {
  ImageBatch b;
  size_t per = 1;
  for (auto d : m.sample_shape()) per *= size_t(d);
  b.x.resize(per * size_t(n));
  fill_random(b.x, seed, -2.0f, 3.0f);
  for (int64_t i = 0; i < n; ++i) b.labels.push_back(int32_t((i * 7 + int64_t(seed)) % 10));
  return b;
}

// max|a - b| / max|b|
double rel_diff(std::span<const float> a, std::span<const float> b) {
  double d = 0, s = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    d = std::max(d, std::abs(double(a[i]) - double(b[i])));
    s = std::max(s, std::abs(double(b[i])));
  }
  return s > 0 ? d / s : d;
}

// A BatchStatsReducer for W replicas on W threads of one process: each call is a
// rendezvous of all W (two barrier phases: publish, then read), what a communicator's
// allgather and allreduce would do across processes.
class ThreadGroup {
 public:
  explicit ThreadGroup(int world) : barrier_(world), slots_(size_t(world)) {}
  class Member : public BatchStatsReducer {
   public:
    Member(ThreadGroup& g, int rank) : g_(g), rank_(rank) {}
    void gather_moments(std::span<const float> local, std::vector<float>& all) override {
      g_.slots_[size_t(rank_)].assign(local.begin(), local.end());
      g_.barrier_.arrive_and_wait();
      all.clear();
      for (const auto& s : g_.slots_) all.insert(all.end(), s.begin(), s.end());
      g_.barrier_.arrive_and_wait();
      ++gathers;
    }
    void sum_gradients(std::span<float> sums) override {
      g_.slots_[size_t(rank_)].assign(sums.begin(), sums.end());
      g_.barrier_.arrive_and_wait();
      for (size_t i = 0; i < sums.size(); ++i) {
        float s = 0;
        for (const auto& slot : g_.slots_) s += slot[i];  // rank order: the same on every rank
        sums[i] = s;
      }
      g_.barrier_.arrive_and_wait();
      ++sums_done;
    }
    int gathers = 0, sums_done = 0;

   private:
    ThreadGroup& g_;
    int rank_;
  };

 private:
  std::barrier<> barrier_;
  std::vector<std::vector<float>> slots_;
};

struct TempFolder {
  fs::path path;
  TempFolder() {
    path = fs::temp_directory_path() / ("dpt_resnet_test_" + std::to_string(::getpid()));
    fs::create_directories(path);
  }
  ~TempFolder() { fs::remove_all(path); }
};

}  // namespace

TEST_CASE("resnet18: torchvision's parameter count; buffers are state outside the parameters", "[resnet]") {
  auto m = make_model("resnet18", small_resnet("imagenet", 32));
  CHECK(m->num_params() == 11181642);  // sum(p.numel() for p in resnet18(num_classes=10).parameters())
  REQUIRE(m->buffer_infos().size() == 60);  // 20 BatchNorms x (running_mean, running_var, num_batches_tracked)
  CHECK(m->flat_buffers().size() == 9620);
  size_t counts = 0;
  for (const auto& b : m->buffer_infos()) {
    INFO(b.name);
    CHECK(m->store().find(b.name) == m->param_infos().size());  // not a parameter
    if (b.is_count) {
      ++counts;
      CHECK(b.shape.empty());
      CHECK(b.name.ends_with(".num_batches_tracked"));
    }
  }
  CHECK(counts == 20);
  const BufferInfo& rv = m->buffer_infos()[m->store().find_buffer("layer2.0.downsample.1.running_var")];
  CHECK(rv.shape == std::vector<int64_t>{128});
  CHECK(m->flat_buffers()[rv.offset] == 1.0f);  // initial running_var

  // Training forwards move the statistics and count; evaluation and zero_grad do not.
  ImageBatch b = random_batch(*m, 4, 1);
  std::vector<float> before(m->flat_buffers().begin(), m->flat_buffers().end());
  m->forward(b.in(0, 4, *m), false);
  m->zero_grad();
  CHECK(std::equal(before.begin(), before.end(), m->flat_buffers().begin()));
  std::vector<float> params(m->flat_params().begin(), m->flat_params().end());
  m->train_step(b.in(0, 4, *m), b.target(0));
  m->train_step(b.in(0, 4, *m), b.target(0));
  CHECK(std::equal(params.begin(), params.end(), m->flat_params().begin()));  // backward writes no parameter
  const size_t count = m->store().find_buffer("layer4.1.bn2.num_batches_tracked");
  CHECK(*m->store().buffer(count) == 2.0f);
  CHECK(rel_diff(m->flat_buffers(), before) > 1e-3);
}

TEST_CASE("resnet18: checkpoints hold buffers, counters as I64 []", "[resnet][checkpoint]") {
  TempFolder dir;
  const std::string path = (dir.path / "r.safetensors").string();
  auto a = make_model("resnet18", small_resnet());
  ImageBatch b = random_batch(*a, 3, 2);
  for (int i = 0; i < 3; ++i) a->train_step(b.in(0, 3, *a), b.target(0));
  save_model(path, *a);
  auto c = make_model("resnet18", small_resnet());
  load_model(path, *c);
  CHECK(std::equal(a->flat_buffers().begin(), a->flat_buffers().end(), c->flat_buffers().begin()));
  CHECK(std::equal(a->flat_params().begin(), a->flat_params().end(), c->flat_params().begin()));
  CHECK(*c->store().buffer(c->store().find_buffer("bn1.num_batches_tracked")) == 3.0f);

  // The header as torchvision's load_state_dict needs it: int64 scalar counters.
  std::ifstream f(path, std::ios::binary);
  uint64_t n = 0;
  f.read(reinterpret_cast<char*>(&n), 8);
  std::string text(n, ' ');
  f.read(text.data(), std::streamsize(n));
  auto header = nlohmann::json::parse(text);
  CHECK(header["bn1.num_batches_tracked"]["dtype"] == "I64");
  CHECK(header["bn1.num_batches_tracked"]["shape"].empty());
  const auto off = header["bn1.num_batches_tracked"]["data_offsets"];
  CHECK(off[1].get<uint64_t>() - off[0].get<uint64_t>() == 8);
  CHECK(header["layer1.0.bn2.running_mean"]["dtype"] == "F32");

  // A file without the buffers, or with a counter stored as F32, is refused by name.
  std::vector<NamedTensorView> views = param_views(a->param_infos(), a->flat_params());
  save_safetensors(path, views);
  CHECK_THROWS_WITH(load_model(path, *c), Catch::Contains("missing tensor bn1.running_mean"));
  auto bufs = buffer_views(a->buffer_infos(), a->flat_buffers());
  for (auto& v : bufs) v.dtype = FileDType::F32;
  views.insert(views.end(), bufs.begin(), bufs.end());
  save_safetensors(path, views);
  CHECK_THROWS_WITH(load_model(path, *c), Catch::Contains("num_batches_tracked has dtype F32") &&
                                              Catch::Contains("buffer is I64"));
}

TEST_CASE("SyncBatchNorm: replicas on parts of a batch equal one model on the whole", "[resnet][syncbn]") {
  const int64_t per_rank = 4;
  for (int world : {2, 3}) {
    DYNAMIC_SECTION("world " << world) {
      const int64_t n = per_rank * world;
      auto full = make_model("resnet18", small_resnet());
      ImageBatch b = random_batch(*full, n, 3);
      full->zero_grad();
      const float full_loss = full->train_step(b.in(0, n, *full), b.target(0));

      ThreadGroup group(world);
      std::vector<std::unique_ptr<Module>> reps;
      std::vector<std::unique_ptr<ThreadGroup::Member>> members;
      std::vector<float> losses(static_cast<size_t>(world));
      for (int r = 0; r < world; ++r) {
        reps.push_back(make_model("resnet18", small_resnet()));
        members.push_back(std::make_unique<ThreadGroup::Member>(group, r));
        reps.back()->set_batch_stats_reducer(members.back().get());
        reps.back()->zero_grad();
      }
      std::vector<std::thread> threads;
      for (int r = 0; r < world; ++r)
        threads.emplace_back([&, r] {
          losses[size_t(r)] = reps[size_t(r)]->train_step(b.in(r * per_rank, per_rank, *reps[size_t(r)]),
                                                           b.target(r * per_rank));
        });
      for (auto& t : threads) t.join();
      CHECK(members[0]->gathers == 20);  // one per BatchNorm in forward
      CHECK(members[0]->sums_done == 20);  // and one per BatchNorm in backward

      double mean_loss = 0;
      for (float l : losses) mean_loss += l / world;
      INFO("loss: full " << full_loss << ", mean of replicas " << mean_loss);
      CHECK(std::abs(mean_loss - full_loss) <= 1e-5 * std::abs(full_loss));
      // DDP averages the replicas' gradients; that average is the full batch's gradient.
      std::vector<float> avg(full->num_params(), 0.0f);
      for (auto& m : reps)
        for (size_t i = 0; i < avg.size(); ++i) avg[i] += m->flat_grads()[i] / float(world);
      const double g = rel_diff(avg, full->flat_grads());
      INFO("gradients: max|avg - full| / max|full| = " << g);
      CHECK(g <= 1e-5);
      for (auto& m : reps) {
        const double d = rel_diff(m->flat_buffers(), full->flat_buffers());
        INFO("buffers: " << d);
        CHECK(d <= 1e-5);
      }
      // Without the reducer each replica normalises its own part: the buffers differ.
      auto alone = make_model("resnet18", small_resnet());
      alone->train_step(b.in(0, per_rank, *alone), b.target(0));
      CHECK(rel_diff(alone->flat_buffers(), full->flat_buffers()) > 1e-3);
    }
  }
}

TEST_CASE("round_to_f16: IEEE half rounding, vectorised and scalar alike", "[resnet][fp16]") {
  std::vector<float> v{65504.0f, 65519.0f, 65520.0f, -70000.0f, 1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048,
                       std::ldexp(1.0f, -24), std::ldexp(1.0f, -25), std::ldexp(1.5f, -25), std::ldexp(1.0f, -14),
                       std::nanf(""), 0.1f, -0.0f};
  const std::vector<float> expect{65504.0f, 65504.0f, INFINITY, -INFINITY, 1.0f, 1.0f + 4.0f / 2048,
                                  std::ldexp(1.0f, -24), 0.0f, std::ldexp(1.0f, -24), std::ldexp(1.0f, -14),
                                  NAN, 0.0999755859375f, -0.0f};
  round_to_f16(v);
  for (size_t i = 0; i < v.size(); ++i) {
    INFO(i << ": " << v[i] << " expected " << expect[i]);
    if (std::isnan(expect[i])) CHECK(std::isnan(v[i]));
    else CHECK(std::memcmp(&v[i], &expect[i], 4) == 0);
  }
  // Many values across the whole half range (subnormals included): the F16C path of
  // round_to_f16 against GCC's software conversion of _Float16, element by element.
  std::vector<float> w(4099);
  std::mt19937 gen(5);
  std::uniform_real_distribution<float> expo(-30.0f, 17.0f);
  for (auto& x : w) x = std::ldexp((gen() & 1) ? 1.0f : -1.0f, 0) * std::exp2(expo(gen));
  std::vector<float> ref = w;
  for (auto& x : ref) x = static_cast<float>(static_cast<_Float16>(x));
  round_to_f16(w);
  CHECK(std::memcmp(w.data(), ref.data(), w.size() * 4) == 0);
}

TEST_CASE("fp16 compute: small gradients underflow unless the loss is scaled", "[resnet][fp16]") {
  // The loss is the cross-entropy times 2^-k (a mean over a large batch, or a late stage
  // of training, makes gradients this small); gradients are computed in fp32, in fp16,
  // and in fp16 with the loss multiplied by 2^16 (GradScaler's default scale) and the
  // gradients divided by it afterwards. Measured: of the gradient elements that are
  // nonzero in fp32, the fraction fp16 turned into 0. (Elements that are 0 in fp32 too,
  // such as the weights of 3x3 taps that only ever see padding at 1x1 resolution, are
  // not counted.)
  auto m = make_model("resnet18", small_resnet());
  ImageBatch b = random_batch(*m, 6, 4);
  auto grads = [&](ComputePrecision p, float loss_factor) {
    m->set_compute_precision(p);
    m->zero_grad();
    m->forward(b.in(0, 6, *m), true);
    m->loss(b.target(0), loss_factor);
    m->backward();
    return std::vector<float>(m->flat_grads().begin(), m->flat_grads().end());
  };
  auto lost = [](const std::vector<float>& g32, const std::vector<float>& g) {
    size_t live = 0, zeroed = 0;
    for (size_t i = 0; i < g.size(); ++i)
      if (g32[i] != 0.0f) {
        ++live;
        zeroed += g[i] == 0.0f;
      }
    return double(zeroed) / double(live);
  };
  std::printf("fp16 underflow (resnet18, cifar stem, 8x8, batch 6): gradient elements lost to 0\n");
  std::printf("  loss factor | fp16 unscaled | fp16, loss x 2^16\n");
  for (int k : {0, 10, 16, 20}) {
    const float factor = std::ldexp(1.0f, -k);
    const std::vector<float> g32 = grads(ComputePrecision::kF32, factor);
    const double plain = lost(g32, grads(ComputePrecision::kF16, factor));
    const double scaled = lost(g32, grads(ComputePrecision::kF16, factor * 65536.0f));
    std::printf("  2^-%-9d | %13.4f | %17.4f\n", k, plain, scaled);
    if (k == 0) CHECK(plain < 0.005);  // ordinary magnitudes: fp16 keeps them
    if (k == 20) {
      CHECK(plain > 0.25);    // a large part of the gradients is lost
      CHECK(scaled < 0.005);  // the scaled loss keeps them
    }
  }
}

TEST_CASE("fp16 compute rounds activations at layer boundaries", "[resnet][fp16]") {
  auto m = make_model("resnet18", small_resnet());
  ImageBatch b = random_batch(*m, 2, 5);
  std::vector<float> y32;
  {
    const Tensor& y = m->forward(b.in(0, 2, *m), false);
    y32.assign(y.data(), y.data() + y.numel());
  }
  m->set_compute_precision(ComputePrecision::kF16);
  const Tensor& y = m->forward(b.in(0, 2, *m), false);
  std::vector<float> y16(y.data(), y.data() + y.numel());
  std::vector<float> again = y16;
  round_to_f16(again);
  CHECK(again == y16);  // the output is fp16-representable
  const double d = rel_diff(y16, y32);
  INFO("fp16 vs fp32 logits: " << d);
  CHECK(d > 1e-5);  // it was rounded along the way
  CHECK(d < 5e-2);  // but is the same computation
  // Parameter gradients are fp16 values too when they are final (what an fp16 backward
  // hands the optimizer's unscale step).
  m->zero_grad();
  m->train_step(b.in(0, 2, *m), b.target(0));
  std::vector<float> g(m->flat_grads().begin(), m->flat_grads().end()), g16 = g;
  round_to_f16(g16);
  CHECK(std::memcmp(g.data(), g16.data(), g.size() * 4) == 0);
  size_t nonzero = 0;
  for (float v : g) nonzero += v != 0.0f;
  CHECK(nonzero > g.size() / 20);
}
