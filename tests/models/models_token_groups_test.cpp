// TokenGroups (models/nn/token_groups.h): the grouping the GPU's embedding backward adds in.
// Against a direct reference: for every id in increasing order, its positions in
// increasing order; starts delimit exactly those runs; a bad id is named with its position.
#include <catch2/catch.hpp>

#include <map>
#include <random>
#include <vector>

#include "models/nn/token_groups.h"

using namespace dpt;

TEST_CASE("token groups list each id's positions in increasing order", "[models]") {
  std::mt19937 gen(3);
  for (const int vocab : {1, 7, 50257}) {
    for (const int count : {0, 1, 37, 4096}) {
      DYNAMIC_SECTION("vocab " << vocab << " count " << count) {
        // Skewed draws: a few ids repeat often (as "the" and padding do), most never occur.
        std::vector<int32_t> tokens(static_cast<size_t>(count));
        std::geometric_distribution<int32_t> skew(0.05);
        for (auto& t : tokens) t = skew(gen) % vocab;
        std::map<int32_t, std::vector<int32_t>> want;
        for (int p = 0; p < count; ++p) want[tokens[size_t(p)]].push_back(p);
        TokenGroups g;
        g.build(tokens, vocab);
        REQUIRE(g.count() == count);
        REQUIRE(g.distinct() == static_cast<int>(want.size()));
        REQUIRE(g.words().size() == size_t(count) + 2 * want.size() + 1);
        CHECK(g.starts()[0] == 0);
        CHECK(g.starts()[want.size()] == count);
        size_t k = 0;
        for (const auto& [id, positions] : want) {
          INFO("group " << k << " id " << id);
          CHECK(g.ids()[k] == id);
          const auto got = g.order().subspan(size_t(g.starts()[k]), size_t(g.starts()[k + 1] - g.starts()[k]));
          CHECK(std::vector<int32_t>(got.begin(), got.end()) == positions);
          ++k;
        }
      }
    }
  }
}

TEST_CASE("token groups refuse an id outside the vocabulary by position", "[models]") {
  TokenGroups g;
  const std::vector<int32_t> tokens{0, 3, 5, 2};
  CHECK_THROWS_WITH(g.build(tokens, 5), Catch::Contains("token id 5 at position 2 outside [0, 5)"));
  const std::vector<int32_t> negative{-1};
  CHECK_THROWS_WITH(g.build(negative, 5), Catch::Contains("token id -1 at position 0"));
}
