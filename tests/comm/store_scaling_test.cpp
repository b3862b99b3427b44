// Start-up's store traffic does not grow with the ranks at any rank but the gatherer
// (issue 58, item 3): gather_through_store (comm/store/store_gather.h) and the
// rendezvous (comm/store/rendezvous.h), with threads as ranks, each on its own client,
// and a store wrapper that counts what every rank asks.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <memory>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "comm/store/rendezvous.h"
#include "comm/store/store_gather.h"
#include "comm/store/tcp_store.h"

using namespace dpt;
using namespace std::chrono_literals;

namespace {

// Forwards to a TcpStoreClient and counts requests and the keys named in them.
class CountingStore : public Store {
 public:
  explicit CountingStore(const TcpStoreServer& s) : inner_("127.0.0.1", s.port(), 10000ms) {}
  void set(const std::string& k, const std::string& v) override { note(1), inner_.set(k, v); }
  std::string get(const std::string& k, Millis t) override { return note(1), inner_.get(k, t); }
  int64_t add(const std::string& k, int64_t d) override { return note(1), inner_.add(k, d); }
  void wait(const std::vector<std::string>& keys, Millis t) override {
    note(keys.size());
    most_keys_in_a_wait = std::max(most_keys_in_a_wait, keys.size());
    inner_.wait(keys, t);
  }
  bool check(const std::string& k) override { return note(1), inner_.check(k); }
  int requests = 0;
  size_t keys_named = 0, most_keys_in_a_wait = 0;

 private:
  void note(size_t keys) {
    ++requests;
    keys_named += keys;
  }
  TcpStoreClient inner_;
};

// Runs `body(rank, store)` on `world` threads, each with its own CountingStore.
template <class Body>
std::vector<std::unique_ptr<CountingStore>> run_ranks(const TcpStoreServer& server, int world, Body body) {
  std::vector<std::unique_ptr<CountingStore>> stores;
  for (int r = 0; r < world; ++r) stores.push_back(std::make_unique<CountingStore>(server));
  std::vector<std::string> errors(static_cast<size_t>(world));
  std::vector<std::thread> ts;
  for (int r = 0; r < world; ++r)
    ts.emplace_back([&, r] {
      try {
        body(r, *stores[size_t(r)]);
      } catch (const std::exception& e) {
        errors[size_t(r)] = e.what();
      }
    });
  for (auto& t : ts) t.join();
  for (const auto& e : errors) {
    INFO(e);
    CHECK(e.empty());
  }
  return stores;
}

}  // namespace

TEST_CASE("gather_through_store: every member gets every value, in members' order, any bytes", "[store]") {
  TcpStoreServer server("127.0.0.1", 0);
  const std::vector<int> members = {3, 0, 7, 5};  // any order, not 0..n-1; 3 gathers
  auto value = [](int r) {
    // Separators, digits, an empty value and a long one: the encoding must keep them all.
    if (r == 0) return std::string();
    if (r == 7) return std::string(5000, ':');
    return "12:" + std::to_string(r) + std::string(1, '\0') + "\n ";
  };
  std::vector<std::vector<std::string>> got(8);  // by rank
  run_ranks(server, 8, [&](int r, Store& s) {
    if (std::find(members.begin(), members.end(), r) == members.end()) return;
    got[size_t(r)] = gather_through_store(s, "g", members, r, value(r), 5000ms, {});
  });
  for (int r : members) {
    REQUIRE(got[size_t(r)].size() == members.size());
    for (size_t i = 0; i < members.size(); ++i) CHECK(got[size_t(r)][i] == value(members[i]));
  }
}

TEST_CASE("gather_through_store: two requests per member, one per member at the gatherer", "[store]") {
  for (int world : {4, 32}) {
    TcpStoreServer server("127.0.0.1", 0);
    auto stores = run_ranks(server, world, [&](int r, Store& s) {
      const auto all = gather_through_store(s, "g", world, r, std::to_string(r * r), 10000ms, {});
      for (int p = 0; p < world; ++p) REQUIRE(all[size_t(p)] == std::to_string(p * p));
    });
    INFO("world " << world);
    CHECK(stores[0]->requests == world);  // world - 1 gets and one set
    for (int r = 1; r < world; ++r) CHECK(stores[size_t(r)]->requests == 2);
  }
}

TEST_CASE("gather_through_store: a malformed gathered key is a MismatchError naming it", "[store]") {
  TcpStoreServer server("127.0.0.1", 0);
  CountingStore s(server);
  for (const std::string bad : {"3:abc", "1:a", "x:ab", "2:ab1:c", "99999999999999:a"}) {
    s.set("g" + std::to_string(bad.size()) + "/all", bad);
    try {
      gather_through_store(s, "g" + std::to_string(bad.size()), 3, 1, "v", 1000ms, {});
      FAIL("no error for '" << bad << "'");
    } catch (const MismatchError& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find("/all does not hold 3 values") != std::string::npos);
    }
  }
}

TEST_CASE("rendezvous: only rank 0 waits on every rank's key; the others on one", "[store]") {
  // Before, every rank's wait named all P keys: the store parsed P keys per rank per
  // slice. Ranks arrive 10 ms apart, so the early ones wait several slices.
  constexpr int kWorld = 24;
  TcpStoreServer server("127.0.0.1", 0);
  auto stores = run_ranks(server, kWorld, [&](int r, Store& s) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10 * ((r * 7) % kWorld)));
    rendezvous(s, "job", r, kWorld, 20000ms);
  });
  CHECK(stores[0]->most_keys_in_a_wait == size_t(kWorld));
  for (int r = 1; r < kWorld; ++r) {
    INFO("rank " << r << ": " << stores[size_t(r)]->requests << " requests");
    CHECK(stores[size_t(r)]->most_keys_in_a_wait == 1);
    CHECK(stores[size_t(r)]->requests <= 12);
  }
}
