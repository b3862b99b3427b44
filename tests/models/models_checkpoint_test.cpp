// Safetensors checkpoints: an intact file round-trips bit for bit; a truncated or
// corrupted one fails with a CheckpointError that names the file and the fault.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "models/io/checkpoint.h"
#include "models/zoo/models.h"
#include "models_test_util.h"

using namespace dpt;
namespace fs = std::filesystem;

namespace {

struct TempFolder {
  fs::path path;
  TempFolder() {
    path = fs::temp_directory_path() / ("dpt_ckpt_test_" + std::to_string(::getpid()) + "_" +
                                        std::to_string(counter()++));
    fs::create_directories(path);
  }
  ~TempFolder() { fs::remove_all(path); }
  static int& counter() {
    static int c = 0;
    return c;
  }
};

std::vector<char> read_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

void write_bytes(const fs::path& p, const std::vector<char>& b) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(b.data(), static_cast<std::streamsize>(b.size()));
}

ModelConfig small_gpt() {
  ModelConfig cfg;
  cfg.vocab = 17;
  cfg.seq_len = 8;
  cfg.d_model = 8;
  cfg.n_layer = 2;
  cfg.n_head = 2;
  return cfg;
}

// Writes a raw safetensors file from a header JSON and data bytes.
void write_raw(const fs::path& p, const std::string& header, const std::vector<char>& data) {
  std::vector<char> b(8);
  uint64_t n = header.size();
  std::memcpy(b.data(), &n, 8);
  b.insert(b.end(), header.begin(), header.end());
  b.insert(b.end(), data.begin(), data.end());
  write_bytes(p, b);
}

}  // namespace

TEST_CASE("checkpoint: a model round-trips bit for bit", "[models][checkpoint]") {
  TempFolder dir;
  const std::string path = (dir.path / "gpt.safetensors").string();
  ModelConfig cfg = small_gpt();
  auto a = make_model("gpt", cfg);
  // Values with every bit pattern class: negative zero, denormal, large, tiny.
  auto p = a->flat_params();
  p[0] = -0.0f;
  p[1] = 1e-40f;
  p[2] = 3.4e38f;
  p[3] = -1.17549435e-38f;
  save_model(path, *a, {{"epoch", "3"}, {"note", "hello"}});
  cfg.seed = 999;  // different initial values
  auto b = make_model("gpt", cfg);
  REQUIRE_FALSE(std::memcmp(a->flat_params().data(), b->flat_params().data(), a->num_params() * 4) == 0);
  Metadata meta = load_model(path, *b);
  CHECK(std::memcmp(a->flat_params().data(), b->flat_params().data(), a->num_params() * 4) == 0);
  CHECK(meta.at("epoch") == "3");
  CHECK(meta.at("note") == "hello");
  CHECK(meta.at("format") == "pt");
  // No temporary file left behind, and the header is what Python expects.
  size_t files = 0;
  for (auto& e : fs::directory_iterator(dir.path)) ++files, (void)e;
  CHECK(files == 1);
  auto bytes = read_bytes(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  CHECK(n % 8 == 0);
  auto header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + long(n));
  CHECK(header["tok_emb.weight"]["dtype"] == "F32");
  CHECK(header["tok_emb.weight"]["shape"] == nlohmann::json::array({17, 8}));
  CHECK(header["tok_emb.weight"]["data_offsets"] == nlohmann::json::array({0, 17 * 8 * 4}));
}

TEST_CASE("checkpoint: generic named tensors and the sidecar path", "[models][checkpoint]") {
  TempFolder dir;
  const std::string path = (dir.path / "state.safetensors").string();
  std::vector<float> m1{1, 2, 3, 4, 5, 6}, m2{-1.5f};
  save_safetensors(path, {{"exp_avg.fc1.weight", {2, 3}, m1}, {"step", {1}, m2}}, {{"step", "42"}});
  auto c = load_safetensors(path);
  REQUIRE(c.tensors.size() == 2);
  REQUIRE(c.find("exp_avg.fc1.weight"));
  CHECK(c.find("exp_avg.fc1.weight")->shape == std::vector<int64_t>{2, 3});
  CHECK(c.find("exp_avg.fc1.weight")->data == m1);
  CHECK(c.find("step")->data == m2);
  CHECK(c.metadata.at("step") == "42");
  CHECK(sidecar_path("run/model.safetensors", "optim") == "run/model.optim.safetensors");
  CHECK(sidecar_path("ckpt", "optim") == "ckpt.optim.safetensors");
  // Overwriting replaces atomically.
  save_safetensors(path, {{"x", {1}, m2}});
  CHECK(load_safetensors(path).tensors.size() == 1);
}

// Found by tests/fuzz/fuzz_checkpoint: an empty tensor written first shares its offset
// with the next one, and the loader used to reject the file as "gap or overlap".
TEST_CASE("checkpoint: empty tensors load wherever the writer put them", "[models][checkpoint]") {
  TempFolder dir;
  const std::string path = (dir.path / "empty.safetensors").string();
  std::vector<float> none, a{1, 2, 3, 4};
  save_safetensors(path, {{"z_empty", {0, 4}, none}, {"a", {4}, a}, {"m_empty", {0}, none}});
  auto c = load_safetensors(path);
  REQUIRE(c.tensors.size() == 3);
  CHECK(c.find("z_empty")->shape == std::vector<int64_t>{0, 4});
  CHECK(c.find("z_empty")->data.empty());
  CHECK(c.find("a")->data == a);
  CHECK(c.find("m_empty")->data.empty());
}

TEST_CASE("checkpoint: truncated files fail with a clear error", "[models][checkpoint]") {
  TempFolder dir;
  const fs::path good = dir.path / "mlp.safetensors";
  auto m = make_model("toy", {});
  save_model(good.string(), *m);
  const auto bytes = read_bytes(good);
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  const std::vector<size_t> cuts{0, 3, 8, 8 + header_len / 2, 8 + header_len, 8 + header_len + 17,
                                 bytes.size() - 1};
  for (size_t cut : cuts) {
    DYNAMIC_SECTION("cut at " << cut) {
      const fs::path bad = dir.path / "cut.safetensors";
      write_bytes(bad, std::vector<char>(bytes.begin(), bytes.begin() + long(cut)));
      auto other = make_model("toy", {});
      std::vector<float> before(other->flat_params().begin(), other->flat_params().end());
      try {
        load_model(bad.string(), *other);
        FAIL("a file cut at " << cut << " of " << bytes.size() << " bytes loaded");
      } catch (const CheckpointError& e) {
        INFO(e.what());
        CHECK(std::string(e.what()).find(bad.string()) != std::string::npos);
        CHECK(e.path() == bad.string());
      }
      // A failed load leaves the model as it was.
      CHECK(std::equal(before.begin(), before.end(), other->flat_params().begin()));
    }
  }
}

TEST_CASE("checkpoint: corrupted bytes fail with a clear error", "[models][checkpoint]") {
  TempFolder dir;
  const fs::path good = dir.path / "toy.safetensors";
  auto m = make_model("toy", {});
  save_model(good.string(), *m);
  const auto bytes = read_bytes(good);
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  struct Corruption {
    std::string what;
    size_t offset;
    char value;
    std::string expect;
  };
  const std::string header(bytes.begin() + 8, bytes.begin() + 8 + long(header_len));
  const size_t brace = 8 + header.find('{');
  const size_t shape_digit = 8 + header.find("[10,10]") + 2;
  const std::vector<Corruption> cases{
      {"header length high byte", 7, char(0x40), "header length"},
      {"header length low byte", 0, char(bytes[0] + 1), ""},
      {"opening brace", brace, 'x', "JSON"},
      {"shape digit", shape_digit, '9', "shape"},
      {"first data byte", 8 + header_len, char(bytes[8 + header_len] ^ 0x01), "checksum"},
      {"last data byte", bytes.size() - 1, char(bytes.back() ^ 0x80), "checksum"},
  };
  for (const auto& c : cases) {
    DYNAMIC_SECTION(c.what) {
      auto b = bytes;
      b[c.offset] = c.value;
      REQUIRE(b != bytes);
      const fs::path bad = dir.path / "bad.safetensors";
      write_bytes(bad, b);
      auto other = make_model("toy", {});
      try {
        load_model(bad.string(), *other);
        FAIL("corrupted file loaded");
      } catch (const CheckpointError& e) {
        INFO(e.what());
        CHECK(std::string(e.what()).find(bad.string()) != std::string::npos);
        if (!c.expect.empty()) CHECK(std::string(e.what()).find(c.expect) != std::string::npos);
      }
    }
  }
}

TEST_CASE("checkpoint: malformed headers are rejected by name", "[models][checkpoint]") {
  TempFolder dir;
  const fs::path p = dir.path / "raw.safetensors";
  std::vector<char> data(16, 0);
  auto expect_error = [&](const std::string& header, const std::vector<char>& d, const std::string& msg) {
    write_raw(p, header, d);
    CHECK_THROWS_MATCHES(load_safetensors(p.string()), CheckpointError,
                         Catch::Matchers::Predicate<CheckpointError>(
                             [&](const CheckpointError& e) {
                               return std::string(e.what()).find(msg) != std::string::npos &&
                                      std::string(e.what()).find(p.string()) != std::string::npos;
                             },
                             "message contains '" + msg + "'"));
  };
  write_raw(p, R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", data);  // valid
  CHECK(load_safetensors(p.string()).tensors.size() == 1);
  expect_error(R"({"a":{"dtype":"Q7","shape":[4],"data_offsets":[0,16]}})", data, "unknown dtype");
  expect_error(R"({"a":{"dtype":"I32","shape":[4],"data_offsets":[0,16]}})", data, "supported are F32, F16, BF16 (and I64 for counters)");
  expect_error(R"({"a":{"dtype":"F16","shape":[4],"data_offsets":[0,16]}})", data, "in F16 needs 8 bytes");
  expect_error(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,32]}})", data, "outside");
  expect_error(R"({"a":{"dtype":"F32","shape":[5],"data_offsets":[0,16]}})", data, "needs 20 bytes");
  expect_error(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", data, "cover");
  expect_error(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
               data, "gap or overlap");
  expect_error(R"({"a":{"dtype":"F32","shape":[4]}})", data, "lacks");
  expect_error(R"({"a":{"dtype":"F32","shape":[-4],"data_offsets":[0,16]}})", data, "shape");
  expect_error(R"([1,2,3])", data, "not a JSON object");
  expect_error(R"({"__metadata__":{"k":5}})", {}, "not a string");
  expect_error(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,16]}})", data, "");
  // A header length claiming far more than the file holds: no huge allocation, an error.
  std::vector<char> b(8);
  uint64_t huge = ~0ull;
  std::memcpy(b.data(), &huge, 8);
  write_bytes(p, b);
  CHECK_THROWS_WITH(load_safetensors(p.string()), Catch::Contains("header length"));
  CHECK_THROWS_AS(load_safetensors((dir.path / "missing.safetensors").string()), CheckpointError);
}

TEST_CASE("checkpoint: a pipe or a directory is refused by name, before any read", "[models][checkpoint]") {
  // A checkpoint is read by offset, so a pipe (what /dev/stdin or <(zcat x) names) cannot
  // be one: the error says so and what to do, rather than "truncated" or a hang.
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const std::string via_proc = "/proc/self/fd/" + std::to_string(fds[0]);
  CHECK_THROWS_WITH(load_safetensors(via_proc),
                    Catch::Contains(via_proc) && Catch::Contains("not a regular file") &&
                        Catch::Contains("copy it to a file first"));
  ::close(fds[0]);
  ::close(fds[1]);
  TempFolder dir;
  CHECK_THROWS_WITH(load_safetensors(dir.path.string()), Catch::Contains("is a directory"));
}

TEST_CASE("checkpoint: names and shapes are checked against the model", "[models][checkpoint]") {
  TempFolder dir;
  const std::string path = (dir.path / "m.safetensors").string();
  auto toy = make_model("toy", {});
  auto mlp = make_model("mlp", {});
  save_model(path, *toy);
  CHECK_THROWS_WITH(load_model(path, *mlp), Catch::Contains("missing tensor fc1.weight"));
  // Same names, different shape.
  std::vector<float> w(20, 0.0f);
  std::vector<NamedTensorView> views = param_views(toy->param_infos(), toy->flat_params());
  views[0].shape = {2, 50};
  views[0].data = std::span<const float>(toy->flat_params().data(), 100);
  save_safetensors(path, views);
  CHECK_THROWS_WITH(load_model(path, *toy), Catch::Contains("net1.weight has shape [2, 50]"));
  // An extra tensor is reported too (strict loading, like PyTorch's strict=True).
  views = param_views(toy->param_infos(), toy->flat_params());
  views.push_back({"module.extra", {20}, w});
  save_safetensors(path, views);
  CHECK_THROWS_WITH(load_model(path, *toy), Catch::Contains("unexpected tensor module.extra"));
}

TEST_CASE("checkpoint: keep_own tensors keep the model's values, whatever the file holds", "[models][checkpoint]") {
  // Fine-tuning's head replacement (train/init_from.h): net2 of another shape in the
  // file is ignored, the model keeps its own net2, and everything else loads.
  TempFolder dir;
  const std::string path = (dir.path / "m.safetensors").string();
  ModelConfig other_seed;
  other_seed.seed = 77;
  auto source = make_model("toy", other_seed);
  std::vector<NamedTensorView> views = param_views(source->param_infos(), source->flat_params());
  std::vector<float> wide(10 * 9, 0.5f), wide_bias(9, 0.25f);
  for (auto& v : views) {
    if (v.name == "net2.weight") v.shape = {9, 10}, v.data = wide;
    if (v.name == "net2.bias") v.shape = {9}, v.data = wide_bias;
  }
  save_safetensors(path, views);
  auto model = make_model("toy", {});
  const std::vector<float> before(model->flat_params().begin(), model->flat_params().end());
  CHECK_THROWS_WITH(load_model(path, *model), Catch::Contains("net2.weight has shape [9, 10]"));
  load_model(path, *model, {"net2.weight", "net2.bias"});
  for (const auto& p : model->param_infos()) {
    const float* got = model->flat_params().data() + p.offset;
    const float* want = (p.name.rfind("net2.", 0) == 0 ? before.data() : source->flat_params().data()) + p.offset;
    CHECK(std::memcmp(got, want, p.numel * sizeof(float)) == 0);
  }
  // Other unknown names are still refused.
  views.push_back({"module.extra", {20}, std::span<const float>(wide.data(), 20)});
  save_safetensors(path, views);
  CHECK_THROWS_WITH(load_model(path, *model, {"net2.weight", "net2.bias"}), Catch::Contains("unexpected tensor module.extra"));
}
