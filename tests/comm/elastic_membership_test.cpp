// ElasticRendezvous in one process: threads play the processes of an elastic job, each
// with its own store client to one TcpStoreServer (as tools/launch --elastic serves it).
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <future>
#include <thread>

#include "comm/store/elastic_membership.h"
#include "comm/store/tcp_store.h"

using namespace dpt;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

struct Job {
  TcpStoreServer server{"127.0.0.1", 0, "elastic-membership-test-token"};
  ElasticLimits limits;
  Job(int min, int max, Millis settle) {
    limits.min = min;
    limits.max = max;
    limits.settle = settle;
    limits.timeout = 20s;
  }
  // One "process": its own client, arriving in generation g with rank prev.
  std::future<Membership> arrive(const std::string& id, int g, int prev, Millis delay = 0ms) {
    return std::async(std::launch::async, [this, id, g, prev, delay] {
      std::this_thread::sleep_for(delay);
      TcpStoreClient store("127.0.0.1", server.port(), 10s, {}, "elastic-membership-test-token");
      ElasticRendezvous rdzv(store, id, limits);
      return rdzv.form(g, prev);
    });
  }
  TcpStoreClient client() { return TcpStoreClient("127.0.0.1", server.port(), 10s, {}, "elastic-membership-test-token"); }
};

std::vector<Membership> all(std::vector<std::future<Membership>>& fs) {
  std::vector<Membership> out;
  for (auto& f : fs) out.push_back(f.get());
  return out;
}

}  // namespace

TEST_CASE("elastic: generation 0 forms from max arrivals, ranks by id", "[elastic]") {
  Job job(2, 4, 10s);
  std::vector<std::future<Membership>> fs;
  for (const char* id : {"n0.l3.i0", "n0.l1.i0", "n0.l0.i0", "n0.l2.i0"}) fs.push_back(job.arrive(id, 0, -1));
  const auto t0 = Clock::now();
  auto ms = all(fs);
  CHECK(Clock::now() - t0 < 5s);  // all four arrived: no settle wait
  for (const auto& m : ms) {
    REQUIRE(m.size() == 4);
    CHECK(m.ids == std::vector<std::string>{"n0.l0.i0", "n0.l1.i0", "n0.l2.i0", "n0.l3.i0"});
    CHECK(m.lost.empty());
  }
  CHECK(ms[0].rank == 3);
  CHECK(ms[2].rank == 0);
  auto c = job.client();
  CHECK(ElasticRendezvous(c, "observer", job.limits).current() == 0);
}

TEST_CASE("elastic: a dead member is not waited for; survivors keep their order", "[elastic]") {
  Job job(2, 4, 30s);  // a long settle: only the dead mark can close the list quickly
  std::vector<std::future<Membership>> g0;
  for (const char* id : {"a", "b", "c", "d"}) g0.push_back(job.arrive(id, 0, -1));
  auto m0 = all(g0);
  auto c = job.client();
  ElasticRendezvous::mark_dead(c, "b", "killed by signal 9");
  std::vector<std::future<Membership>> g1;
  g1.push_back(job.arrive("d", 1, 3));
  g1.push_back(job.arrive("a", 1, 0, 200ms));
  g1.push_back(job.arrive("c", 1, 2, 400ms));
  const auto t0 = Clock::now();
  auto m1 = all(g1);
  CHECK(Clock::now() - t0 < 5s);
  for (const auto& m : m1) {
    CHECK(m.ids == std::vector<std::string>{"a", "c", "d"});
    CHECK(m.prev_ranks == std::vector<int>{0, 2, 3});
    CHECK(m.lost == std::vector<std::string>{"b"});
  }
  CHECK(m1[0].rank == 2);
  CHECK(m1[1].rank == 0);
}

TEST_CASE("elastic: a hung member closes the list after the settle time; it is excluded when it comes", "[elastic]") {
  Job job(2, 3, 1500ms);
  std::vector<std::future<Membership>> g0;
  for (const char* id : {"a", "b", "c"}) g0.push_back(job.arrive(id, 0, -1));
  all(g0);
  std::vector<std::future<Membership>> g1;
  const auto t0 = Clock::now();
  g1.push_back(job.arrive("a", 1, 0));
  g1.push_back(job.arrive("c", 1, 2));
  auto m1 = all(g1);
  const auto waited = Clock::now() - t0;
  CHECK(waited >= 1500ms);  // nobody knew b was gone: the settle time passed first
  CHECK(waited < 8s);
  CHECK(m1[0].ids == std::vector<std::string>{"a", "c"});
  CHECK(m1[0].lost == std::vector<std::string>{"b"});
  // b wakes up and tries generation 1: the list is closed without it.
  auto late = job.arrive("b", 1, 1).get();
  CHECK(late.excluded());
  CHECK(late.size() == 2);
}

TEST_CASE("elastic: below the minimum every survivor gets the error naming the lost", "[elastic]") {
  Job job(3, 3, 30s);
  std::vector<std::future<Membership>> g0;
  for (const char* id : {"a", "b", "c"}) g0.push_back(job.arrive(id, 0, -1));
  all(g0);
  auto c = job.client();
  ElasticRendezvous::mark_dead(c, "a", "exit 1");
  std::vector<std::future<Membership>> g1;
  g1.push_back(job.arrive("b", 1, 1));
  g1.push_back(job.arrive("c", 1, 2));
  for (auto& f : g1) {
    try {
      f.get();
      FAIL("the generation formed below the minimum");
    } catch (const ElasticError& e) {
      CHECK_THAT(e.what(), Catch::Contains("below the minimum of 3") && Catch::Contains("lost: [a]"));
    }
  }
}

TEST_CASE("elastic: a newcomer waits for the members, joins after the survivors, max caps the group", "[elastic]") {
  // Generation 0 closes with 2 of max 3 only after the settle time: a short one.
  Job small(1, 3, 500ms);
  std::vector<std::future<Membership>> g0;
  for (const char* id : {"a", "b"}) g0.push_back(small.arrive(id, 0, -1));
  auto m0 = all(g0);
  REQUIRE(m0[0].size() == 2);
  small.limits.settle = 30s;
  // Two newcomers arrive first; they must not close the list on their own.
  auto n1 = small.arrive("z.new", 1, -1);
  auto n2 = small.arrive("y.new", 1, -1);
  auto c = small.client();
  ElasticRendezvous watcher(c, "watcher", small.limits);
  for (int i = 0; i < 100 && !watcher.arrivals_waiting(1); ++i) std::this_thread::sleep_for(10ms);
  CHECK(watcher.arrivals_waiting(1));
  std::this_thread::sleep_for(300ms);
  CHECK(n1.wait_for(0ms) == std::future_status::timeout);  // still waiting for the members
  auto a = small.arrive("a", 1, 0);
  auto b = small.arrive("b", 1, 1);
  Membership ma = a.get(), mb = b.get(), mz = n1.get(), my = n2.get();
  CHECK(ma.ids == std::vector<std::string>{"a", "b", "y.new"});  // max 3: z.new is left out
  CHECK(my.rank == 2);
  CHECK(my.prev_ranks[2] == -1);
  CHECK(mz.excluded());
  watcher.mark_done();
  CHECK(watcher.done());
}

TEST_CASE("elastic: a newcomer outwaits its timeout until the members arrive", "[elastic]") {
  // The members reach generation 1 only after their communicator builds failed for
  // longer than the timeout (chaos runs: each up to the rendezvous timeout). A newcomer
  // that gave up then left a dead id in the list the members closed, and its restart
  // arrived one generation too late, over and over.
  Job job(1, 3, 200ms);
  std::vector<std::future<Membership>> g0;
  for (const char* id : {"a", "b"}) g0.push_back(job.arrive(id, 0, -1));
  REQUIRE(all(g0)[0].size() == 2);
  job.limits.timeout = 1s;
  auto newcomer = job.arrive("c.new", 1, -1);
  CHECK(newcomer.wait_for(1500ms) == std::future_status::timeout);  // past its timeout, still waiting
  auto a = job.arrive("a", 1, 0);
  auto b = job.arrive("b", 1, 1);
  Membership ma = a.get(), mb = b.get(), mc = newcomer.get();
  CHECK(ma.ids == std::vector<std::string>{"a", "b", "c.new"});
  CHECK(mc.rank == 2);
}
