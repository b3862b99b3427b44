// The contract DDP and ZeRO build on: one flat buffer with named views in a stable
// order, gradients announced once per parameter in exactly reverse order and never
// touched afterwards, per-layer hooks with parameter ranges, accumulation across
// backward calls.
#include <catch2/catch.hpp>

#include <set>

#include "models/kernels/cpu/gemm.h"
#include "models/zoo/models.h"
#include "models/nn/param_store.h"
#include "models_test_util.h"

using namespace dpt;
using dpt::testing::fill_random;

namespace {

ModelConfig small_config() {
  ModelConfig cfg;
  cfg.image_h = cfg.image_w = 8;
  cfg.cnn_c1 = 3;
  cfg.cnn_c2 = 4;
  cfg.cnn_hidden = 6;
  cfg.vocab = 13;
  cfg.seq_len = 6;
  cfg.d_model = 8;
  cfg.n_layer = 3;
  cfg.n_head = 2;
  return cfg;
}

struct Feed {
  std::vector<float> x, targets;
  std::vector<int32_t> tokens, labels;
  ModelInput in;
  ModelTarget target;
};

Feed make_feed(const Module& m, int64_t n, uint64_t seed) {
  Feed f;
  f.in.n = n;
  f.in.sample_shape = m.sample_shape();
  size_t per = 1;
  for (auto d : f.in.sample_shape) per *= size_t(d);
  std::mt19937 gen{static_cast<unsigned>(seed)};
  if (m.takes_tokens()) {
    for (size_t i = 0; i < per * n; ++i) {
      f.tokens.push_back(int32_t(gen() % 13));
      f.labels.push_back(int32_t(gen() % 13));
    }
    f.in.tokens = f.tokens.data();
  } else {
    f.x.resize(per * n);
    fill_random(f.x, seed);
    f.in.x = f.x.data();
    for (int64_t i = 0; i < n; ++i) f.labels.push_back(int32_t(gen() % 5));
    f.targets.resize(n * 5);
    fill_random(f.targets, seed + 1);
  }
  f.target = {f.labels.data(), f.targets.data()};
  return f;
}

// "f3" etc. Built by append: GCC 12 gives a false -Wrestrict for "f" + to_string().
std::string tag(char kind, size_t layer) {
  std::string s(1, kind);
  s += std::to_string(layer);
  return s;
}

}  // namespace

TEST_CASE("flat buffers: contiguous named views in a stable order", "[models][contract]") {
  for (const std::string name : {"toy", "mlp", "cnn", "gpt", "gpt2", "resnet18"}) {
    DYNAMIC_SECTION(name) {
      auto m = make_model(name, small_config());
      auto m2 = make_model(name, small_config());
      size_t expect = 0;
      std::set<std::string> names;
      for (size_t i = 0; i < m->param_infos().size(); ++i) {
        const auto& p = m->param_infos()[i];
        CHECK(p.index == i);
        CHECK(p.offset == expect);
        size_t numel = 1;
        for (auto d : p.shape) numel *= size_t(d);
        CHECK(p.numel == numel);
        expect += p.numel;
        CHECK(names.insert(p.name).second);
        CHECK(p.name.rfind("module.", 0) != 0);
        // Same names and same initial values from the same seed.
        CHECK(m2->param_infos()[i].name == p.name);
      }
      CHECK(expect == m->flat_params().size());
      CHECK(expect == m->flat_grads().size());
      CHECK(std::equal(m->flat_params().begin(), m->flat_params().end(), m2->flat_params().begin()));
    }
  }
}

TEST_CASE("parameter names follow the documented scheme", "[models][contract]") {
  auto names_of = [](const Module& m) {
    std::vector<std::string> v;
    for (const auto& p : m.param_infos()) v.push_back(p.name);
    return v;
  };
  auto toy = make_model("toy", {});
  CHECK(names_of(*toy) == std::vector<std::string>{"net1.weight", "net1.bias", "net2.weight", "net2.bias"});
  auto mlp = make_model("mlp", {});
  CHECK(mlp->param_infos()[0].name == "fc1.weight");
  CHECK(mlp->param_infos()[0].shape == std::vector<int64_t>{256, 784});
  CHECK(mlp->num_params() == 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10);
  auto gpt = make_model("gpt", small_config());
  auto gn = names_of(*gpt);
  CHECK(gn.front() == "tok_emb.weight");
  CHECK(gn[1] == "pos_emb.weight");
  CHECK(std::find(gn.begin(), gn.end(), "blocks.2.attn.qkv.weight") != gn.end());
  CHECK(std::find(gn.begin(), gn.end(), "blocks.1.mlp.fc.bias") != gn.end());
  CHECK(gn.back() == "ln_f.bias");
  // Tied head: no separate output matrix.
  for (const auto& n : gn) CHECK(n.find("lm_head") == std::string::npos);
}

TEST_CASE("views alias the flat buffer: writing it changes the model", "[models][contract]") {
  auto m = make_model("toy", {});
  Feed f = make_feed(*m, 4, 1);
  std::vector<float> y0(m->forward(f.in).span().begin(), m->forward(f.in).span().end());
  const auto& bias = m->param_infos()[3];  // net2.bias
  REQUIRE(bias.name == "net2.bias");
  m->flat_params()[bias.offset + 2] += 1.0f;
  const Tensor& y1 = m->forward(f.in);
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t c = 0; c < 5; ++c)
      CHECK(y1[r * 5 + c] == Approx(y0[r * 5 + c] + (c == 2 ? 1.0f : 0.0f)));
}

TEST_CASE("grad-ready fires once per parameter in reverse order, final when fired",
          "[models][contract]") {
  for (const std::string name : {"toy", "mlp", "cnn", "gpt", "gpt2", "resnet18"}) {
    DYNAMIC_SECTION(name) {
      auto m = make_model(name, small_config());
      Feed f = make_feed(*m, 3, 2);
      std::vector<size_t> order;
      std::vector<std::vector<float>> at_fire(m->param_infos().size());
      ModuleHooks hooks;
      hooks.on_grad_ready = [&](const ParamInfo& p) {
        order.push_back(p.index);
        auto g = m->flat_grads().subspan(p.offset, p.numel);
        at_fire[p.index].assign(g.begin(), g.end());
      };
      m->set_hooks(hooks);
      m->zero_grad();
      m->train_step(f.in, f.target);
      const size_t n = m->param_infos().size();
      REQUIRE(order.size() == n);
      for (size_t i = 0; i < n; ++i) CHECK(order[i] == n - 1 - i);
      // Not touched after it was announced: the value at the callback is final.
      for (const auto& p : m->param_infos()) {
        auto g = m->flat_grads().subspan(p.offset, p.numel);
        INFO(p.name);
        CHECK(std::equal(g.begin(), g.end(), at_fire[p.index].begin()));
      }
    }
  }
}

TEST_CASE("gpt: tied embedding is announced last, after both of its uses", "[models][contract]") {
  auto m = make_model("gpt", small_config());
  Feed f = make_feed(*m, 2, 3);
  std::vector<std::string> fired;
  std::vector<std::string> events;
  ModuleHooks hooks;
  hooks.on_grad_ready = [&](const ParamInfo& p) { events.push_back("ready " + p.name); };
  hooks.on_layer_backward = [&](size_t l) { events.push_back("layer " + m->layer_infos()[l].name); };
  m->set_hooks(hooks);
  m->train_step(f.in, f.target);
  REQUIRE(events.size() >= 3);
  CHECK(events.back() == "ready tok_emb.weight");
  CHECK(events[events.size() - 2] == "ready pos_emb.weight");
  CHECK(events[events.size() - 3] == "layer tok_emb");
  CHECK(events.front() == "layer lm_head");
}

TEST_CASE("layer hooks run in order and name each layer's parameter ranges", "[models][contract]") {
  auto m = make_model("gpt", small_config());
  const auto& layers = m->layer_infos();
  REQUIRE(layers.size() == 1 + 3 + 1 + 1);  // embedding, 3 blocks, ln_f, head
  CHECK(layers[1].name == "blocks.0");
  // The head reads the token table: ZeRO-3 must gather it there too.
  const auto& tok = m->param_infos()[0];
  REQUIRE(layers.back().ranges.size() == 1);
  CHECK(layers.back().ranges[0] == std::make_pair(tok.offset, tok.offset + tok.numel));
  // Each block's ranges are one contiguous slice covering its 12 parameters.
  REQUIRE(layers[1].ranges.size() == 1);
  CHECK(layers[1].params.size() == 12);
  // Every parameter is covered by some layer.
  size_t covered = 0;
  for (size_t l = 0; l + 1 < layers.size(); ++l)
    for (auto [b, e] : layers[l].ranges) covered += e - b;
  CHECK(covered == m->num_params());

  Feed f = make_feed(*m, 2, 4);
  std::vector<std::string> seq;
  ModuleHooks hooks;
  hooks.on_layer_forward = [&](size_t l) { seq.push_back(tag('f', l)); };
  hooks.on_layer_forward_done = [&](size_t l) { seq.push_back(tag('F', l)); };
  hooks.on_layer_backward = [&](size_t l) { seq.push_back(tag('b', l)); };
  hooks.on_layer_backward_done = [&](size_t l) { seq.push_back(tag('B', l)); };
  m->set_hooks(hooks);
  m->train_step(f.in, f.target);
  std::vector<std::string> expect;
  for (size_t l = 0; l < layers.size(); ++l) {
    expect.push_back(tag('f', l));
    expect.push_back(tag('F', l));
  }
  for (size_t l = layers.size(); l-- > 0;) {
    expect.push_back(tag('b', l));
    expect.push_back(tag('B', l));
  }
  CHECK(seq == expect);
}

TEST_CASE("gradients accumulate across backward calls until zero_grad", "[models][contract]") {
  // zero_grad is lazy (models/nn/param_store.h): the gradients of the first backward after it
  // are stored over the previous step's values, never added to them; resnet18 on 8x8
  // images has convolutions with dead taps (1x1 inputs), and in bf16 its products take
  // converted operands.
  for (const std::string name : {"mlp", "cnn", "gpt", "gpt2", "resnet18", "resnet18 bf16"}) {
    DYNAMIC_SECTION(name) {
      const bool bf16 = name.ends_with(" bf16");
      auto m = make_model(name.substr(0, name.find(' ')), small_config());
      if (bf16) m->set_gemm_precision(GemmPrecision::bf16);
      Feed a = make_feed(*m, 3, 5), b = make_feed(*m, 3, 6);
      m->zero_grad();
      m->train_step(a.in, a.target);
      std::vector<float> ga(m->flat_grads().begin(), m->flat_grads().end());
      m->zero_grad();
      m->train_step(b.in, b.target);
      std::vector<float> gb(m->flat_grads().begin(), m->flat_grads().end());
      m->zero_grad();
      m->train_step(a.in, a.target);
      m->train_step(b.in, b.target);
      auto g = m->flat_grads();
      double max_err = 0, max_g = 0;
      for (size_t i = 0; i < g.size(); ++i) {
        max_err = std::max(max_err, double(std::abs(g[i] - (ga[i] + gb[i]))));
        max_g = std::max(max_g, double(std::abs(ga[i] + gb[i])));
      }
      INFO("max |accumulated - (a + b)| = " << max_err);
      CHECK(max_g > 0);
      CHECK(max_err <= 1e-5 * max_g);
      m->zero_grad();
      for (float v : m->flat_grads()) REQUIRE(v == 0.0f);
    }
  }
}

TEST_CASE("ParamStore: lazily zeroed gradients read as zero, are claimed or settled, wait inside backward",
          "[models][contract]") {
  ParamStore store;
  const size_t a = store.add("a", {3}), b = store.add("b", {2, 2});
  store.finalize();
  for (float& g : store.flat_grads()) g = 5.0f;
  store.mark_grads_zero();
  CHECK(store.pending_grads() == 2);
  for (float g : store.flat_grads()) CHECK(g == 0.0f);  // a bulk view settles every one
  CHECK(store.pending_grads() == 0);

  for (float& g : store.flat_grads()) g = 5.0f;
  store.mark_grads_zero();
  {
    const ParamStore::BackwardScope backward(store);
    CHECK(store.flat_grads()[0] == 5.0f);  // inside backward: left pending, not zeroed
    CHECK(store.pending_grads() == 2);
    bool was_zero = false;
    float* ga = store.claim_grad(a, was_zero);
    CHECK(was_zero);  // the claimer stores; nobody zeroes it
    CHECK(ga[0] == 5.0f);
    store.claim_grad(a, was_zero);
    CHECK_FALSE(was_zero);  // claimed once: the next writer adds
    CHECK(store.grad(b)[3] == 0.0f);  // a single gradient settles when touched
    CHECK(store.pending_grads() == 0);
  }
  store.grad(a)[0] = 1.0f;
  store.mark_grads_zero();
  store.settle_grad(b);
  CHECK(store.pending_grads() == 1);
  CHECK(store.padded_grads(store.total_numel() + 1)[0] == 0.0f);
  CHECK(store.pending_grads() == 0);
}

TEST_CASE("make_model rejects unknown names and bad shapes clearly", "[models]") {
  CHECK_THROWS_WITH(make_model("resnet", {}), Catch::Contains("toy, mlp, cnn, gpt"));
  ModelConfig bad = small_config();
  bad.n_head = 3;  // 8 is not divisible by 3
  CHECK_THROWS_WITH(make_model("gpt", bad), Catch::Contains("divisible"));
  auto m = make_model("mlp", small_config());
  std::vector<float> x(10);
  ModelInput in;
  in.x = x.data();
  in.n = 1;
  in.sample_shape = {10};
  CHECK_THROWS_WITH(m->forward(in), Catch::Contains("sample shape"));
}
