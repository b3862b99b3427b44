// Mixed precision: the fp32 master keeps updates that bf16 working weights cannot hold,
// the working weights are always the master's bf16 rounding, and the 16-bit wire helpers
// round to nearest even and widen exactly.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <vector>

#include "comm/half.h"
#include "parallel/precision/master_weights.h"
#include "parallel/precision/wire16.h"

namespace {

bool is_bf16(float v) { return dpt::bf16_to_float(dpt::float_to_bf16(v)) == v; }

}  // namespace

TEST_CASE("master weights: sub-ulp updates accumulate in the master, working = round(master)", "[master]") {
  // 1.0 has a bf16 ulp of 2^-7; SGD steps of 1e-4 are far below half of it.
  std::vector<float> working(64, 1.0f), grads(64, 1.0f);
  working[3] = 0.1f;  // not a bf16 value: adopt must keep it in full and round the working copy
  dpt::MasterWeights master(dpt::DType::bf16);
  master.adopt(working);
  REQUIRE(master.values()[3] == 0.1f);
  REQUIRE(working[3] != 0.1f);
  REQUIRE(is_bf16(working[3]));
  auto sgd = dpt::make_optimizer("sgd", {}, working.size());
  for (int s = 0; s < 100; ++s) master.step(*sgd, working, grads, 1e-4f);
  // 100 steps of 1e-4: the master moved by 0.01 (about 1.3 bf16 ulps of 1.0) ...
  CHECK(std::fabs(master.values()[0] - 0.99f) < 1e-5f);
  // ... and the working weight is its rounding, not 1.0 (what bf16 alone would keep:
  // each single update rounds back to 1.0).
  CHECK(working[0] == dpt::bf16_to_float(dpt::float_to_bf16(master.values()[0])));
  CHECK(working[0] < 1.0f);
  float bf16_alone = 1.0f;
  for (int s = 0; s < 100; ++s) bf16_alone = dpt::bf16_to_float(dpt::float_to_bf16(bf16_alone - 1e-4f));
  CHECK(bf16_alone == 1.0f);
  // expose puts the master back in full precision; rounding it gives working back.
  std::vector<float> exposed(working.size());
  master.expose(exposed);
  CHECK(exposed[3] == master.values()[3]);
  std::vector<float> again = exposed;
  dpt::round_bf16(again);
  CHECK(again == working);
  std::vector<float> wrong(3);
  CHECK_THROWS_WITH(master.expose(wrong), Catch::Contains("3 elements"));
}

TEST_CASE("wire16: pack divides then rounds, unpack is exact", "[master]") {
  const std::vector<float> src = {1.0f, 3.0f, -0.3f, 65504.0f, 1e-3f};
  for (dpt::DType wire : {dpt::DType::bf16, dpt::DType::f16}) {
    std::vector<uint16_t> packed(src.size());
    std::vector<float> back(src.size());
    dpt::pack16(wire, src.data(), packed.data(), src.size(), 0.5f);
    dpt::unpack16(wire, packed.data(), back.data(), src.size());
    for (size_t i = 0; i < src.size(); ++i) {
      INFO(dpt::dtype_name(wire) << " element " << i);
      const float expect = wire == dpt::DType::bf16 ? dpt::bf16_to_float(dpt::float_to_bf16(src[i] * 0.5f))
                                                    : dpt::half_to_float(dpt::float_to_half(src[i] * 0.5f));
      CHECK(back[i] == expect);
      CHECK(std::fabs(back[i] - src[i] * 0.5f) <= std::fabs(src[i]) * (wire == dpt::DType::bf16 ? 4e-3f : 1e-3f));
    }
  }
  CHECK_THROWS_WITH(dpt::check_wire16(dpt::DType::f32, "test"), Catch::Contains("bf16 or f16"));
}

TEST_CASE("wire16: 16-bit values in a buffer's first half widen in place", "[master]") {
  std::vector<float> expect = {0.5f, -3.0f, 1.0f / 3.0f, 1e-3f, 7.0f, -0.1f, 2.0f};
  for (dpt::DType wire : {dpt::DType::bf16, dpt::DType::f16}) {
    std::vector<uint16_t> packed(expect.size());
    dpt::pack16(wire, expect.data(), packed.data(), expect.size());
    std::vector<float> want(expect.size()), buf(expect.size(), 123.0f);
    dpt::unpack16(wire, packed.data(), want.data(), want.size());
    std::memcpy(buf.data(), packed.data(), packed.size() * 2);  // as an allgather leaves it
    dpt::widen16_in_place(wire, buf.data(), buf.size());
    CHECK(buf == want);
  }
}
