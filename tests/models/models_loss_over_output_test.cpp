// The loss written over the model's output (models/nn/loss.h, "over output"): the same loss
// and gradient bits as the loss with its own gradient buffer, the buffer not allocated,
// and a Module that refuses to hand out an output its training loss has overwritten.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <vector>

#include "data/batch.h"
#include "models/nn/loss.h"
#include "models/zoo/models.h"
#include "models_test_util.h"

using namespace dpt;

namespace {

bool same_bits(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

Tensor random_logits(int64_t rows, int64_t c, uint64_t seed) {
  Tensor t({rows, c});
  testing::fill_random(t.span(), seed, -6.0f, 6.0f);
  return t;
}

// Labels at the row's first and last column (the first is what a lane-0 or
// first-element overwrite would clobber), ignored rows, and random ones.
std::vector<int32_t> labels_for(int64_t rows, int64_t c, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<int32_t> pick(0, int32_t(c - 1));
  std::vector<int32_t> labels(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r)
    labels[size_t(r)] = r % 5 == 0 ? 0 : r % 5 == 1 ? int32_t(c - 1) : r % 5 == 2 ? kIgnoreLabel : pick(gen);
  return labels;
}

}  // namespace

TEST_CASE("cross entropy over its logits gives the bits of cross entropy into its own buffer", "[loss_over]") {
  for (const int64_t c : {5, 33, 1000}) {
    DYNAMIC_SECTION("classes " << c) {
      const int64_t rows = 37;
      const Tensor logits = random_logits(rows, c, uint64_t(c));
      const std::vector<int32_t> labels = labels_for(rows, c, uint64_t(c) + 1);
      const ModelTarget target{labels.data(), nullptr};

      SoftmaxCrossEntropy kept, over;
      const LossSum want = kept.forward_sum(logits, target, 0.25f);
      Tensor spent = logits;
      const LossSum got = over.forward_sum_over(spent, target, 0.25f);
      CHECK(got.count == want.count);
      CHECK(got.sum == want.sum);  // the same bits: z[label] read before it is overwritten
      REQUIRE(kept.grad().numel() == spent.numel());
      CHECK(same_bits(spent.data(), kept.grad().data(), spent.numel()));
      CHECK(over.grad().numel() == 0);  // no second buffer

      // The mean (Module::loss) the same way.
      const float mean_kept = kept.forward(logits, target, 1.0f);
      spent = logits;
      const float mean_over = over.forward_over(spent, target, 1.0f);
      CHECK(mean_over == mean_kept);
      CHECK(same_bits(spent.data(), kept.grad().data(), spent.numel()));
    }
  }
}

TEST_CASE("MSE over its output gives the bits of MSE into its own buffer", "[loss_over]") {
  const Tensor y = random_logits(9, 7, 3);
  std::vector<float> t(y.numel());
  testing::fill_random(t, 4);
  MseLoss kept, over;
  const LossSum want = kept.forward_sum(y, {nullptr, t.data()}, 0.5f);
  Tensor spent = y;
  const LossSum got = over.forward_sum_over(spent, {nullptr, t.data()}, 0.5f);
  CHECK(got.sum == want.sum);
  CHECK(got.count == want.count);
  CHECK(same_bits(spent.data(), kept.grad().data(), spent.numel()));
}

TEST_CASE("a bad label is refused before the logits are touched", "[loss_over]") {
  const Tensor logits = random_logits(4, 6, 5);
  std::vector<int32_t> labels{1, 2, 6, 0};
  SoftmaxCrossEntropy ce;
  Tensor spent = logits;
  CHECK_THROWS_WITH(ce.forward_sum_over(spent, {labels.data(), nullptr}, 1.0f),
                    Catch::Contains("label 6 of row 2") && Catch::Contains("[0, 6)"));
  CHECK(same_bits(spent.data(), logits.data(), logits.numel()));
}

// A training step with the loss over the output against the same step of a model that
// keeps its output (set_keep_output: the loss writes into its own buffer): the same
// loss and gradient bits, and no second buffer. (ResNet-18's last layer is a Linear too;
// it is left out for time.)
TEST_CASE("a training step's loss over the logits gives the gradients of a separate buffer", "[loss_over]") {
  for (const std::string name : {"toy", "mlp", "gpt", "cnn"}) {
    DYNAMIC_SECTION(name) {
      ModelConfig cfg;
      if (name == "gpt") {
        cfg.vocab = 61;
        cfg.seq_len = 17;
        cfg.d_model = 32;
        cfg.n_layer = 2;
        cfg.n_head = 2;
      }
      auto trained = make_model(name, cfg);
      auto reference = make_model(name, cfg);
      const int64_t n = 3;
      const size_t per = shape_numel(trained->sample_shape());
      std::vector<float> x(n * per), values;
      std::vector<int32_t> tokens, labels;
      ModelInput in;
      in.n = n;
      in.sample_shape = trained->sample_shape();
      ModelTarget target;
      std::mt19937_64 gen(11);
      if (trained->takes_tokens()) {
        std::uniform_int_distribution<int32_t> tok(0, int32_t(cfg.vocab - 1));
        for (size_t i = 0; i < n * per; ++i) tokens.push_back(tok(gen));
        for (size_t i = 0; i < n * per; ++i) labels.push_back(i % 7 == 3 ? kIgnoreLabel : tok(gen));
        in.tokens = tokens.data();
        target.labels = labels.data();
      } else {
        testing::fill_random(x, 12);
        in.x = x.data();
        if (trained->loss_fn().name() == "mse") {
          values.resize(n * 5);
          testing::fill_random(values, 13);
          target.values = values.data();
        } else {
          for (int64_t i = 0; i < n; ++i) labels.push_back(int32_t(i * 3 % 10));
          target.labels = labels.data();
        }
      }

      const Tensor& out = trained->forward(in, true);
      const Tensor logits = out;  // readable until the loss
      const float loss = trained->loss(target, 0.5f);
      trained->backward();
      CHECK(trained->loss_fn().grad().numel() == 0);
      CHECK_THROWS_WITH(trained->output(), Catch::Contains("wrote its gradient over the output"));
      CHECK_THROWS_WITH(trained->host_output(), Catch::Contains("wrote its gradient over the output"));

      reference->set_keep_output(true);
      reference->forward(in, true);
      CHECK(same_bits(reference->output().data(), logits.data(), logits.numel()));
      const float want = reference->loss(target, 0.5f);
      CHECK(reference->loss_fn().grad().numel() == logits.numel());
      reference->backward();
      CHECK(loss == want);
      const auto g = trained->flat_grads(), gw = reference->flat_grads();
      REQUIRE(g.size() == gw.size());
      CHECK(same_bits(g.data(), gw.data(), g.size()));
      // A kept output stays readable after the loss.
      CHECK(same_bits(reference->output().data(), logits.data(), logits.numel()));

      // An evaluation forward's loss goes over the output too (no buffer there either),
      // with the same value.
      trained->forward(in, false);
      CHECK(trained->loss(target, 0.5f) == want);
      CHECK(trained->loss_fn().grad().numel() == 0);
      CHECK_THROWS_WITH(trained->output(), Catch::Contains("set_keep_output"));
    }
  }
}

TEST_CASE("a second loss on one forward is refused, the next forward starts afresh", "[loss_over]") {
  ModelConfig cfg;
  auto m = make_model("mlp", cfg);
  const size_t per = shape_numel(m->sample_shape());
  std::vector<float> x(2 * per);
  testing::fill_random(x, 1);
  std::vector<int32_t> labels{3, 7};
  ModelInput in;
  in.n = 2;
  in.sample_shape = m->sample_shape();
  in.x = x.data();
  const ModelTarget target{labels.data(), nullptr};
  // A refused label leaves the output readable and the loss callable.
  const Tensor& out = m->forward(in, true);
  const Tensor logits = out;
  std::vector<int32_t> bad{3, 10};
  CHECK_THROWS_WITH(m->loss({bad.data(), nullptr}, 1.0f), Catch::Contains("label 10 of row 1"));
  CHECK(same_bits(m->output().data(), logits.data(), logits.numel()));
  const float first = m->loss(target, 1.0f);
  CHECK_THROWS_WITH(m->loss(target, 1.0f), Catch::Contains("loss() twice after one forward"));
  CHECK_THROWS_WITH(m->loss_sum(target, 1.0f), Catch::Contains("loss_sum() twice"));
  m->forward(in, true);
  CHECK(m->loss(target, 1.0f) == first);
}
