// Sharded build (ParamStore::set_resident_shard, ZeRO-3): a model built as rank r of N
// keeps only r's shard of its parameters resident. Checked against the same model
// built whole (the reference is the whole build's values, which the sharded one must
// reproduce in its shard): values bit for bit inside the shard, zeros outside,
// resident pages (mincore) about the shard's size, gradients untouched, fingerprints
// equal across ranks and different for another seed; loading a checkpoint or Hugging
// Face weights into a sharded build keeps the same properties.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>

#include "models/io/checkpoint.h"
#include "models/zoo/gpt2.h"
#include "models/io/gpt2_weights.h"
#include "models/zoo/models.h"
#include "models/kernels/cpu/page_memory.h"
#include "tests/support/temp_dir.h"

using namespace dpt;

namespace {

constexpr int kWorld = 4;

// ~10.7M parameters (43 MB), so a shard spans thousands of pages.
ModelConfig medium_gpt(uint64_t seed = 7) {
  ModelConfig cfg;
  cfg.seed = seed;
  cfg.d_model = 384;
  cfg.n_layer = 6;
  cfg.n_head = 6;
  cfg.seq_len = 16;
  return cfg;
}

ModelConfig as_rank(ModelConfig cfg, int rank) {
  cfg.resident_rank = rank;
  cfg.resident_world = kWorld;
  return cfg;
}

bool same_bits(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

// The sharded build holds the whole build's values in its shard, zeros elsewhere, and
// about the shard's bytes resident.
void check_shard(Module& sharded, Module& whole, int rank) {
  const auto [b, e] = sharded.store().resident_range();
  const size_t p = whole.num_params(), s = (p + kWorld - 1) / kWorld;
  REQUIRE(b == std::min(p, size_t(rank) * s));
  REQUIRE(e == std::min(p, b + s));
  const auto mine = sharded.flat_params(), ref = whole.flat_params();
  // Measured before any read of the released elements: a read maps the kernel's zero
  // page, which mincore counts as resident though it costs no RAM.
  // Resident: the shard plus at most a few pages at its edges (and at parameter edges
  // that share a page with it); a whole build holds all of it.
  const size_t resident = resident_bytes(mine.data(), mine.size_bytes());
  INFO("rank " << rank << ": " << resident << " bytes resident, shard " << (e - b) * 4 << ", whole " << p * 4);
  CHECK(resident >= (e - b) * sizeof(float));
  CHECK(resident <= (e - b) * sizeof(float) + (size_t(4) << 20));
  CHECK(same_bits(mine.data() + b, ref.data() + b, e - b));
  CHECK(std::all_of(mine.begin(), mine.begin() + ptrdiff_t(b), [](float v) { return v == 0.0f; }));
  CHECK(std::all_of(mine.begin() + ptrdiff_t(e), mine.end(), [](float v) { return v == 0.0f; }));
  const auto g = sharded.flat_grads();
  CHECK(resident_bytes(g.data(), g.size_bytes()) == 0);
}

}  // namespace

TEST_CASE("a sharded build keeps only its shard, bit for bit the whole build's", "[sharded]") {
  auto whole = make_model("gpt", medium_gpt());
  REQUIRE(!whole->store().sharded());
  CHECK(resident_bytes(whole->flat_params().data(), whole->flat_params().size_bytes()) >=
        whole->num_params() * sizeof(float));
  uint64_t fingerprint = 0;
  for (int r = 0; r < kWorld; ++r) {
    auto sharded = make_model("gpt", as_rank(medium_gpt(), r));
    REQUIRE(sharded->store().sharded());
    check_shard(*sharded, *whole, r);
    if (r == 0) fingerprint = sharded->store().fingerprint();
    CHECK(sharded->store().fingerprint() == fingerprint);  // every rank built the same model
  }
  CHECK(fingerprint != 0);
  auto other_seed = make_model("gpt", as_rank(medium_gpt(8), 1));
  CHECK(other_seed->store().fingerprint() != fingerprint);
  CHECK(whole->store().fingerprint() == 0);  // unsharded stores record nothing
}

TEST_CASE("a checkpoint loaded into a sharded build keeps only the shard", "[sharded]") {
  testing::TempDir dir("sharded_load");
  auto source = make_model("gpt", medium_gpt(11));
  save_model(dir.file("m.safetensors"), *source);
  auto built_from_seed = make_model("gpt", as_rank(medium_gpt(11), 2));
  for (int r = 0; r < kWorld; ++r) {
    auto sharded = make_model("gpt", as_rank(medium_gpt(5), r));  // another seed: the file overrides it
    load_model(dir.file("m.safetensors"), *sharded);
    check_shard(*sharded, *source, r);
    CHECK(sharded->store().fingerprint() == built_from_seed->store().fingerprint());
  }
}

TEST_CASE("Hugging Face weights loaded into a sharded gpt2 keep only the shard", "[sharded]") {
  testing::TempDir dir("sharded_hf");
  ModelConfig cfg;
  Gpt2Request req;
  req.layers = 4;
  req.width = 256;
  req.heads = 4;
  req.vocab = 3000;
  req.positions = 64;
  configure_gpt2(req, cfg);
  cfg.seq_len = 16;
  cfg.seed = 3;
  auto source = make_model("gpt2", cfg);
  save_gpt2_pretrained(dir.str(), source->param_infos(), source->flat_params(), cfg);
  cfg.seed = 4;  // the file overrides it
  cfg.init_from = dir.file("model.safetensors");
  for (int r = 0; r < kWorld; ++r) {
    auto sharded = make_model("gpt2", as_rank(cfg, r));
    check_shard(*sharded, *source, r);
  }
}
