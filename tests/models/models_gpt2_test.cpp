// gpt2 (Hugging Face's GPT2LMHeadModel in C++): its names and shapes, sizes by name,
// initialisation, dropout's determinism, the loss over ignored targets and the
// sum/count API a data-parallel trainer normalises with, and F16/BF16 safetensors.
// The forward/backward against PyTorch is tests/models/gpt2/hf_reference.py.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <unistd.h>
#include <nlohmann/json.hpp>
#include <random>

#include "data/batch.h"
#include "models/zoo/gpt2.h"
#include "models/io/gpt2_weights.h"
#include "models/nn/loss.h"
#include "models/zoo/models.h"
#include "models/io/safetensors.h"
#include "models_test_util.h"

using namespace dpt;

namespace {

ModelConfig tiny_gpt2(float dropout = 0.0f) {
  ModelConfig cfg;
  Gpt2Request r;
  r.layers = 2;
  r.width = 16;
  r.heads = 2;
  r.vocab = 23;
  r.positions = 12;
  configure_gpt2(r, cfg);
  cfg.seq_len = 8;
  cfg.dropout = dropout;
  return cfg;
}

struct Tokens {
  std::vector<int32_t> tokens, labels;
  ModelInput in;
  ModelTarget target;
};

Tokens make_tokens(int64_t n, int64_t t, int64_t vocab, uint64_t seed) {
  Tokens b;
  std::mt19937_64 gen(seed);
  for (int64_t i = 0; i < n * t; ++i) {
    b.tokens.push_back(int32_t(gen() % vocab));
    b.labels.push_back(int32_t(gen() % vocab));
  }
  b.in.tokens = b.tokens.data();
  b.in.n = n;
  b.in.sample_shape = {t};
  b.target.labels = b.labels.data();
  return b;
}

double stddev(std::span<const float> v) {
  double s = 0, s2 = 0;
  for (float x : v) s += x, s2 += double(x) * x;
  const double m = s / double(v.size());
  return std::sqrt(s2 / double(v.size()) - m * m);
}

}  // namespace

TEST_CASE("gpt2: Hugging Face names, Conv1D shapes and the name mapping", "[gpt2]") {
  auto m = make_model("gpt2", tiny_gpt2());
  const auto& p = m->param_infos();
  CHECK(p.front().name == "transformer.wte.weight");
  CHECK(p[1].name == "transformer.wpe.weight");
  CHECK(p[1].shape == std::vector<int64_t>{12, 16});
  CHECK(p.back().name == "transformer.ln_f.bias");
  CHECK(p.size() == 2 + 2 * 12 + 2);
  auto shape_of = [&](const std::string& n) { return p.at(m->store().find(n)).shape; };
  CHECK(shape_of("transformer.h.1.attn.c_attn.weight") == std::vector<int64_t>{16, 48});
  CHECK(shape_of("transformer.h.1.attn.c_proj.weight") == std::vector<int64_t>{16, 16});
  CHECK(shape_of("transformer.h.0.mlp.c_fc.weight") == std::vector<int64_t>{16, 64});
  CHECK(shape_of("transformer.h.0.mlp.c_proj.weight") == std::vector<int64_t>{64, 16});
  CHECK(m->num_params() == size_t(gpt2_param_count(m->name() == "gpt2" ? tiny_gpt2() : ModelConfig{})));
  for (const auto& info : p) {
    INFO(info.name);
    CHECK(gpt2_to_hf_name(info.name) == info.name);
    CHECK(hf_to_gpt2_name(info.name) == info.name);                          // GPT2LMHeadModel
    CHECK(hf_to_gpt2_name(info.name.substr(12)) == info.name);               // GPT2Model
  }
  CHECK_FALSE(hf_to_gpt2_name("h.3.attn.bias").has_value());
  CHECK_FALSE(hf_to_gpt2_name("transformer.h.0.attn.masked_bias").has_value());
  CHECK(hf_to_gpt2_name("h.0.attn.c_attn.bias") == "transformer.h.0.attn.c_attn.bias");  // not a buffer
  CHECK(hf_to_gpt2_name("lm_head.weight") == "lm_head.weight");
}

TEST_CASE("gpt2: sizes by name and the published parameter counts", "[gpt2]") {
  const std::vector<std::pair<std::string, int64_t>> published{
      {"124M", 124439808}, {"gpt2-medium", 354823168}, {"774M", 774030080}, {"gpt2-xl", 1557611200}};
  for (const auto& [name, count] : published) {
    ModelConfig cfg;
    Gpt2Request r;
    r.size = name;
    configure_gpt2(r, cfg);
    INFO(name);
    CHECK(cfg.vocab == 50257);
    CHECK(cfg.n_positions == 1024);
    CHECK(gpt2_param_count(cfg) == count);
  }
  ModelConfig cfg;
  configure_gpt2({}, cfg);  // no size: 124M
  CHECK((cfg.n_layer == 12 && cfg.n_head == 12 && cfg.d_model == 768));
  Gpt2Request bad;
  bad.size = "125M";
  CHECK_THROWS_WITH(configure_gpt2(bad, cfg), Catch::Contains("125M") && Catch::Contains("355M (gpt2-medium)"));
  Gpt2Request odd;
  odd.width = 100;
  odd.heads = 3;
  CHECK_THROWS_WITH(configure_gpt2(odd, cfg), Catch::Contains("not divisible"));
}

TEST_CASE("gpt2: GPT-2's initialisation", "[gpt2]") {
  ModelConfig cfg = tiny_gpt2();
  cfg.d_model = 64;
  cfg.n_head = 4;
  cfg.vocab = 500;
  cfg.n_layer = 8;
  auto m = make_model("gpt2", cfg);
  auto span = [&](const std::string& n) {
    const auto& i = m->param_infos().at(m->store().find(n));
    return m->flat_params().subspan(i.offset, i.numel);
  };
  CHECK(stddev(span("transformer.wte.weight")) == Approx(0.02).epsilon(0.03));
  CHECK(stddev(span("transformer.wpe.weight")) == Approx(0.02).epsilon(0.1));
  CHECK(stddev(span("transformer.h.3.attn.c_attn.weight")) == Approx(0.02).epsilon(0.05));
  CHECK(stddev(span("transformer.h.3.mlp.c_fc.weight")) == Approx(0.02).epsilon(0.05));
  const double resid = 0.02 / std::sqrt(2.0 * 8);  // c_proj: 0.02 / sqrt(2 x layers)
  CHECK(stddev(span("transformer.h.3.attn.c_proj.weight")) == Approx(resid).epsilon(0.05));
  CHECK(stddev(span("transformer.h.3.mlp.c_proj.weight")) == Approx(resid).epsilon(0.05));
  for (const std::string n : {"transformer.h.3.attn.c_attn.bias", "transformer.h.3.mlp.c_proj.bias",
                              "transformer.ln_f.bias", "transformer.h.0.ln_1.bias"})
    for (float v : span(n)) REQUIRE(v == 0.0f);
  for (float v : span("transformer.h.0.ln_2.weight")) REQUIRE(v == 1.0f);
}

TEST_CASE("gpt2: dropout 0 is deterministic; dropout draws per step and resumes by rng_step", "[gpt2]") {
  Tokens b = make_tokens(2, 8, 23, 1);
  auto a0 = make_model("gpt2", tiny_gpt2(0.0f)), b0 = make_model("gpt2", tiny_gpt2(0.0f));
  const float l1 = a0->train_step(b.in, b.target), l2 = a0->train_step(b.in, b.target);
  CHECK(l1 == l2);  // no dropout: the same batch gives the same loss, bit for bit
  CHECK(b0->train_step(b.in, b.target) == l1);

  auto m = make_model("gpt2", tiny_gpt2(0.1f));
  m->forward(b.in, false);
  const float eval = m->loss(b.target);
  m->forward(b.in, false);
  CHECK(m->loss(b.target) == eval);  // evaluation drops nothing
  CHECK(m->rng_step() == 0);         // and does not advance the draws
  const float s0 = m->train_step(b.in, b.target), s1 = m->train_step(b.in, b.target);
  CHECK(m->rng_step() == 2);
  CHECK(s0 != eval);
  CHECK(s0 != s1);  // each training forward draws new masks
  m->set_rng_step(1);  // a resumed run sets the counter it saved
  CHECK(m->train_step(b.in, b.target) == s1);
  m->set_rng_step(1);
  m->set_rng_stream(5);  // another replica's stream
  CHECK(m->train_step(b.in, b.target) != s1);
}

TEST_CASE("cross entropy skips ignored labels and reports the sum and the count", "[gpt2][loss]") {
  Tensor logits({2, 3, 5});
  testing::fill_random(logits.span(), 3, -2.0f, 2.0f);
  std::vector<int32_t> labels{1, kIgnoreLabel, 4, kIgnoreLabel, kIgnoreLabel, 0};
  SoftmaxCrossEntropy ce;
  const float mean = ce.forward(logits, {labels.data(), nullptr}, 1.0f);
  CHECK(ce.last().count == 3);
  double want = 0;
  for (size_t r : {0, 2, 5}) {
    double s = 0;
    for (int j = 0; j < 5; ++j) s += std::exp(double(logits[r * 5 + j]));
    want += std::log(s) - logits[r * 5 + size_t(labels[r])];
  }
  CHECK(ce.last().sum == Approx(want).epsilon(1e-6));
  CHECK(mean == Approx(want / 3).epsilon(1e-6));
  for (size_t r : {1, 3, 4})
    for (int j = 0; j < 5; ++j) REQUIRE(ce.grad()[r * 5 + j] == 0.0f);
  std::vector<float> g(ce.grad().span().begin(), ce.grad().span().end());
  auto c = testing::check_gradient(
      logits.span(), g, [&] { return double(ce.forward(logits, {labels.data(), nullptr}, 1.0f)); }, 2e-3f);
  CHECK(c.rel_error < 1e-2);

  std::vector<int32_t> none(6, kIgnoreLabel);
  CHECK(ce.forward(logits, {none.data(), nullptr}, 1.0f) == 0.0f);  // PyTorch: NaN; a rank may hold only padding
  CHECK(ce.last().count == 0);
  for (float v : ce.grad().span()) REQUIRE(v == 0.0f);
  std::vector<int32_t> bad{1, 2, 3, -1, 0, 0};
  CHECK_THROWS_WITH(ce.forward(logits, {bad.data(), nullptr}, 1.0f),
                    Catch::Contains("label -1 of row 3") && Catch::Contains("-100"));
}

TEST_CASE("loss_sum with a global count equals the mean over the whole batch", "[gpt2][loss]") {
  // What a data-parallel step does: two shards of unequal target counts, each backward
  // scaled by 1 / (total count), add up to the full batch's mean-loss gradient.
  auto m = make_model("gpt2", tiny_gpt2());
  Tokens full = make_tokens(4, 8, 23, 9);
  for (int i = 0; i < 8; ++i) full.labels[size_t(i)] = kIgnoreLabel;  // sample 0: all padding
  full.labels[20] = kIgnoreLabel;
  m->zero_grad();
  const float mean = m->train_step(full.in, full.target);
  const std::vector<float> want(m->flat_grads().begin(), m->flat_grads().end());
  const int64_t total = count_target_labels(full.labels.data(), full.labels.size());
  CHECK(total == 32 - 9);
  m->zero_grad();
  double sum = 0;
  for (int half = 0; half < 2; ++half) {
    Tokens part;
    part.tokens.assign(full.tokens.begin() + half * 16, full.tokens.begin() + half * 16 + 16);
    part.labels.assign(full.labels.begin() + half * 16, full.labels.begin() + half * 16 + 16);
    part.in = {nullptr, part.tokens.data(), 2, {8}};
    part.target.labels = part.labels.data();
    m->forward(part.in, true);
    sum += m->loss_sum(part.target, 1.0f / float(total)).sum;
    m->backward();
  }
  CHECK(sum / double(total) == Approx(mean).epsilon(1e-6));
  double err = 0, norm = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    err = std::max(err, double(std::abs(m->flat_grads()[i] - want[i])));
    norm = std::max(norm, double(std::abs(want[i])));
  }
  INFO("max |sharded - full| = " << err << " of max " << norm);
  CHECK(err <= 1e-5 * norm);
}

TEST_CASE("safetensors: F16 and BF16 are widened, other dtypes refused by name", "[gpt2][checkpoint]") {
  // 1.0, -2.5, 65504 (max half), 2^-24 (smallest subnormal) as F16; 1.0, -3.0 as BF16.
  const uint16_t f16[] = {0x3c00, 0xc100, 0x7bff, 0x0001};
  const uint16_t bf16[] = {0x3f80, 0xc040};
  std::string header = R"({"a":{"dtype":"F16","shape":[2,2],"data_offsets":[0,8]},)"
                       R"("b":{"dtype":"BF16","shape":[2],"data_offsets":[8,12]}})";
  std::string file(8, '\0');
  const uint64_t len = header.size();
  std::memcpy(file.data(), &len, 8);
  file += header;
  file.append(reinterpret_cast<const char*>(f16), 8);
  file.append(reinterpret_cast<const char*>(bf16), 4);
  const SafetensorsContents c = parse_safetensors(file, "mem");
  REQUIRE(c.tensors.size() == 2);
  CHECK(c.tensors[0].dtype == "F16");
  CHECK(c.tensors[0].data == std::vector<float>{1.0f, -2.5f, 65504.0f, std::ldexp(1.0f, -24)});
  CHECK(c.tensors[1].data == std::vector<float>{1.0f, -3.0f});
  std::string i8 = R"({"q":{"dtype":"I8","shape":[4],"data_offsets":[0,4]}})";
  std::string bad(8, '\0');
  const uint64_t len2 = i8.size();
  std::memcpy(bad.data(), &len2, 8);
  bad += i8 + "abcd";
  CHECK_THROWS_WITH(parse_safetensors(bad, "mem"), Catch::Contains("tensor q has dtype I8"));
}

TEST_CASE("gpt2: save_gpt2_pretrained round-trips through load_gpt2_weights", "[gpt2][checkpoint]") {
  const auto dir = std::filesystem::temp_directory_path() / ("dpt_gpt2_export_" + std::to_string(::getpid()));
  auto a = make_model("gpt2", tiny_gpt2());
  ModelConfig other = tiny_gpt2();
  other.seed = 99;
  auto b = make_model("gpt2", other);
  save_gpt2_pretrained(dir.string(), a->param_infos(), a->flat_params(), tiny_gpt2());
  load_gpt2_weights((dir / "model.safetensors").string(), *b);
  CHECK(std::equal(a->flat_params().begin(), a->flat_params().end(), b->flat_params().begin()));
  std::ifstream in(dir / "config.json");
  const auto cfg = nlohmann::json::parse(in);
  CHECK(cfg["n_layer"] == 2);
  CHECK(cfg["n_embd"] == 16);
  CHECK(cfg["vocab_size"] == 23);
  // init_from through make_model: the same weights, and the file's shape read back.
  ModelConfig from;
  Gpt2Request r;
  r.init_from = (dir / "model.safetensors").string();
  configure_gpt2(r, from);  // heads from the config.json beside the file
  CHECK((from.n_layer == 2 && from.d_model == 16 && from.n_head == 2 && from.vocab == 23 && from.n_positions == 12));
  from.seq_len = 8;
  auto c = make_model("gpt2", from);
  CHECK(std::equal(a->flat_params().begin(), a->flat_params().end(), c->flat_params().begin()));
  // A flipped data byte in a file we wrote: refused by the streaming reader's CRC pass.
  {
    std::fstream f(dir / "model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-3, std::ios::end);
    char ch = 0;
    f.read(&ch, 1);
    f.seekp(-3, std::ios::end);
    ch = static_cast<char>(ch ^ 0x10);
    f.write(&ch, 1);
  }
  CHECK_THROWS_WITH(load_gpt2_weights((dir / "model.safetensors").string(), *b), Catch::Contains("checksum mismatch"));
  ModelConfig not_gpt2 = tiny_gpt2();
  not_gpt2.init_from = r.init_from;
  CHECK_THROWS_WITH(make_model("gpt", not_gpt2), Catch::Contains("only the gpt2 model"));
  std::filesystem::remove_all(dir);
}

namespace {

// A GPT-2-looking safetensors file of a few KiB: real 2x4 F32 embeddings, then a
// zero-byte tensor for each block named in `blocks` (the layer count is read from them).
std::string hostile_gpt2_file(const std::filesystem::path& dir, const std::vector<int64_t>& blocks) {
  nlohmann::ordered_json header;
  header["transformer.wte.weight"] = {{"dtype", "F32"}, {"shape", {2, 4}}, {"data_offsets", {0, 32}}};
  header["transformer.wpe.weight"] = {{"dtype", "F32"}, {"shape", {2, 4}}, {"data_offsets", {32, 64}}};
  for (int64_t b : blocks)
    header["transformer.h." + std::to_string(b) + ".ln_1.weight"] = {
        {"dtype", "F32"}, {"shape", nlohmann::json::array({0})}, {"data_offsets", {64, 64}}};
  const std::string text = header.dump();
  const uint64_t len = text.size();
  const std::string path = (dir / "hostile.safetensors").string();
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(&len), 8);
  out << text << std::string(64, '\0');
  return path;
}

}  // namespace

TEST_CASE("gpt2: --init-from's layer count must be one the file can fill", "[gpt2][checkpoint]") {
  const auto dir = std::filesystem::temp_directory_path() / ("dpt_gpt2_hostile_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  Gpt2Request r;
  r.heads = 2;  // --gpt-heads 2: the file's width (4) is no GPT-2 size; the shape is still the file's
  ModelConfig cfg;
  SECTION("a file naming block 2^40 - 1: refused before anything is sized by it") {
    r.init_from = hostile_gpt2_file(dir, {0, 1, (int64_t{1} << 40) - 1});
    CHECK(std::filesystem::file_size(r.init_from) < 4096);
    CHECK_THROWS_WITH(configure_gpt2(r, cfg), Catch::Contains(r.init_from) &&
                                                  Catch::Contains("tensor transformer.h.1099511627775.ln_1.weight") &&
                                                  Catch::Contains("3 blocks") && Catch::Contains("without a gap"));
  }
  SECTION("blocks 0..99 without a gap, but zero bytes of weights: refused by their size") {
    std::vector<int64_t> blocks(100);
    for (int64_t i = 0; i < 100; ++i) blocks[size_t(i)] = i;
    r.init_from = hostile_gpt2_file(dir, blocks);
    // 100 blocks of width 4: (12*16 + 13*4) values each, 2 bytes at least.
    CHECK_THROWS_WITH(configure_gpt2(r, cfg), Catch::Contains(r.init_from) && Catch::Contains("100 blocks") &&
                                                  Catch::Contains("at least 48800 bytes") &&
                                                  Catch::Contains("hold 0"));
  }
  std::filesystem::remove_all(dir);
}
