// One test body for every backend and algorithm: each collective swept over dtypes,
// reduce ops, counts (0, 1, fewer than the world size, not divisible by it, >= 4 MiB),
// in place and out of place, with expected values computed on each rank.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <numeric>
#include <sstream>
#include <vector>

#include "comm/algorithms/registry.h"
#include "comm/launch/env.h"
#include "tests/support/dist_test.h"
#include "tests/support/typed_values.h"

using namespace dpt;
using namespace dpt::test;

namespace {

// The tcp backend's shared-memory arena: these tests run every rank on one host, so a
// tcp communicator of 2+ ranks has one unless the environment turned it off.
bool expect_arena() {
  auto on = [](const char* name) { return env::get_string(name) != "0"; };
  return backend() == "tcp" && world().size() > 1 && on("COMM_TCP_SHM") && on("COMM_TCP_SHM_COLL");
}

// Under COMM_FAKE_HOSTS (the fake-host tests): only what reads the topology, the
// hierarchical algorithms and auto (whose choice depends on it). Ring, tree, recursive
// doubling and the native collectives run the same code on any topology; the one-host
// tests sweep them.
bool fake_hosts() { return !env::get_string("COMM_FAKE_HOSTS").empty(); }

// Every algorithm registered for these collectives (comm/algorithms/registry.cpp), so a
// new one is swept without a line here; native: Open MPI's collectives, or the tcp
// backend's arena.
std::vector<Algo> algos(std::initializer_list<CollKind> kinds) {
  std::vector<Algo> a;
  if (fake_hosts()) a.push_back(Algo::automatic);
  for (const algo::Algorithm* x : algo::all())
    if (std::find(kinds.begin(), kinds.end(), x->kind) != kinds.end() &&
        std::find(a.begin(), a.end(), Algo::of(*x)) == a.end() &&
        (!fake_hosts() || Algo::of(*x).name() == "hierarchical"))
      a.push_back(Algo::of(*x));
  if ((backend() == "mpi" || expect_arena()) && !fake_hosts()) a.push_back(Algo::native);
  return a;
}

// MPI has no f16/bf16 datatypes: its native path refuses them (tested separately).
bool runs(Algo a, DType t) {
  return !(a == Algo::native && backend() == "mpi" && (t == DType::f16 || t == DType::bf16));
}

// With COMM_HIERARCHICAL_PIECE_BYTES set (the pipelined hierarchical allreduce's tests),
// a count of three pieces and a remainder for every dtype and op, not only the big
// (sum) counts: an op-specific bug in the pipeline (max reduced as sum) fails too.
size_t pieces_count(DType t) {
  const char* v = std::getenv("COMM_HIERARCHICAL_PIECE_BYTES");
  const long piece = v ? std::atol(v) : 0;
  return piece > 0 && piece <= (64 << 10) ? size_t(3 * piece + 100) / dtype_size(t) : 0;
}

// The big count: four ring segments (COMM_SEGMENT_BYTES, 1 MiB by default) and 5
// elements, so a chunk of it spans a whole segment and a partial one at 4 ranks. The
// suite's collectives tests set 256 KiB segments (and rings): as many segments and ring
// wraps with a quarter of the bytes to fill and check (arena rounds: 4 instead of 16).
size_t big_count(DType t) {
  const char* v = std::getenv("COMM_SEGMENT_BYTES");
  const size_t segment = v && std::atol(v) > 0 ? size_t(std::atol(v)) : size_t(1) << 20;
  return 4 * segment / dtype_size(t) + 5;
}

std::vector<size_t> counts(int n, DType t, bool big) {
  std::vector<size_t> c = {0, 1, size_t(7 * n + 3)};
  if (n > 2) c.push_back(size_t(n - 1));
  if (const size_t p = pieces_count(t); p > 0 && !big) c.push_back(p);
  if (big) c.push_back(big_count(t));
  return c;
}

void fill_input(std::vector<char>& buf, DType t, int r, ReduceOp op, size_t count, size_t offset = 0) {
  for (size_t i = 0; i < count; ++i) store_value(t, buf.data(), i, input_value(r, i + offset, op));
}

}  // namespace

TEST_CASE("auto picks the tcp shared-memory arena exactly when every rank shares this host") {
  Communicator& c = world();
  std::vector<float> x(1000);
  for (CollKind k : {CollKind::allreduce, CollKind::reduce_scatter, CollKind::allgather, CollKind::broadcast,
                     CollKind::reduce, CollKind::barrier}) {
    CollArgs a;
    a.kind = k;
    a.send = a.recv = make_buffer(x.data(), x.size());
    const Algo got = c.resolve_algo(a);
    INFO(coll_name(k) << " resolved to " << algo_name(got));
    if (expect_arena()) CHECK(got == Algo::native);
    else if (backend() == "tcp") CHECK(got != Algo::native);
  }
  CollArgs g;
  g.kind = CollKind::gather;
  CHECK(c.resolve_algo(g) != Algo::native);  // no arena gather: linear over messages
}

TEST_CASE("blocking calls behind queued async ones keep issue order (inline only when idle)") {
  Communicator& c = world();
  const int n = c.size(), r = c.rank();
  // Async allreduces queue on the worker; the blocking broadcast behind them must wait
  // its turn (it is not idle), and a blocking allreduce after that runs inline.
  std::vector<std::vector<int64_t>> bufs(8, std::vector<int64_t>(1000));
  std::vector<WorkPtr> works;
  for (size_t k = 0; k < bufs.size(); ++k) {
    std::fill(bufs[k].begin(), bufs[k].end(), int64_t(r + 1) * int64_t(k + 1));
    works.push_back(c.allreduce_async(make_buffer(bufs[k].data(), bufs[k].size()),
                                      make_buffer(bufs[k].data(), bufs[k].size()), ReduceOp::sum));
  }
  std::vector<int64_t> b(100, r == 0 ? 42 : -1);
  c.broadcast(make_buffer(b.data(), b.size()), 0);
  int64_t one = r, total = -1;
  c.allreduce(make_buffer(&one, 1), make_buffer(&total, 1), ReduceOp::sum);
  for (auto& w : works) w->wait();
  const int64_t ranks_sum = int64_t(n) * (n + 1) / 2;
  for (size_t k = 0; k < bufs.size(); ++k) CHECK(bufs[k][999] == ranks_sum * int64_t(k + 1));
  CHECK(b[99] == 42);
  CHECK(total == int64_t(n) * (n - 1) / 2);
}

TEST_CASE("allreduce over all algorithms, dtypes, ops, counts, in and out of place") {
  Communicator& c = world();
  const int n = c.size(), r = c.rank();
  for (Algo algo : algos({CollKind::allreduce})) {
    c.set_algo(algo);
    for (DType t : kAllDTypes) {
      if (!runs(algo, t)) continue;
      Failures f;
      for (ReduceOp op : kAllReduceOps) {
        const bool big = op == ReduceOp::sum || (op == ReduceOp::avg && t == DType::f32);
        for (size_t count : counts(n, t, big)) {
          const size_t es = dtype_size(t);
          std::vector<char> want(count * es);
          for (size_t i = 0; i < count; ++i) store_expected(t, want.data(), i, i, n, op);
          for (bool in_place : {false, true}) {
            std::vector<char> in(count * es), out(count * es, 0x5a);
            fill_input(in, t, r, op, count);
            Buffer sb{in.data(), count, t, {}};
            Buffer rb = in_place ? sb : Buffer{out.data(), count, t, {}};
            c.allreduce(sb, rb, op);
            const auto& got = in_place ? in : out;
            long bad = first_mismatch(got, want, t);
            if (bad >= 0)
              f.add(std::string(algo_name(algo)) + " " + dtype_name(t) + " " + reduce_op_name(op) + " count " +
                    std::to_string(count) + (in_place ? " in-place" : "") + ": first wrong element " + std::to_string(bad));
          }
        }
      }
      CHECK(all_ok(f.count == 0, f.msg.str()));
    }
  }
  c.set_algo(Algo::automatic);
}

TEST_CASE("reduce to every root and broadcast from every root") {
  Communicator& c = world();
  const int n = c.size(), r = c.rank();
  for (Algo algo : algos({CollKind::reduce, CollKind::broadcast})) {
    c.set_algo(algo);
    Failures f;
    for (DType t : {DType::f32, DType::i64, DType::bf16, DType::u8}) {
      if (!runs(algo, t)) continue;
      for (int root = 0; root < n; ++root) {
        for (size_t count : counts(n, t, root == n - 1)) {
          const size_t es = dtype_size(t);
          for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::avg}) {
            std::vector<char> in(count * es), out(count * es, 0), want(count * es);
            fill_input(in, t, r, op, count);
            for (size_t i = 0; i < count; ++i) store_expected(t, want.data(), i, i, n, op);
            std::vector<char> in_copy = in;
            c.reduce(Buffer{in.data(), count, t, {}}, Buffer{out.data(), count, t, {}}, op, root);
            if (r == root && first_mismatch(out, want, t) >= 0)
              f.add(std::string("reduce ") + algo_name(algo) + " " + dtype_name(t) + " root " + std::to_string(root));
            if (in != in_copy) f.add("reduce modified the send buffer");
          }
          // broadcast: root's values everywhere.
          std::vector<char> buf(count * es), want(count * es);
          fill_input(want, t, root, ReduceOp::sum, count);
          if (r == root) buf = want;
          c.broadcast(Buffer{buf.data(), count, t, {}}, root);
          if (first_mismatch(buf, want, t) >= 0)
            f.add(std::string("broadcast ") + algo_name(algo) + " " + dtype_name(t) + " root " + std::to_string(root) +
                  " count " + std::to_string(count));
        }
      }
    }
    CHECK(all_ok(f.count == 0, f.msg.str()));
  }
  c.set_algo(Algo::automatic);
}

TEST_CASE("reduce_scatter and allgather, in place and out of place") {
  Communicator& c = world();
  const int n = c.size(), r = c.rank();
  for (Algo algo : algos({CollKind::reduce_scatter, CollKind::allgather})) {
    c.set_algo(algo);
    Failures f;
    for (DType t : kAllDTypes) {
      if (!runs(algo, t)) continue;
      const size_t es = dtype_size(t);
      for (size_t count : counts(n, t, t == DType::f32 || t == DType::bf16)) {
        for (ReduceOp op : {ReduceOp::sum, ReduceOp::min, ReduceOp::avg, ReduceOp::prod}) {
          for (bool in_place : {false, true}) {
            std::vector<char> in(n * count * es), out(count * es, 0), want(count * es);
            fill_input(in, t, r, op, n * count);
            for (size_t i = 0; i < count; ++i) store_expected(t, want.data(), i, r * count + i, n, op);
            Buffer sb{in.data(), n * count, t, {}};
            Buffer rb = in_place ? sb.slice(r * count, count) : Buffer{out.data(), count, t, {}};
            c.reduce_scatter(sb, rb, op);
            std::vector<char> got(static_cast<char*>(rb.data), static_cast<char*>(rb.data) + count * es);
            if (first_mismatch(got, want, t) >= 0)
              f.add(std::string("reduce_scatter ") + algo_name(algo) + " " + dtype_name(t) + " " + reduce_op_name(op) +
                    " count " + std::to_string(count) + (in_place ? " in-place" : ""));
          }
        }
        for (bool in_place : {false, true}) {
          std::vector<char> mine(count * es), all(n * count * es, 0), want(n * count * es);
          for (int q = 0; q < n; ++q)
            for (size_t i = 0; i < count; ++i) store_value(t, want.data(), q * count + i, input_value(q, i, ReduceOp::sum));
          fill_input(mine, t, r, ReduceOp::sum, count);
          Buffer rb{all.data(), n * count, t, {}};
          Buffer sb = in_place ? rb.slice(r * count, count) : Buffer{mine.data(), count, t, {}};
          if (in_place) std::memcpy(sb.data, mine.data(), mine.size());
          c.allgather(sb, rb);
          if (first_mismatch(all, want, t) >= 0)
            f.add(std::string("allgather ") + algo_name(algo) + " " + dtype_name(t) + " count " + std::to_string(count) +
                  (in_place ? " in-place" : ""));
        }
      }
    }
    CHECK(all_ok(f.count == 0, f.msg.str()));
  }
  c.set_algo(Algo::automatic);
}

TEST_CASE("gather, scatter, alltoall and barrier") {
  Communicator& c = world();
  const int n = c.size(), r = c.rank();
  Failures f;
  for (Algo algo : {Algo::automatic, backend() == "mpi" ? Algo::native : Algo::automatic}) {
    c.set_algo(algo);
    for (size_t count : {size_t(0), size_t(1), size_t(5), size_t(300000)}) {
      for (int root : {0, n - 1}) {
        std::vector<int32_t> mine(count), all(n * count, -1);
        for (size_t i = 0; i < count; ++i) mine[i] = int32_t(r * 1000003 + i);
        c.gather(make_buffer(mine.data(), count), make_buffer(all.data(), all.size()), root);
        if (r == root)
          for (int q = 0; q < n; ++q)
            for (size_t i = 0; i < count; ++i)
              if (all[q * count + i] != int32_t(q * 1000003 + i)) { f.add("gather wrong at rank " + std::to_string(q)); q = n; break; }
        // scatter: root sends slot q = q*7 + i to rank q.
        std::vector<int32_t> src(n * count), dst(count, -1);
        if (r == root)
          for (int q = 0; q < n; ++q)
            for (size_t i = 0; i < count; ++i) src[q * count + i] = int32_t(q * 7 + i);
        c.scatter(make_buffer(src.data(), src.size()), make_buffer(dst.data(), count), root);
        for (size_t i = 0; i < count; ++i)
          if (dst[i] != int32_t(r * 7 + i)) { f.add("scatter wrong at " + std::to_string(i)); break; }
      }
      // alltoall: slot q of rank r's send holds (r, q, i); rank q receives it in slot r.
      std::vector<int64_t> send(n * count), recv(n * count, -1);
      for (int q = 0; q < n; ++q)
        for (size_t i = 0; i < count; ++i) send[q * count + i] = int64_t(r) * 1000000 + q * 1000 + int64_t(i);
      c.alltoall(make_buffer(send.data(), send.size()), make_buffer(recv.data(), recv.size()));
      for (int q = 0; q < n; ++q)
        for (size_t i = 0; i < count; ++i)
          if (recv[q * count + i] != int64_t(q) * 1000000 + r * 1000 + int64_t(i)) { f.add("alltoall wrong from rank " + std::to_string(q)); q = n; break; }
      c.barrier();
    }
  }
  c.set_algo(Algo::automatic);
  CHECK(all_ok(f.count == 0, f.msg.str()));
}

TEST_CASE("tagged point-to-point matches by tag, in order per tag") {
  Communicator& c = world();
  const int n = c.size(), r = c.rank();
  if (n == 1) {
    std::vector<float> x(4);
    CHECK_THROWS_AS(c.isend(make_buffer(x.data(), x.size()), 0, 1), UsageError);
    return;
  }
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  // Send tag 7 then tag 3; receive tag 3 first: tags, not arrival order, decide.
  std::vector<int32_t> a(1000, r * 10 + 7), b(100, r * 10 + 3), ra(1000), rb(100);
  auto s1 = c.isend(make_buffer(a.data(), a.size()), right, 7);
  auto s2 = c.isend(make_buffer(b.data(), b.size()), right, 3);
  c.recv(make_buffer(rb.data(), rb.size()), left, 3);
  c.recv(make_buffer(ra.data(), ra.size()), left, 7);
  s1->wait();
  s2->wait();
  bool ok = ra == std::vector<int32_t>(1000, left * 10 + 7) && rb == std::vector<int32_t>(100, left * 10 + 3);
  // Two messages with one tag arrive in order.
  int32_t m1 = r, m2 = r + 100, g1 = -1, g2 = -1;
  auto w1 = c.isend(make_buffer(&m1, 1), right, 9);
  auto w2 = c.isend(make_buffer(&m2, 1), right, 9);
  c.recv(make_buffer(&g1, 1), left, 9);
  c.recv(make_buffer(&g2, 1), left, 9);
  wait_all({w1, w2}, c.timeout());
  ok = ok && g1 == left && g2 == left + 100;
  CHECK(all_ok(ok, "point-to-point data wrong"));
  CHECK_THROWS_AS(c.isend(make_buffer(&m1, 1), n, 1), UsageError);
  CHECK_THROWS_AS(c.isend(make_buffer(&m1, 1), right, -1), UsageError);
}

TEST_CASE("async collectives complete in issue order and overlap the caller") {
  Communicator& c = world();
  const int n = c.size(), r = c.rank();
  std::vector<std::vector<float>> bufs(6, std::vector<float>(100000));
  std::vector<WorkPtr> works;
  for (size_t k = 0; k < bufs.size(); ++k) {
    std::fill(bufs[k].begin(), bufs[k].end(), float(r + k));
    works.push_back(c.allreduce_async(make_buffer(bufs[k].data(), bufs[k].size()),
                                      make_buffer(bufs[k].data(), bufs[k].size()), ReduceOp::sum));
  }
  bool ok = true;
  for (size_t k = 0; k < bufs.size(); ++k) {
    works[k]->wait();
    float want = float(n * (n - 1) / 2 + n * int(k));
    ok = ok && bufs[k].front() == want && bufs[k].back() == want;
    CHECK(works[k]->test());
  }
  CHECK(all_ok(ok, "async allreduce results wrong"));
}

TEST_CASE("split into subgroups by color and key") {
  Communicator& c = world();
  const int n = c.size(), r = c.rank();
  // Even and odd ranks, ordered by descending rank.
  auto sub = c.split(r % 2, -r);
  REQUIRE(sub);
  int expected_size = (n + 1 - r % 2) / 2;
  bool ok = sub->size() == expected_size;
  int64_t v = r, sum = 0;
  sub->allreduce(make_buffer(&v, 1), make_buffer(&sum, 1), ReduceOp::sum);
  int64_t want = 0;
  for (int q = r % 2; q < n; q += 2) want += q;
  ok = ok && sum == want;
  // Highest rank of the color is the subgroup's rank 0.
  int highest = (n - 1) - ((n - 1 - r % 2) % 2);
  ok = ok && (sub->rank() == 0) == (r == highest);
  // The parent still works while the child exists, and the child's split works too.
  auto none = c.split(r == 0 ? 0 : Communicator::kUndefinedColor, 0);
  ok = ok && ((r == 0) == (none != nullptr));
  auto grand = sub->split(0, sub->rank());
  int64_t one = 1, cnt = 0;
  grand->allreduce(make_buffer(&one, 1), make_buffer(&cnt, 1), ReduceOp::sum);
  ok = ok && cnt == sub->size();
  // A split after one where some ranks passed kUndefinedColor: every rank counted it, so
  // the new group's members agree on its context (they did not: issue 25).
  auto again = c.split(0, r);
  int64_t all_n = 0;
  again->allreduce(make_buffer(&one, 1), make_buffer(&all_n, 1), ReduceOp::sum);
  ok = ok && all_n == n;
  CHECK(all_ok(ok, "split produced wrong groups"));
}

TEST_CASE("byte-string helpers for all_gather_object") {
  Communicator& c = world();
  const int n = c.size(), r = c.rank();
  std::string mine = "rank-" + std::to_string(r) + std::string(size_t(r) * 3, 'x');
  auto all = c.allgather_bytes(mine);
  bool ok = int(all.size()) == n;
  for (int q = 0; q < n && ok; ++q) ok = all[q] == "rank-" + std::to_string(q) + std::string(size_t(q) * 3, 'x');
  std::string b = c.broadcast_bytes(r == n - 1 ? std::string("hello from the last rank") : std::string(), n - 1);
  ok = ok && b == "hello from the last rank";
  CHECK(all_ok(ok, "byte helpers wrong"));
}

TEST_CASE("bad arguments are clear errors, raised before any communication") {
  Communicator& c = world();
  const int n = c.size();
  std::vector<float> a(8), b(7);
  CHECK_THROWS_AS(c.allreduce(make_buffer(a.data(), 8), make_buffer(b.data(), 7), ReduceOp::sum), UsageError);
  CHECK_THROWS_AS(c.broadcast(make_buffer(a.data(), 8), n), UsageError);
  CHECK_THROWS_AS(c.allgather(make_buffer(a.data(), 8), make_buffer(b.data(), 7)), UsageError);
  std::vector<int32_t> ints(8);
  CHECK_THROWS_AS(c.allreduce(make_buffer(a.data(), 8), make_buffer(ints.data(), 8), ReduceOp::sum), UsageError);
  try {
    c.reduce_scatter(make_buffer(a.data(), 8), make_buffer(b.data(), 7), ReduceOp::sum);
    FAIL("expected UsageError");
  } catch (const UsageError& e) {
    std::string what = e.what();
    CHECK(what.find("reduce_scatter") != std::string::npos);
    CHECK(what.find("rank " + std::to_string(c.rank())) != std::string::npos);
  }
  if (backend() == "mpi") {
    // f16 has no MPI datatype: forcing native is an error that says what to do instead.
    c.set_algo(Algo::native);
    std::vector<uint16_t> h(4);
    Buffer hb{h.data(), 4, DType::f16, {}};
    CHECK_THROWS_WITH(c.allreduce(hb, hb, ReduceOp::sum), Catch::Contains("no native allreduce"));
    c.set_algo(Algo::automatic);
  }
  // The communicator still works after caller errors.
  float one = 1, total = 0;
  c.allreduce(make_buffer(&one, 1), make_buffer(&total, 1), ReduceOp::sum);
  CHECK(total == float(n));
}

// Payload accounting (comm/traffic.h) and retirement, on a communicator of its own so the
// world stays usable: the counts are what the calls handed in and got out, and a retired
// communicator refuses every later call with an error naming its backend and the reason.
TEST_CASE("traffic counts each call's payload; a retired communicator refuses further calls") {
  auto sub = world().split(0, world().rank());
  REQUIRE(sub);
  const int n = sub->size(), r = sub->rank();
  const Traffic t0 = sub->traffic();
  std::vector<float> x(1000, 1.0f), all(1000 * size_t(n));
  sub->allreduce(make_buffer(x.data(), x.size()), ReduceOp::sum);          // 4000 in, 4000 out
  sub->allgather(make_buffer(x.data(), 10), make_buffer(all.data(), 10 * size_t(n)));  // 40 in, 40n out
  sub->broadcast(make_buffer(x.data(), 100), 0);                           // root: 400 in; others: 400 out
  const Traffic t1 = sub->traffic();
  const uint64_t sent = 4000 + 40 + (r == 0 ? 400 : 0), received = 4000 + 40 * uint64_t(n) + (r == 0 ? 0 : 400);
  CHECK(all_ok(t1.ops - t0.ops == 3 && t1.bytes_sent - t0.bytes_sent == sent && t1.bytes_received - t0.bytes_received == received,
               "traffic: ops " + std::to_string(t1.ops - t0.ops) + " sent " + std::to_string(t1.bytes_sent - t0.bytes_sent) +
                   " (want " + std::to_string(sent) + ") received " + std::to_string(t1.bytes_received - t0.bytes_received) +
                   " (want " + std::to_string(received) + ")"));
  sub->retire("switched away in a test");
  CHECK(sub->retired());
  auto refused = [&](auto&& call) {
    try {
      call();
    } catch (const UsageError& e) {
      const std::string what = e.what();
      return what.find("retired") != std::string::npos && what.find("switched away in a test") != std::string::npos &&
             what.find(sub->backend_name()) != std::string::npos;
    }
    return false;
  };
  CHECK(refused([&] { sub->allreduce(make_buffer(x.data(), x.size()), ReduceOp::sum); }));
  CHECK(refused([&] { sub->allreduce_async(make_buffer(x.data(), x.size()), make_buffer(x.data(), x.size()), ReduceOp::sum); }));
  CHECK(refused([&] { sub->barrier(); }));
  if (n > 1) CHECK(refused([&] { sub->isend(make_buffer(x.data(), 1), (r + 1) % n, 5); }));
  CHECK(sub->traffic().bytes() == t1.bytes());  // nothing more was carried
  world().barrier();
}

// Traffic::other_hosts_*: bytes exchanged with ranks on other hosts (COMM_FAKE_HOSTS's
// emulated ones count; DiLoCo's tests measure what crosses between its groups with it).
// A message from the first rank of host 0 to the first rank of host 1 counts on both, in
// the world and in the split holding both; a collective inside one host counts nothing
// for that host's communicator.
TEST_CASE("traffic counts the bytes exchanged with other hosts") {
  Communicator& w = world();
  const Topology& t = w.topology();
  std::vector<float> x(1000, 1.0f);
  auto same_host = w.split(t.my_host(), w.rank());
  REQUIRE(same_host);
  const Traffic h0 = same_host->traffic();
  same_host->allreduce(make_buffer(x.data(), x.size()), ReduceOp::sum);
  const Traffic h1 = same_host->traffic();
  // (Open MPI's splits apply COMM_FAKE_HOSTS to their own ranks again: such a split may
  // see several emulated hosts where its parent saw one.)
  const bool one_host = same_host->topology().hosts() == 1;
  CHECK(all_ok(!one_host || h1.other_hosts_bytes() == h0.other_hosts_bytes(),
               "a collective within one host counted bytes to other hosts"));
  if (t.hosts() > 1) {
    const int a = t.ranks_of_host(0).front(), b = t.ranks_of_host(1).front();
    auto pair = w.split(w.rank() == a || w.rank() == b ? 0 : Communicator::kUndefinedColor, w.rank());
    const Traffic w0 = w.traffic();
    const Traffic p0 = pair ? pair->traffic() : Traffic{};
    if (w.rank() == a) w.send(make_buffer(x.data(), x.size()), b, 4711);
    if (w.rank() == b) w.recv(make_buffer(x.data(), x.size()), a, 4711);
    if (pair && pair->rank() == 0) pair->send(make_buffer(x.data(), 10), 1, 4712);
    if (pair && pair->rank() == 1) pair->recv(make_buffer(x.data(), 10), 0, 4712);
    const Traffic w1 = w.traffic();
    const Traffic p1 = pair ? pair->traffic() : Traffic{};
    // The split's message moves on the world's point-to-point calls (tcp) or the split's
    // own (Open MPI): the split counts it either way.
    const uint64_t ws = w1.other_hosts_sent - w0.other_hosts_sent, wr = w1.other_hosts_received - w0.other_hosts_received;
    const uint64_t ps = p1.other_hosts_sent - p0.other_hosts_sent, pr = p1.other_hosts_received - p0.other_hosts_received;
    const bool pair_ok = !pair || (pair->rank() == 0 ? ps == 40 && pr == 0 : ps == 0 && pr == 40);
    const bool ok = (w.rank() == a   ? ws >= 4000 && wr == 0
                     : w.rank() == b ? ws == 0 && wr >= 4000
                                     : ws == 0 && wr == 0) &&
                    pair_ok;
    CHECK(all_ok(ok, "other hosts: world sent " + std::to_string(ws) + " received " + std::to_string(wr) + ", pair sent " +
                         std::to_string(ps) + " received " + std::to_string(pr)));
  }
  w.barrier();
}
